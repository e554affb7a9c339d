#pragma once
// The int8 rule the quantized GEMVs (gemv_quant.cu, gemv_quant_mma.cu) apply to x, written once:
// per 32 elements amax = max |x|, s = min(127 / amax, FLT_MAX), q = rint(x s) (round half to even)
// clamped to [-127, 127], d = amax / 127 (all zero when amax = 0). Four consecutive lanes hold a
// 32-element block, eight elements each. Included from .cu files only.
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"

namespace rose {

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
  // s stays finite (127 / amax overflows for amax < ~2^-120, bf16's tiny values), and the clamp
  // only acts then: otherwise |x s| <= 127 (1 + 2^-23), which rounds to at most 127.
  const float s = amax > 0.0f ? fminf(__fdiv_rn(127.0f, amax), FLT_MAX) : 0.0f;
  // q = rint(x s) clamped, without the float-to-int conversion (a quarter of the FP32 rate on
  // sm_90; eight a thread made it the larger part of a batch-1 GEMV's x preparation): adding
  // kRoundBias = 1.5 * 2^23 to a clamped value c (|c| <= 127) rounds it to an integer, half to
  // even as rint does, and leaves bits(c + kRoundBias) = kRoundBiasBits + q, so q is that minus
  // kRoundBiasBits, and its low byte is q's (kRoundBiasBits' low 22 bits are 0).
  constexpr float kRoundBias = 12582912.0f;
  constexpr uint32_t kRoundBiasBits = 0x4B400000u;
  uint32_t biased[8];
  int sum = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float c = fminf(fmaxf(__fmul_rn(v[e], s), -127.0f), 127.0f);
    biased[e] = __float_as_uint(__fadd_rn(c, kRoundBias));
    sum += int(biased[e] - kRoundBiasBits);
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  Int8Eight out;
#pragma unroll
  for (int w = 0; w < 2; ++w) {  // the low bytes of four biased values, element 0 lowest
    const uint32_t low = __byte_perm(biased[4 * w], biased[4 * w + 1], 0x0040);
    const uint32_t high = __byte_perm(biased[4 * w + 2], biased[4 * w + 3], 0x0040);
    out.words[w] = __byte_perm(low, high, 0x5410);
  }
  out.d = __fdiv_rn(amax, 127.0f);
  out.sum = sum;
  return out;
}

}  // namespace rose
