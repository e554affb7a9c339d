#pragma once
// --quantize: a WeightSource whose linear-layer matrices are quantized to one ggml type at load
// (presets and safetensors models), so their quantized speed can be measured like a GGUF's.
#include <map>
#include <memory>
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

// `inner` with every linear matrix whose rows are a whole number of `type` blocks stored as
// quantize(type) of its values (engine/model/quant.h): stored_parts() gives those blocks and
// read_f32() their dequantization, so the CPU backend computes with exactly the weights the GPU
// keeps quantized. The blocks are made on first use (several threads per tensor) and kept.
// Throws rose::UsageError when `type` has no quantizer or `inner` already has stored ggml blocks (a
// GGUF keeps its own types).
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
