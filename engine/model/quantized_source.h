#pragma once
// --quantize: a WeightSource whose linear-layer matrices are quantized at load (presets and
// safetensors models), to one ggml type or to llama.cpp's Q4_K_M mix, so their quantized speed can
// be measured like a GGUF's.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/weights.h"

namespace rose {

// The canonical tensors a linear layer multiplies by (qkv, o, up, down, lm_head; tok_emb when it
// is the tied lm_head): what --quantize quantizes and what a GPU may keep in ggml blocks. The
// embedding of an untied model and the norms and biases are not (a gather and per-element ops).
bool is_linear_matrix(const ModelConfig& config, const std::string& canonical_name);

// The --quantize spelling of a type ("q8_0", "q4_0", "q4_k", "q6_k") or nullopt for any other
// text.
std::optional<GgmlType> parse_quantize_type(const std::string& text);

// Consecutive rows of a matrix stored in one type.
struct QuantizedRun {
  int64_t rows = 0;
  GgmlType type = GgmlType::kF32;
};

// What --quantize stores each linear matrix as. A single type ("q8_0", "q4_0", "q4_k", "q6_k"):
// every matrix whose rows are whole blocks of it. "q4_k_m": llama.cpp's Q4_K_M mix, by its rules
// for llama-style models (llama_tensor_get_type): Q4_K throughout, except Q6_K for the lm_head
// (Q8_0 when its rows are not whole 256-element blocks), and in the layers use_more_bits picks
// (the first and last eighth, and every third between) for the v rows of qkv and the down
// projection. Not followed: Q5_K, which we cannot quantize to (llama.cpp's 70B v rows, and a
// checkpoint's own fused qkv), and its fallbacks for other matrices whose rows are not whole
// blocks: those stay dense here.
class QuantizeScheme {
 public:
  static QuantizeScheme single(GgmlType type);
  // nullopt for text that is not one of the spellings above.
  static std::optional<QuantizeScheme> parse(const std::string& text);
  const std::string& name() const { return name_; }
  // Every type runs() may return.
  std::vector<GgmlType> types() const;
  // The row runs `name` (a canonical tensor of shape (rows, cols)) is stored in, in order; empty
  // when it stays dense.
  std::vector<QuantizedRun> runs(const ModelConfig& config, const std::string& name, int64_t rows,
                                 int64_t cols) const;

 private:
  std::string name_;
  GgmlType type_ = GgmlType::kF32;  // the single type; unused by the mix
  bool q4_k_m_ = false;
};

// llama.cpp's choice of the layers that get more bits in its _M mixes.
bool use_more_bits(int layer, int num_layers);

// `inner` with every linear matrix the scheme quantizes stored as quantize(type) of its values
// (engine/model/quant.h), a part per run of rows: stored_parts() gives those blocks and read_f32()
// their dequantization, so the CPU backend computes with exactly the weights the GPU keeps
// quantized. The blocks are made on first use (several threads per tensor) and kept. Throws
// rose::UsageError when a type has no quantizer or `inner` already has stored ggml blocks (a GGUF
// keeps its own types).
std::unique_ptr<WeightSource> quantize_weights(std::unique_ptr<WeightSource> inner,
                                               const QuantizeScheme& scheme);
std::unique_ptr<WeightSource> quantize_weights(std::unique_ptr<WeightSource> inner, GgmlType type);

// What a model's linear matrices are stored as, e.g. "Q4_1 x 120, Q8_0 x 1" (SmolLM2: 30 layers
// of qkv, o, gate | up, down, and the tied lm_head): matrices per stored type (one whose parts mix
// types counts under each), "dense x N" for those without ggml blocks (presets, safetensors).
std::string linear_weight_types(const WeightSource& weights);
// Matrices per storage type, written "Q4_1 x 120, Q8_0 x 1, bf16 x 4" (names in byte order, so
// ggml's upper-case types come before dense names): the one format of every weight-types report.
class WeightTypeCounts {
 public:
  // One matrix holding these ggml types; it counts once per distinct type.
  void add_matrix(const std::vector<GgmlType>& types);
  void add_dense(const std::string& name) { ++counts_[name]; }  // a matrix with no ggml blocks
  bool has_ggml() const { return ggml_matrices_ > 0; }
  std::string text() const;

 private:
  std::map<std::string, int> counts_;
  int ggml_matrices_ = 0;
};

// Whether any linear matrix is stored in quantized ggml blocks (block size > 1).
bool has_quantized_linear(const WeightSource& weights);

}  // namespace rose
