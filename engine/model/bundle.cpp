#include "engine/model/bundle.h"

#include <filesystem>

#include "engine/model/presets.h"

namespace rose {

ModelBundle open_model_bundle(const std::string& model_or_preset) {
  ModelBundle bundle;
  bundle.name = model_or_preset;
  bundle.weights = open_model(model_or_preset);
  const ModelConfig& config = bundle.weights->config();
  if (preset_config(model_or_preset)) {
    bundle.tokenizer = make_byte_tokenizer(config.vocab_size);
    bundle.tokenizer_source = "preset";
  } else {
    const std::filesystem::path path = std::filesystem::path(model_or_preset) / "tokenizer.json";
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      bundle.tokenizer = load_tokenizer_json(path);
      bundle.tokenizer_source = path.string();
    }
  }
  bundle.eos_ids.assign(config.eos_token_ids.begin(), config.eos_token_ids.end());
  return bundle;
}

}  // namespace rose
