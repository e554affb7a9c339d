#pragma once
// Built-in models with deterministic synthetic weights: they run on a fresh machine with no
// checkpoint, produce meaningless text, and have real speed. Every value is a function of the
// preset's seed, the tensor's index in canonical_tensors() order and the element index
// (kernels/common/counter_rng.h), so the CPU and the GPU generate bit-identical fp32 weights.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace rose {

// "tiny", "gpt2", "llama-1b", "llama-8b", "llama-70b" (tiny first: it is the CPU and test default).
std::vector<std::string> preset_names();
// "tiny, gpt2, llama-1b, llama-8b", for help texts and errors.
std::string preset_names_text();

// nullopt for a name that is not a preset.
std::optional<ModelConfig> preset_config(std::string_view name);
uint64_t preset_seed(std::string_view name);

// The per-tensor seed: mixes the preset seed with the tensor's index in canonical_tensors order.
uint64_t synthetic_tensor_seed(uint64_t preset_seed, size_t tensor_index);
// How canonical tensor number `tensor_index` is generated: norm weights 1, biases 0, embeddings and
// matrices uniform in +-1/sqrt(fan_in) (embeddings +-1/sqrt(hidden)) so activations stay O(1).
SyntheticInit synthetic_init(const ModelConfig& config, const TensorSpec& spec, size_t tensor_index,
                             uint64_t preset_seed);

// A synthetic WeightSource for a preset name; nullptr when `name` is not a preset.
std::unique_ptr<WeightSource> open_preset(std::string_view name);

}  // namespace rose
