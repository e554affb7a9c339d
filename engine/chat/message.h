#pragma once
// One chat turn as prompt files carry it (OpenAI's `messages`), kept until the model's chat
// template renders the conversation into prompt text.
#include <string>

namespace rose {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", ...
  std::string content;  // plain text (OpenAI's array-of-parts content is joined to text)
};

}  // namespace rose
