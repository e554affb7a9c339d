#pragma once
// A row's norm as add_norm_kernel computes it, for kernels that normalize their own input (a decode
// GEMV's prologue, gemv.cuh and gemv_quant.cuh): the same operations in the same reduction tree,
// so a fused kernel reads exactly the bits launch_add_norm would have written (included from .cu
// files only).
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemv_fusion.cuh"
#include "kernels/cuda/norm.cuh"

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

// A thread of add_norm_kernel's block keeps elements threadIdx.x + j * kNormThreads (j <
// kPerThread) of its row. The norm's weight and bias (0 without one) of those elements, as fp32.
template <typename T, int kPerThread>
__device__ __forceinline__ void load_norm_params(const AddNormArgs& args, float (&w)[kPerThread],
                                                 float (&b)[kPerThread]) {
  const T* weight = static_cast<const T*>(args.weight);
  const T* bias = static_cast<const T*>(args.bias);
  // The raw values first, converted after: a conversion next to its load would hold every later
  // load behind that one's round trip to memory.
  T weight_raw[kPerThread], bias_raw[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = int(threadIdx.x) + j * kNormThreads;
    if (i < args.hidden) {
      weight_raw[j] = weight[i];
      if (bias) bias_raw[j] = bias[i];
    }
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = int(threadIdx.x) + j * kNormThreads;
    w[j] = i < args.hidden ? to_float(weight_raw[j]) : 0.0f;
    b[j] = bias && i < args.hidden ? to_float(bias_raw[j]) : 0.0f;
  }
}

// The end of add_norm_kernel's row, once the row after its residual add is known: x, this thread's
// elements of it (0 past hidden). Stores them to res_row (hidden,) fp32 when args.write_residual
// (after every load of the row: a store among them would hold the later loads back), sums them in
// order of j, and writes out_row (hidden,) = norm(x) * w (+ b) in T. scratch: shared, 32 floats.
// Every thread of the block must call it.
template <typename T, int kPerThread>
__device__ __forceinline__ void finish_add_norm_row(const AddNormArgs& args,
                                                    const float (&x)[kPerThread], float* res_row,
                                                    const float (&w)[kPerThread],
                                                    const float (&b)[kPerThread], T* out_row,
                                                    float* scratch) {
  const int hidden = args.hidden;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = int(threadIdx.x) + j * kNormThreads;
    if (i < hidden) {
      if (args.write_residual) res_row[i] = x[j];
      sum += x[j];
    }
  }
  float mean = 0.0f;
  if (args.kind == NormKind::kLayerNorm) mean = block_sum(sum, scratch) / hidden;
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = int(threadIdx.x) + j * kNormThreads;
    if (i < hidden) sq = norm_square_step(x[j], mean, sq);
  }
  const float inv = norm_inverse(block_sum(sq, scratch), hidden, args.eps);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int i = int(threadIdx.x) + j * kNormThreads;
    if (i < hidden) {
      float y = norm_scaled(x[j], mean, inv, w[j]);
      if (args.bias) y += b[j];
      out_row[i] = from_float<T>(y);
    }
  }
}

// Calls fn(std::integral_constant<int, K>{}) with K, the elements of a row each of a norm block's
// kNormThreads threads keeps: ceil(hidden / kNormThreads) rounded up to 4, 8, 16 or 32 (a function
// of the model only, so the reduction order never depends on the batch). hidden <=
// kAddNormMaxHidden.
template <typename Fn>
void with_norm_per_thread(int hidden, Fn&& fn) {
  static_assert(kAddNormMaxHidden == 32 * kNormThreads);
  const int per_thread = (hidden + kNormThreads - 1) / kNormThreads;
  if (per_thread <= 4) {
    fn(std::integral_constant<int, 4>{});
  } else if (per_thread <= 8) {
    fn(std::integral_constant<int, 8>{});
  } else if (per_thread <= 16) {
    fn(std::integral_constant<int, 16>{});
  } else {
    fn(std::integral_constant<int, 32>{});
  }
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

// Before a fused GEMV's PDL wait: asks this SM's L1 for the norm weight's lines (in elements of
// elem_bytes each; the weights are constants of the run), so normalized_words' loads of it after
// the wait need not go to HBM: a decode step streams far more weight bytes than the L2 holds, so
// the previous step's copy is gone by then. One line a thread (a prefetch, not a load: nothing
// waits for it). The quantized GEMVs call it (llama-1b and llama-8b Q4_K batch-1 decode +0.6-1.0%,
// H200). Not the dense one-wave GEMV: its SmolLM2-shape step was 11% slower with this prefetch
// and 20% slower with a cp.async copy of the weight into shared memory in its place, cause not
// found (results/2026-11-29-norm-prefetch).
__device__ __forceinline__ void prefetch_norm_weight(const GemvFusion& fusion, int in,
                                                     int elem_bytes) {
  if (!fusion.norm_weight) return;  // uniform over the grid
  const auto first = reinterpret_cast<uintptr_t>(fusion.norm_weight);
  const uintptr_t end = first + uintptr_t(in) * uintptr_t(elem_bytes);
  for (uintptr_t line = (first & ~uintptr_t(127)) + 128 * threadIdx.x; line < end;
       line += 128 * uintptr_t(blockDim.x)) {
    const uintptr_t at = line < first ? first : line;  // never an address before the weight
    asm volatile("prefetch.global.L1 [%0];" ::"l"(at));
  }
}

// Eight residual elements (lo, hi) RMS-normalized with inverse scale `inv` and multiplied by
// their norm weights (eight T in `weight`), rounded to T: one 16-byte word of T.
template <typename T>
__device__ __forceinline__ uint4 normalized_eight(const float4& lo, const float4& hi,
                                                  const uint4& weight, float inv) {
  const float r[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  union {
    uint4 vec;
    T elems[8];
  } w, out;
  w.vec = weight;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    out.elems[e] = from_float<T>(norm_scaled(r[e], 0.0f, inv, to_float(w.elems[e])));
  }
  return out.vec;
}

// Elements at..at+7 of the normalized rows (n, in) (in % 8 == 0) as one 16-byte word of T:
// RMSNorm(fusion.norm_residual) * fusion.norm_weight rounded to T, with row r's inverse scale
// inv[r].
template <typename T>
__device__ __forceinline__ uint4 normalized_words(GemvFusion fusion, int at, int in,
                                                  const float* inv) {
  const int row = at / in, col = at - row * in;
  const float4 lo = *reinterpret_cast<const float4*>(fusion.norm_residual + at);
  const float4 hi = *reinterpret_cast<const float4*>(fusion.norm_residual + at + 4);
  const uint4 weight =
      *reinterpret_cast<const uint4*>(static_cast<const T*>(fusion.norm_weight) + col);
  return normalized_eight<T>(lo, hi, weight, inv[row]);
}

}  // namespace rose
