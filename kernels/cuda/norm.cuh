#pragma once
// The residual add fused with the next norm: one pass over the fp32 residual stream per sub-layer.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/norm_kind.h"
#include "kernels/cuda/dtype.cuh"

namespace rose {

// The widest row launch_add_norm takes: 256 threads keeping at most 32 elements each (norm.cu).
constexpr int kAddNormMaxHidden = 8192;

struct AddNormArgs {
  float* residual = nullptr;         // (rows_in, hidden) fp32 stream
  const void* delta = nullptr;       // (rows_in, hidden) sub-layer output to add first, or nullptr
  const void* delta_bias = nullptr;  // (hidden,) bias of the layer that produced delta, or nullptr
  const void* weight = nullptr;      // (hidden,) norm scale
  const void* bias = nullptr;        // (hidden,) LayerNorm shift, or nullptr
  void* out = nullptr;               // (num_rows, hidden) normalised rows in dtype
  const int32_t* row_index =
      nullptr;                 // (num_rows,) source row of each output row, nullptr: identity
  bool write_residual = true;  // store residual + delta back (false for the final gather)
  // The embedding, done by the first norm instead of a kernel of its own: with tok_emb set, x =
  // tok_emb[token_ids[src]] (+ pos_emb[positions[src]]) replaces residual[src] + delta.
  const void* tok_emb = nullptr;          // (vocab, hidden)
  const void* pos_emb = nullptr;          // (max_positions, hidden), or nullptr
  const int32_t* token_ids = nullptr;     // (rows_in,) read as step_token_id (step_token.cuh) reads
  const int32_t* previous_ids = nullptr;  // (previous step's rows,) its sampled ids
  const int32_t* positions = nullptr;     // (rows_in,) read only with pos_emb
  int num_rows = 0;
  int hidden = 0;
  float eps = 1e-5f;
  NormKind kind = NormKind::kRmsNorm;
  DType dtype = DType::kBF16;
};

// x = residual[src] + delta[src] + delta_bias (or the embedding of token src, as
// launch_embedding computes it); residual[src] = x (if write_residual);
// out[r] = norm(x) * weight (+ bias). LayerNorm: (x - mean) / sqrt(var + eps); RMSNorm:
// x / sqrt(mean(x^2) + eps).
void launch_add_norm(const AddNormArgs& args, cudaStream_t stream);

}  // namespace rose
