#pragma once
// Request preparation: parsed prompt lines (RequestSpec) to engine requests for one model: chat
// rendering, tokenization, defaults, seeds, the context limit and the one token-id range check.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/chat/message.h"
#include "engine/io/prompts.h"
#include "engine/model/bundle.h"
#include "engine/scheduler/request.h"

namespace rose {

// Defaults for what a prompt line does not say itself.
struct RequestDefaults {
  int max_tokens = 16;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  bool ignore_eos = false;
};

// The fallback for models without a chat template: "role: content\n" per message, then
// "assistant:" for the model to continue.
std::string render_plain_chat(std::span<const ChatMessage> messages);

// The text a request's prompt is: the prompt as given, or its messages rendered with the model's
// chat template (generation prompt added). rose::Error naming `where` when the model has no
// template or the template raises.
std::string render_prompt_text(const RequestSpec& spec, const ModelBundle& model,
                               const std::string& where);

// One EngineRequest per spec, in order. `source` names the file (or dataset) in errors, which say
// "FILE:LINE: field 'x': ...". Request i without a seed gets `seed + i`. rose::Error for a text
// prompt without a tokenizer, one that tokenizes to nothing, an id outside the vocabulary, or
// prompt + max_tokens over `context_limit`.
std::vector<EngineRequest> prepare_requests(const std::vector<RequestSpec>& specs,
                                            const std::string& source, const ModelBundle& model,
                                            const RequestDefaults& defaults, uint64_t seed,
                                            int context_limit);

// One request of prepare_requests: `index` is its place among the requests (seed + index).
EngineRequest prepare_request(const RequestSpec& spec, size_t index, const std::string& source,
                              const ModelBundle& model, const RequestDefaults& defaults,
                              uint64_t seed, int context_limit);

// The completion text of a finished request: its output decoded (special tokens left out unless
// the line set skip_special_tokens false), cut before the first stop string as OpenAI does.
std::string completion_text(const RequestSpec& spec, const ModelBundle& model,
                            std::span<const int32_t> output_ids);

}  // namespace rose
