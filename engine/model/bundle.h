#pragma once
// ModelBundle: everything a model brings besides the backend: weights, tokenizer, chat template and
// end-token set, resolved together from a preset, a .gguf file, a Hugging Face folder or a repo id
// in the local Hugging Face cache, so callers never probe files themselves.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace rose {

struct ModelBundle {
  std::string name;    // what the caller asked for (preset name, file, folder or repo id)
  std::string format;  // "preset", "gguf" or "safetensors"
  std::unique_ptr<WeightSource> weights;
  std::unique_ptr<Tokenizer> tokenizer;  // null if the model has none (a folder without one)
  std::string tokenizer_source;          // "preset", the tokenizer file's path, or "" if none
  std::string chat_template;             // Jinja source; "" if none (messages lines are refused)
  std::string chat_template_source;      // where it came from, for messages and `info`
  std::string bos_token, eos_token;      // their text, as templates see them ("" if none)
  std::vector<int32_t> eos_ids;          // the model's whole end set
  const ModelConfig& config() const { return weights->config(); }
};

struct BundleOptions {
  std::string chat_template_path;  // --chat-template: overrides the model's own template
};

// Opens what --model names (engine/model/model_source.h says how it is found). Presets get a byte
// tokenizer and a plain built-in template ("role: content" lines, then "assistant:"); folders
// read tokenizer.json, tokenizer_config.json / chat_template.jinja and generation_config.json;
// GGUF files carry all of it in their metadata. Errors name the file and the field.
ModelBundle open_model_bundle(const std::string& model, const BundleOptions& options = {});

}  // namespace rose
