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

struct Int8One {
  int q;    // this lane's element as int8
  float d;  // the block's amax / 127
  int sum;  // the block's sum of q
};

// The same rule with the 32-element block spread one element a lane over a whole warp (kernels
// that keep a row's elements strided by the block size: add-norm, SiLU-and-mul). v: this lane's
// element (as rounded to the activation dtype). The max and the integer sum do not depend on the
// order they are taken in, so the result is quantize_eight's, bit for bit. Every lane of the warp
// must call it.
__device__ __forceinline__ Int8One quantize_warp(float v) {
  float amax = fmaxf(0.0f, fabsf(v));  // as quantize_eight starts: a NaN never becomes amax
#pragma unroll
  for (int lane_mask = 16; lane_mask >= 1; lane_mask /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, lane_mask));
  Int8One out;
  out.q = int8_value(v, int8_scale(amax));
  out.sum = out.q;
#pragma unroll
  for (int lane_mask = 16; lane_mask >= 1; lane_mask /= 2)
    out.sum += __shfl_xor_sync(0xffffffffu, out.sum, lane_mask);
  out.d = int8_step(amax);
  return out;
}

}  // namespace rose
