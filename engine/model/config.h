#pragma once
// The model shape every backend works from, whatever its source (a Hugging Face config.json or a
// preset). Field meanings follow Hugging Face's config.json (reference/formats.md).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/common/norm_kind.h"

namespace rose {

enum class Arch { kGpt2, kLlama };

const char* arch_name(Arch arch);

// The MLP's shape: up (I, H) + bias then gelu-tanh, or one fused gate|up (2I, H) then
// silu(gate) * up; both end in down (H, I).
enum class MlpKind { kGeluTanh, kSiluGated };

struct RopeScaling {
  std::string type;  // "" (none) or "llama3"; other types are rejected at load time
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string name;  // preset name or the model folder's name; part of the prefix-cache key
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;  // GPT-2: n_inner, or 4 * hidden when null
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // == num_heads for GPT-2
  int head_dim = 0;
  int max_position_embeddings = 0;
  float norm_eps = 1e-5f;  // layer_norm_epsilon or rms_norm_eps
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = true;
  bool qkv_bias =
      false;  // GPT-2 always has biases everywhere; Llama only with attention_bias (Qwen2)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  bool synthetic_weights = false;  // a preset: deterministic random weights, meaningless text
  // Tensor parallel (engine/parallel/shard_plan.h): set when this config is rank `tp_rank`'s shard
  // of a model split over `tp_size` devices. num_heads, num_kv_heads and intermediate_size are then
  // the shard's; hidden and vocab stay the model's (the embedding is whole on every rank), and the
  // shard's own lm_head.weight holds vocab rows [lm_head_begin, lm_head_begin + lm_head_rows).
  int tp_rank = 0;
  int tp_size = 1;
  int lm_head_begin = 0;
  int lm_head_rows = 0;

  // The model properties that follow from the architecture. Code asks these instead of testing
  // `arch`, so adding an architecture means answering them here, not finding every branch.
  // Positions: a learned (max_position_embeddings, hidden) table added to the token embedding
  // (GPT-2), else rotary embeddings applied to q and k (Llama family); exactly one holds.
  bool uses_learned_positions() const { return arch == Arch::kGpt2; }
  bool uses_rope() const { return !uses_learned_positions(); }
  NormKind norm_kind() const {
    return arch == Arch::kGpt2 ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  }
  MlpKind mlp_kind() const {
    return arch == Arch::kGpt2 ? MlpKind::kGeluTanh : MlpKind::kSiluGated;
  }
  // Biases on the o, up and down projections (GPT-2 has them on every linear layer).
  bool has_linear_biases() const { return arch == Arch::kGpt2; }
  // A qkv bias: with the other linear biases, or alone (Qwen2's attention_bias).
  bool has_qkv_bias() const { return has_linear_biases() || qkv_bias; }
  // Rows of the up projection: I, or 2I for the fused gate|up of a gated MLP.
  int64_t mlp_up_rows() const {
    return (mlp_kind() == MlpKind::kSiluGated ? 2 : 1) * int64_t(intermediate_size);
  }

  bool is_shard() const { return tp_size > 1; }
  // Rows of the lm_head this config computes logits for: the vocabulary, or a shard's part of it.
  int lm_head_vocab_rows() const { return is_shard() ? lm_head_rows : vocab_size; }

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  // Elements of K plus V that one token occupies across all layers.
  int64_t kv_elements_per_token() const { return int64_t(2) * num_layers * kv_dim(); }
  int64_t num_parameters() const;
  // Throws rose::Error naming `source` when a field is inconsistent (head_dim * heads, GQA
  // ratio...).
  void validate(const std::string& source) const;
};

// Parses a Hugging Face config.json (GPT-2, Llama, Mistral, Qwen2). Errors name the file and field.
ModelConfig load_config_json(const std::filesystem::path& path);

}  // namespace rose
