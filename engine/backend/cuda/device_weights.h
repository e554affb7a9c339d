#pragma once
// The model's weights on the device: uploaded once at construction (generated for presets, decoded
// from GGUF blocks, or converted from fp32) and bound by name into per-layer structs, with the
// linear layers as DeviceMatrix so a weight's storage format is separate from the activation dtype.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cuda/device_arena.h"
#include "engine/backend/cuda/quantized_weights.h"
#include "engine/model/weights.h"
#include "kernels/common/ggml_type.h"
#include "kernels/cuda/dtype.cuh"

namespace rose {

// A linear layer's weight on the device: y (n, rows) = x (n, cols) W^T.
// Tensor parallel would keep one shard per GPU here: a column-parallel layer (qkv, up) a slice of
// rows (its heads or its part of I), a row-parallel one (o, down) a slice of cols followed by an
// all-reduce of y; rows and cols are then the shard's, and gemm() needs no other change.
struct DeviceMatrix {
  const void* data = nullptr;  // (rows, cols) in the activation dtype; null when quantized
  int64_t rows = 0, cols = 0;
  // Kept in ggml blocks (quantized_weights.h): the row ranges in order, one per run of stored
  // parts of one type (a Q4_K_M q | k | v with a Q6_K v has two). Empty for a dense matrix.
  std::vector<QuantRange> ranges;
  bool quantized() const { return !ranges.empty(); }
  // Bytes one product reads: the blocks, or rows * cols elements.
  int64_t bytes(int64_t element_size) const;
};

// One transformer block's weights. Vectors are in the activation dtype; a bias or a norm shift is
// nullptr when the model has none (ModelConfig::has_linear_biases, has_qkv_bias, norm_kind).
struct LayerWeights {
  const void* attn_norm_w = nullptr;  // (H,)
  const void* attn_norm_b = nullptr;  // (H,) LayerNorm
  DeviceMatrix qkv;                   // (qkv_dim, H) rows q | k | v
  const void* qkv_b = nullptr;        // (qkv_dim,)
  DeviceMatrix o;                     // (H, q_dim)
  const void* o_b = nullptr;          // (H,)
  const void* mlp_norm_w = nullptr;   // (H,)
  const void* mlp_norm_b = nullptr;   // (H,) LayerNorm
  DeviceMatrix up;                    // (mlp_up_rows, H): I rows, or 2I rows gate | up when gated
  const void* up_b = nullptr;         // (I,)
  DeviceMatrix down;                  // (H, I)
  const void* down_b = nullptr;       // (H,)
};

struct DeviceWeights {
  const void* tok_emb = nullptr;  // (V, H)
  const void* pos_emb = nullptr;  // (max_position_embeddings, H) learned positions only
  std::vector<LayerWeights> layers;
  const void* final_norm_w = nullptr;  // (H,)
  const void* final_norm_b = nullptr;  // (H,) LayerNorm
  DeviceMatrix lm_head;                // (V, H); tok_emb's memory when the embeddings are tied
  float* inv_freq = nullptr;           // (head_dim / 2,) RoPE models; nullptr otherwise
  // Bytes a forward pass reads: every matrix (its blocks when quantized) and vector except the
  // embedding tables (only rows are gathered), plus the lm_head (tied or not).
  int64_t bytes_per_forward = 0;
  // The largest quantized matrix's elements (rows * cols): the scratch its dequantized copy needs
  // for products of more rows than the quantized GEMV takes. 0 when nothing is quantized.
  int64_t max_quantized_elems = 0;
  // What the linear layers are stored as, for reports: "bf16", or "Q4_1 x 120, Q8_0 x 1"
  // (matrices per type, then "bf16 x N" for the matrices left dense).
  std::string types;
};

// Uploads every canonical tensor of `weights` into one allocation from `arena` and binds them.
// keep_quantized: linear matrices stored as ggml blocks the quantized GEMV reads stay in them
// (can_keep_quantized); the tied embedding is then also decoded densely for the row gather.
// Generated tensors may still be in flight on `stream` when it returns (the caller synchronises
// once everything is allocated). print_stats: one line on stderr with what was decoded, converted
// and generated.
DeviceWeights upload_weights(const WeightSource& weights, DType dtype, cudaStream_t stream,
                             DeviceArena& arena, bool print_stats, bool keep_quantized);

}  // namespace rose
