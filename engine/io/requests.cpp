#include "engine/io/requests.h"

#include <fmt/format.h>

#include "engine/chat/chat_template.h"
#include "engine/common/error.h"
#include "engine/scheduler/stop_strings.h"

namespace rose {

std::string render_plain_chat(std::span<const ChatMessage> messages) {
  std::string prompt;
  for (const ChatMessage& message : messages) {
    prompt += message.role;
    prompt += ": ";
    prompt += message.content;
    prompt += '\n';
  }
  prompt += "assistant:";
  return prompt;
}

std::string render_prompt_text(const RequestSpec& spec, const ModelBundle& model,
                               const std::string& where) {
  if (spec.messages.empty()) return spec.prompt.value_or("");
  if (model.chat_template.empty()) {
    fail(
        "{}: field 'messages': model '{}' has no chat template; give --chat-template FILE, or a "
        "'prompt' instead",
        where, model.name);
  }
  ChatTemplateOptions options;
  options.bos_token = model.bos_token;
  options.eos_token = model.eos_token;
  try {
    return render_chat_template(model.chat_template, model.chat_template_source, spec.messages,
                                options);
  } catch (const Error& e) {
    fail("{}: field 'messages': {}", where, e.what());
  }
}

namespace {

// The prompt's token ids: as given, or the text (chat messages rendered first) tokenized. A
// rendered chat template writes BOS itself when the model wants one (transformers tokenizes it
// with add_special_tokens=False), so only plain text gets the tokenizer's own BOS.
std::vector<int32_t> prompt_ids(const RequestSpec& spec, const ModelBundle& model,
                                const std::string& where) {
  if (spec.prompt_token_ids) return *spec.prompt_token_ids;
  if (!model.tokenizer) {
    fail(
        "{}: field 'prompt': model '{}' has no tokenizer.json, so text prompts cannot be "
        "tokenized; give prompt_token_ids instead",
        where, model.name);
  }
  const std::string text = render_prompt_text(spec, model, where);
  std::vector<int32_t> ids = model.tokenizer->encode(text, /*add_special=*/spec.messages.empty());
  if (ids.empty()) fail("{}: field 'prompt': tokenizes to no tokens", where);
  return ids;
}

// The one token-id range check between a prompt line and the engine.
void check_token_ids(const std::vector<int32_t>& ids, const RequestSpec& spec,
                     const ModelBundle& model, const std::string& where) {
  const int vocab = model.config().vocab_size;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] >= 0 && ids[k] < vocab) continue;
    if (spec.prompt_token_ids) {
      fail(
          "{}: field 'prompt_token_ids[{}]': token id {} is outside the vocabulary of '{}' ({} "
          "tokens)",
          where, k, ids[k], model.name, vocab);
    }
    fail(
        "{}: token {} of the tokenized prompt has id {}, outside the vocabulary of '{}' ({} "
        "tokens)",
        where, k, ids[k], model.name, vocab);
  }
}

}  // namespace

EngineRequest prepare_request(const RequestSpec& spec, size_t index, const std::string& source,
                              const ModelBundle& model, const RequestDefaults& defaults,
                              uint64_t seed, int context_limit) {
  // Synthetic workloads have no line; name the request by its id instead.
  const std::string where = spec.line > 0 ? fmt::format("{}:{}", source, spec.line)
                                          : fmt::format("{} request '{}'", source, spec.id);
  EngineRequest r;
  r.prompt = prompt_ids(spec, model, where);
  check_token_ids(r.prompt, spec, model, where);
  r.max_tokens = spec.max_tokens.value_or(defaults.max_tokens);
  const int64_t needed = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
  if (needed > context_limit) {
    fail("{}: {} prompt tokens + max_tokens {} = {} is more than the context length {} of '{}'",
         where, r.prompt.size(), r.max_tokens, needed, context_limit, model.name);
  }
  r.sampling.temperature = spec.temperature.value_or(defaults.temperature);
  r.sampling.top_k = spec.top_k.value_or(defaults.top_k);
  r.sampling.top_p = spec.top_p.value_or(defaults.top_p);
  r.sampling.seed = spec.seed.value_or(seed + index);
  r.ignore_eos = spec.ignore_eos.value_or(defaults.ignore_eos);
  r.stop = spec.stop;
  return r;
}

std::vector<EngineRequest> prepare_requests(const std::vector<RequestSpec>& specs,
                                            const std::string& source, const ModelBundle& model,
                                            const RequestDefaults& defaults, uint64_t seed,
                                            int context_limit) {
  std::vector<EngineRequest> out;
  out.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    out.push_back(prepare_request(specs[i], i, source, model, defaults, seed, context_limit));
  }
  return out;
}

std::string completion_text(const RequestSpec& spec, const ModelBundle& model,
                            std::span<const int32_t> output_ids) {
  if (!model.tokenizer) return "";
  const std::string text =
      model.tokenizer->decode(output_ids, spec.skip_special_tokens.value_or(true));
  return std::string(cut_at_stop_string(text, spec.stop));
}

}  // namespace rose
