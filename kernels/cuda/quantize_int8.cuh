#pragma once
// The int8 rule the quantized GEMVs (gemv_quant.cu, gemv_quant_mma.cu) apply to x, written once:
// per 32 elements amax = max |x|, s = min(127 / amax, FLT_MAX), q = rint(x s) (round half to even)
// clamped to [-127, 127], d = amax / 127 (all zero when amax = 0). Four consecutive lanes hold a
// 32-element block, eight elements each (quantize_eight), or a warp holds it, one element a lane
// (quantize_warp). Included from .cu files only.
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"

namespace rose {

// The rule's steps, shared by every writer of an int8 x so they agree bit for bit. s stays finite
// (127 / amax overflows for amax < ~2^-120, bf16's tiny values), and the clamp only acts then:
// otherwise |x s| <= 127 (1 + 2^-23), which rounds to at most 127.
__device__ __forceinline__ float int8_scale(float amax) {
  return amax > 0.0f ? fminf(__fdiv_rn(127.0f, amax), FLT_MAX) : 0.0f;
}
__device__ __forceinline__ int int8_value(float v, float s) {
  return __float2int_rn(fminf(fmaxf(__fmul_rn(v, s), -127.0f), 127.0f));
}
__device__ __forceinline__ float int8_step(float amax) { return __fdiv_rn(amax, 127.0f); }

struct Int8Eight {
  uint32_t words[2];  // this lane's 8 q as int8, element 0 in the low byte of words[0]
  float d;            // the block's amax / 127
  int sum;            // the block's sum of q
};

// raw: this lane's 8 elements of T (zero bits where there are none). Every lane of the warp must
// call it (the block's four lanes exchange amax and sum by shuffles).
template <typename T>
__device__ __forceinline__ Int8Eight quantize_eight(const uint4& raw) {
  union {
    uint4 vec;
    T elems[8];
  } u;
  u.vec = raw;
  float v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = to_float(u.elems[e]);
  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const float s = int8_scale(amax);
  int q[8], sum = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    q[e] = int8_value(v[e], s);
    sum += q[e];
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  Int8Eight out;
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    out.words[w] = (uint32_t(q[4 * w]) & 0xFFu) | (uint32_t(q[4 * w + 1]) & 0xFFu) << 8 |
                   (uint32_t(q[4 * w + 2]) & 0xFFu) << 16 | uint32_t(q[4 * w + 3]) << 24;
  }
  out.d = int8_step(amax);
  out.sum = sum;
  return out;
}

// The same rule with each 32-element block spread one element a lane over a whole warp (kernels
// that keep a row's elements strided by the block size: add-norm, SiLU-and-mul), K blocks at
// once: v[k] this lane's element of block k (as rounded to the activation dtype; 0 where the block
// does not exist), q[k] its int8 value, d[k] and sum[k] the block's. The K blocks' shuffle chains
// are interleaved, so they cost about one chain's latency. The max and the integer sum do not
// depend on the order they are taken in, so each block's result is quantize_eight's, bit for bit.
// Every lane of the warp must call it.
template <int K>
__device__ __forceinline__ void quantize_warp(const float (&v)[K], int (&q)[K], float (&d)[K],
                                              int (&sum)[K]) {
  float amax[K];
#pragma unroll
  for (int k = 0; k < K; ++k) amax[k] = fmaxf(0.0f, fabsf(v[k]));  // as quantize_eight: no NaN
#pragma unroll
  for (int lane_mask = 16; lane_mask >= 1; lane_mask /= 2) {
#pragma unroll
    for (int k = 0; k < K; ++k)
      amax[k] = fmaxf(amax[k], __shfl_xor_sync(0xffffffffu, amax[k], lane_mask));
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    q[k] = int8_value(v[k], int8_scale(amax[k]));
    sum[k] = q[k];
  }
#pragma unroll
  for (int lane_mask = 16; lane_mask >= 1; lane_mask /= 2) {
#pragma unroll
    for (int k = 0; k < K; ++k) sum[k] += __shfl_xor_sync(0xffffffffu, sum[k], lane_mask);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) d[k] = int8_step(amax[k]);
}

}  // namespace rose
