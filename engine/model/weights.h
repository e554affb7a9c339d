#pragma once
// The canonical weight layout every backend consumes, independent of the checkpoint's naming.
// All matrices are in nn.Linear layout (out_features, in_features), so y = x W^T: GPT-2's Conv1D
// weights are transposed when loaded. Attention projections are fused into one qkv matrix with rows
// q | k | v, and Llama's gate and up projections into one matrix with rows gate | up.
//
// Canonical names and shapes (H hidden, I intermediate, V vocab, P positions, L layers):
//   tok_emb                  (V, H)
//   pos_emb                  (P, H)                GPT-2 only
//   layers.N.attn_norm.weight (H)   .bias (H)      bias GPT-2 only
//   layers.N.qkv.weight      (q_dim + 2 kv_dim, H) .bias (same rows) GPT-2, or Llama with qkv_bias
//   layers.N.o.weight        (H, q_dim)            .bias (H)   GPT-2 only
//   layers.N.mlp_norm.weight (H)   .bias (H)      bias GPT-2 only
//   layers.N.up.weight       GPT-2: (I, H) + .bias (I); Llama: (2I, H) rows gate | up, no bias
//   layers.N.down.weight     (H, I)                .bias (H)   GPT-2 only
//   final_norm.weight (H)    .bias (H)             bias GPT-2 only
//   lm_head.weight           (V, H)                absent when tie_word_embeddings (use tok_emb);
//                                                  a tensor-parallel shard's: (lm_head_rows, H)
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/quant.h"

namespace rose {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

// Every canonical tensor of a model, in a fixed order (the order is part of the synthetic seeds).
std::vector<TensorSpec> canonical_tensors(const ModelConfig& config);

// Rows [begin, begin + count) of a matrix (or elements of a vector).
struct RowRun {
  int64_t begin = 0, count = 0;
};

// How a preset's synthetic tensor is made; see kernels/common/counter_rng.h for the generator,
// which is shared with the GPU so a preset has bit-identical fp32 weights on both backends.
struct SyntheticInit {
  enum class Kind { kUniform, kConstant } kind = Kind::kUniform;
  uint64_t seed = 0;   // per tensor: derived from the preset seed and the tensor's index
  float scale = 0.0f;  // kUniform: values in [-scale, scale)
  float value = 0.0f;  // kConstant
  // A tensor-parallel shard (engine/parallel/shard_plan.h) of a kUniform tensor: the values at
  // rows `rows` (runs, in order) and columns [col_begin, col_begin + cols) of the whole tensor of
  // `source_cols` columns that `seed` describes. Empty rows: the whole tensor.
  std::vector<RowRun> rows;
  int64_t source_cols = 0, col_begin = 0, cols = 0;
};

// One stored tensor supplying a contiguous run of a canonical tensor's rows, still in its file
// encoding (a GGUF tensor's ggml blocks), so a GPU backend can upload the compact bytes and
// dequantize on the device instead of reading fp32 through read_f32.
struct StoredPart {
  GgmlType type = GgmlType::kF32;
  std::span<const uint8_t> bytes;  // rows * cols / block_elems blocks, row-major; into the mapping
  int64_t rows = 0;                // canonical rows this part fills (1 for a vector)
  int64_t cols = 0;                // elements per row: a whole number of blocks
  // > 0: stored row h*hd + 2j + i (hd = rows / heads, i in {0, 1}, j < hd/2) belongs at canonical
  // row h*hd + i*hd/2 + j of this part (the llama q/k un-permutation); 0: rows in place.
  int unpermute_heads = 0;
};

// Where stored row `row` of a part goes among the part's rows (see StoredPart::unpermute_heads).
int64_t unpermuted_row(int64_t row, int64_t rows, int heads);

// Where weights come from: a checkpoint (safetensors) or a preset (synthetic).
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const ModelConfig& config() const = 0;
  // Fills `dst` (numel of the named canonical tensor) with fp32 values, converting from the stored
  // dtype and transposing to the canonical layout. Throws rose::Error for a missing tensor.
  virtual void read_f32(const std::string& canonical_name, std::span<float> dst) const = 0;
  // Set for presets: lets a GPU backend generate the tensor on the device instead of uploading.
  virtual std::optional<SyntheticInit> synthetic(const std::string& /*canonical_name*/) const {
    return std::nullopt;
  }
  // Set where the stored bytes are ggml blocks the GPU can decode itself: the parts, in row order,
  // whose dequantization (then un-permutation) is exactly what read_f32 gives. The spans stay
  // valid as long as the source.
  virtual std::optional<std::vector<StoredPart>> stored_parts(
      const std::string& /*canonical_name*/) const {
    return std::nullopt;
  }
};

// A Hugging Face folder (config.json + model.safetensors or an index of shards) or a preset name.
std::unique_ptr<WeightSource> open_model(const std::string& model_or_preset);

}  // namespace rose
