#pragma once
// What a decode GEMV does around its product in place of the add-norm kernels: the RMSNorm of its
// input (the quantized GEMV, gemv_quant.cuh; the dense one where gemv_norm_input_supported,
// gemv.cuh), the residual add of its output (both GEMVs). A decode
// layer then runs qkv (norm in) -> attention -> o (residual out) -> gate|up (norm in) -> down
// (residual out), with no add-norm kernel between them, and each fused step gives launch_add_norm's
// exact bits.
#include <cstdint>

#include "kernels/cuda/peer_push.cuh"

namespace rose {

struct GemvFusion {
  // Set: the kernel's x is RMSNorm(norm_residual) * norm_weight rounded to the dtype, computed in
  // the kernel exactly as launch_add_norm computes it (norm_row.cuh); the x argument is unused.
  const float* norm_residual = nullptr;  // (n, in) fp32 residual rows, 16-byte aligned
  const void* norm_weight = nullptr;     // (in,) in the dtype, 16-byte aligned
  float norm_eps = 1e-5f;
  // True: y is the fp32 residual stream (n, y_stride) and each output, rounded to the dtype as a
  // stored sub-layer output is, is added to it (launch_add_norm's residual + delta) instead of
  // being stored. Plain product epilogue only (not the activations, not fp32 outputs).
  bool residual_add = false;
  // push.size > 1: each output, as stored, also goes into the peers' staging of the fused
  // all-reduce add-norm that sums this rank's partial (peer_push.cuh). Plain product epilogue
  // only, stored in the dtype (not residual_add, not fp32 outputs); the dense GEMV only.
  PeerPush push;
};

}  // namespace rose
