#pragma once
// The int8 rule the quantized GEMVs (gemv_quant.cu, gemv_quant_mma.cu) apply to x: per 32 elements
// amax = max |x|, s = min(127 / amax, FLT_MAX), q = rint(x s) (round half to even) clamped to
// [-127, 127], d = amax / 127 (all zero when amax = 0). Two layouts of it, with the same bits:
// quantize_eight (four consecutive lanes a 32-element block, eight elements each) and
// quantize_sixteen (two lanes, sixteen each; the direct GEMV's x without its one-row norm path).
// Included from .cu files only.
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"

namespace rose {

// q = rint(c) for a clamped value c (|c| <= 127), without the float-to-int conversion (a quarter
// of the FP32 rate on sm_90; eight a thread made it the larger part of a batch-1 GEMV's x
// preparation): adding kRoundBias = 1.5 * 2^23 rounds c to an integer, half to even as rint does,
// and leaves bits(c + kRoundBias) = kRoundBiasBits + q, so q is that minus kRoundBiasBits, and
// its low byte is q's (kRoundBiasBits' low 22 bits are 0).
constexpr float kRoundBias = 12582912.0f;
constexpr uint32_t kRoundBiasBits = 0x4B400000u;

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
  // q = rint(x s) clamped, without the float-to-int conversion (kRoundBias).
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

// Sixteen elements a lane, two lanes a 32-element block, by quantize_eight's rule and with its
// bits, in fewer instructions: the batch-1 quantized GEMV's x preparation was issue-bound on
// quantize_eight's ~105 instructions per 8 elements (results/2026-11-30-x-prep: leaving the
// quantization out of llama-8b's down and o products saved 4.5% of the Q4_K step). A lane per
// block (32 elements) took fewer still but ~9 more registers, which the GEMV holding its first
// item's weights through the preparation could not spare (its 64-register builds spilled). What
// differs from quantize_eight is the instructions, not the values:
//   - amax on packed pairs (__hmax2 of the sign-cleared words): the largest |x| is one of the
//     elements, exact in T, and __hmax2 returns the other operand where one is NaN, as fmaxf does;
//   - one division a lane: the even lane divides 127 by amax (s), the odd one amax by 127 (d),
//     the same instructions with the operands swapped, and each takes the other's by a shuffle;
//   - c = max(x s, -127) without quantize_eight's min(., 127): |x| <= amax and s <= 127 / amax
//     (1 + 2^-24), or s = FLT_MAX only where amax < 127 / FLT_MAX, so a finite x s is at most
//     127 (1 + 2^-23) in magnitude, which the 1.5 x 2^23 bias rounds to +-127 as the clamp
//     would; the max stays for x s = NaN (x NaN, or x infinite with s = 0), which both send to
//     -127;
//   - bf16 widens to fp32 by one shift or mask an element.
struct Int8Sixteen {
  uint4 word;  // this lane's 16 q as int8, element 0 in the low byte of word.x
  float d;     // the block's amax / 127
  int sum;     // the block's sum of q
};

// raw: this lane's 16 elements of T (zero bits where there are none); lanes 2i and 2i + 1 of the
// warp hold a block's first and second half. Every lane of the warp must call it.
template <typename T>
__device__ __forceinline__ Int8Sixteen quantize_sixteen(const uint4 (&raw)[2]) {
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  union {
    uint4 vec[2];
    uint32_t words[8];
    T elems[16];
  } u;
  u.vec[0] = raw[0];
  u.vec[1] = raw[1];
  const auto magnitudes = [&](int w) {  // |x| of a pair: the sign bits cleared (NaN stays NaN)
    const uint32_t bits = u.words[w] & 0x7FFF7FFFu;
    return *reinterpret_cast<const T2*>(&bits);
  };
  T2 m = magnitudes(0);
#pragma unroll
  for (int w = 1; w < 8; ++w) m = __hmax2(m, magnitudes(w));
  // fmaxf from 0, as quantize_eight starts: all-NaN pairs leave amax 0.
  float amax = fmaxf(fmaxf(0.0f, __low2float(m)), __high2float(m));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  const bool odd = (threadIdx.x & 1) != 0;
  const float quotient = amax > 0.0f ? __fdiv_rn(odd ? amax : 127.0f, odd ? 127.0f : amax) : 0.0f;
  const float other = __shfl_xor_sync(0xffffffffu, quotient, 1);
  const float s = fminf(odd ? other : quotient, FLT_MAX);
  // Element e as fp32 (bf16: its bits moved up, where to_float of a high half took two steps).
  const auto element = [&](int e) {
    if constexpr (std::is_same_v<T, __half>) {
      return to_float(u.elems[e]);
    } else {
      return __uint_as_float(e % 2 == 0 ? u.words[e / 2] << 16 : u.words[e / 2] & 0xFFFF0000u);
    }
  };
  uint32_t packed[4];
  uint32_t total = 0;  // the biased words' sum mod 2^32; minus 16 kRoundBiasBits it is sum q
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    uint32_t biased[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float c = fmaxf(__fmul_rn(element(4 * w + j), s), -127.0f);
      biased[j] = __float_as_uint(__fadd_rn(c, kRoundBias));
    }
    total += biased[0] + biased[1] + biased[2] + biased[3];
    // The low bytes of the four biased values, element 0 lowest.
    packed[w] = __byte_perm(__byte_perm(biased[0], biased[1], 0x0040),
                            __byte_perm(biased[2], biased[3], 0x0040), 0x5410);
  }
  int sum = int(total - 16u * kRoundBiasBits);
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  Int8Sixteen out;
  out.word = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out.d = odd ? quotient : other;
  out.sum = sum;
  return out;
}

}  // namespace rose
