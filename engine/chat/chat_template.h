#pragma once
// Chat templates: a model's Jinja template (tokenizer_config.json `chat_template`,
// chat_template.jinja, or GGUF tokenizer.chat_template) rendered by our own Jinja subset, so that
// it agrees with Python jinja2 as transformers configures it (trim_blocks, lstrip_blocks).
#include <cstdint>
#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/chat/message.h"

namespace rose {

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token;  // the tokenizer's BOS text ("" when it has none)
  std::string eos_token;
  std::optional<std::tm> now;    // what strftime_now formats (default: the local time at render)
  int64_t max_render_steps = 0;  // 0: the interpreter's default bound (a few million steps)
};

// Renders `messages` with `source` (the template text). Throws rose::Error naming `source_name`
// for a template that does not parse, uses a construct the interpreter does not support, runs past
// its step limit, or calls raise_exception (the message is the template's own).
std::string render_chat_template(std::string_view source, const std::string& source_name,
                                 std::span<const ChatMessage> messages,
                                 const ChatTemplateOptions& options);

}  // namespace rose
