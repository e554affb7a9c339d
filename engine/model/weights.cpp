#include "engine/model/weights.h"

#include <filesystem>

#include "engine/common/error.h"
#include "engine/model/hf_weights.h"
#include "engine/model/presets.h"

namespace rose {

int64_t unpermuted_row(int64_t row, int64_t rows, int heads) {
  if (heads <= 0) return row;
  const int64_t head_dim = rows / heads, half = head_dim / 2;
  const int64_t head = row / head_dim, within = row % head_dim;
  return head * head_dim + (within % 2) * half + within / 2;
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorSpec> canonical_tensors(const ModelConfig& config) {
  const bool layer_norm = config.norm_kind() == NormKind::kLayerNorm;  // norms carry a bias
  const bool biases = config.has_linear_biases();
  const int64_t hidden = config.hidden_size;
  const int64_t inter = config.intermediate_size;
  const int64_t qkv = config.qkv_dim();
  std::vector<TensorSpec> specs;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    specs.push_back({std::move(name), std::move(shape)});
  };
  add("tok_emb", {config.vocab_size, hidden});
  if (config.uses_learned_positions()) add("pos_emb", {config.max_position_embeddings, hidden});
  for (int layer = 0; layer < config.num_layers; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    add(prefix + "attn_norm.weight", {hidden});
    if (layer_norm) add(prefix + "attn_norm.bias", {hidden});
    add(prefix + "qkv.weight", {qkv, hidden});
    if (config.has_qkv_bias()) add(prefix + "qkv.bias", {qkv});
    add(prefix + "o.weight", {hidden, config.q_dim()});
    if (biases) add(prefix + "o.bias", {hidden});
    add(prefix + "mlp_norm.weight", {hidden});
    if (layer_norm) add(prefix + "mlp_norm.bias", {hidden});
    add(prefix + "up.weight", {config.mlp_up_rows(), hidden});
    if (biases) add(prefix + "up.bias", {inter});
    add(prefix + "down.weight", {hidden, inter});
    if (biases) add(prefix + "down.bias", {hidden});
  }
  add("final_norm.weight", {hidden});
  if (layer_norm) add("final_norm.bias", {hidden});
  if (!config.tie_word_embeddings) add("lm_head.weight", {config.lm_head_vocab_rows(), hidden});
  return specs;
}

std::unique_ptr<WeightSource> open_model(const std::string& model_or_preset) {
  if (std::unique_ptr<WeightSource> preset = open_preset(model_or_preset)) return preset;
  const std::filesystem::path folder(model_or_preset);
  std::error_code ec;
  if (!model_or_preset.empty() && std::filesystem::is_directory(folder, ec) &&
      std::filesystem::exists(folder / "config.json", ec)) {
    return open_hf_model(folder);
  }
  fail("unknown model '{}': not a preset ({}) nor a folder with config.json", model_or_preset,
       preset_names_text());
}

}  // namespace rose
