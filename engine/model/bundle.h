#pragma once
// ModelBundle: everything a model folder or preset brings besides the backend: weights, tokenizer,
// chat template and end-token set, resolved together so callers never probe files themselves.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace rose {

struct ModelBundle {
  std::string name;  // what the caller asked for (preset name or folder)
  std::unique_ptr<WeightSource> weights;
  std::unique_ptr<Tokenizer> tokenizer;  // null if the model has none (a folder without one)
  std::string tokenizer_source;          // "preset", the tokenizer file's path, or "" if none
  std::string chat_template;             // "" if none (prompts use render_plain_chat)
  std::vector<int32_t> eos_ids;          // the model's whole end set
  const ModelConfig& config() const { return weights->config(); }
};

// Opens a preset (byte tokenizer) or a Hugging Face folder (tokenizer.json when present).
ModelBundle open_model_bundle(const std::string& model_or_preset);

}  // namespace rose
