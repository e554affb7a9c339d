#pragma once
// WeightSource over a Hugging Face checkpoint folder: maps GPT-2 and Llama-family tensor names onto
// the canonical layout of engine/model/weights.h (transposing Conv1D, fusing qkv and gate|up).
#include <filesystem>
#include <memory>

#include "engine/model/weights.h"

namespace rose {

// `folder` holds config.json and model.safetensors or model.safetensors.index.json. Every tensor's
// presence, dtype and shape is checked against the config here, before any data is read.
std::unique_ptr<WeightSource> open_hf_model(const std::filesystem::path& folder);

}  // namespace rose
