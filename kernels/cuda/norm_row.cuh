#pragma once
// A row's norm as add_norm_kernel computes it, for kernels that normalize their own input (a decode
// GEMV's prologue, gemv.cuh and gemv_quant.cuh): the same operations in the same reduction tree,
// so a fused kernel reads exactly the bits launch_add_norm would have written (included from .cu
// files only).
#include "kernels/cuda/device_utils.cuh"

namespace rose {

// add_norm_kernel's block: element i of a row belongs to thread i % kNormThreads, which sums its
// elements in order of i; the block then sums its kNormWarps warps as block_sum does. Fixed, never
// derived from the batch (--batch-invariant).
constexpr int kNormThreads = 256;
constexpr int kNormWarps = kNormThreads / 32;

// One element's term of the sum of squares (LayerNorm: of the centred values; RMSNorm: mean 0).
__device__ __forceinline__ float norm_square_step(float x, float mean, float sum) {
  const float centred = x - mean;
  return __fmaf_rn(centred, centred, sum);
}

// 1 / sqrt(mean of squares + eps) from the row's sum of squares.
__device__ __forceinline__ float norm_inverse(float sum_squares, int hidden, float eps) {
  return rsqrtf(sum_squares / float(hidden) + eps);
}

// One normalized element before the dtype rounding (and before LayerNorm's bias).
__device__ __forceinline__ float norm_scaled(float x, float mean, float inv, float weight) {
  return __fmul_rn(__fmul_rn(x - mean, inv), weight);
}

// RMSNorm's inverse scale of rows 0..n-1 of `rows` (n, hidden) fp32, into inv[0..n-1] (shared
// memory), by a block of any multiple of 32 threads: each warp plays one of add_norm_kernel's
// warps on one row at a time, so every row gets add_norm_kernel's exact result. scratch: shared,
// (n, kNormWarps) floats. Every thread must call it; ends with a barrier, after which inv
// is visible to the whole block.
__device__ __forceinline__ void rms_inverse_rows(const float* rows, int n, int hidden, float eps,
                                                 float* scratch, float* inv) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int block_warps = int(blockDim.x) / 32;
  // Eight of a virtual thread's elements per round, their loads issued together: llama-8b's
  // hidden 4096 is 16 elements, two trips to memory rather than 16.
  constexpr int kBatch = 8;
  // Each warp takes (row, virtual warp) pairs in turn, so the rows' loads go out from different
  // warps at once rather than one row after another.
  for (int pair = warp; pair < n * kNormWarps; pair += block_warps) {  // uniform over the warp
    const int row = pair / kNormWarps, vw = pair % kNormWarps;
    const float* x = rows + int64_t(row) * hidden;
    const int v = vw * 32 + lane;
    float sum = 0.0f;
    for (int first = v; first < hidden; first += kBatch * kNormThreads) {
      float value[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = first + k * kNormThreads;
        value[k] = i < hidden ? x[i] : 0.0f;
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (first + k * kNormThreads < hidden) sum = norm_square_step(value[k], 0.0f, sum);
      }
    }
    sum = warp_sum(sum);
    if (lane == 0) scratch[row * kNormWarps + vw] = sum;
  }
  __syncthreads();
  for (int row = warp; row < n; row += block_warps) {  // uniform over the warp
    const float total = warp_sum(lane < kNormWarps ? scratch[row * kNormWarps + lane] : 0.0f);
    if (lane == 0) inv[row] = norm_inverse(total, hidden, eps);
  }
  __syncthreads();
}

}  // namespace rose
