#pragma once
// Field readers for ggml blocks on the device, shared by the load-time decoders (dequant.cu) and
// the quantized GEMVs (gemv_quant.cu, gemv_quant_mma.cu), so each packing rule is written once.
// Layouts: ggml's ggml-common.h, as read by the CPU reference engine/model/quant.cpp. Included from
// .cu files only.
#include <cuda_fp16.h>
#include <vector_types.h>

#include <cstdint>

namespace rose {

// An fp16 field at any byte address (blocks are byte-packed: 22-, 34-, 110-byte blocks...).
__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | p[1] << 8)));
}

// An fp16 field at an even address, with one 2-byte load.
__device__ __forceinline__ float half_at_aligned(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}

// Four bytes at an even address (little endian), as two 2-byte loads.
__device__ __forceinline__ uint32_t u32_at_even(const uint8_t* p) {
  const unsigned short* h = reinterpret_cast<const unsigned short*>(p);
  return uint32_t(h[0]) | uint32_t(h[1]) << 16;
}

// Q4_K / Q5_K: sub-block `sub` (0..7)'s 6-bit scale and min from the 12 packed bytes `q`
// (ggml's get_scale_min_k4): subs 0-3 hold their low 6 bits in q[sub] / q[sub + 4]; subs 4-7 hold
// 4 bits in the nibbles of q[sub + 4] and their top 2 bits in the top bits of q[sub - 4] / q[sub].
__device__ __forceinline__ void k4_scale_min(int sub, const uint8_t* q, int* scale, int* min) {
  if (sub < 4) {
    *scale = q[sub] & 63;
    *min = q[sub + 4] & 63;
  } else {
    *scale = (q[sub + 4] & 0x0F) | ((q[sub - 4] >> 6) << 4);
    *min = (q[sub + 4] >> 4) | ((q[sub] >> 6) << 4);
  }
}

// k4_scale_min for sub-blocks 2c and 2c + 1 at once, from the head's scale words (bytes 0-3 in
// head.y, 4-7 in head.z, 8-11 in head.w): scales in bytes 0 / 1 of *scales, mins of *mins.
__device__ __forceinline__ void q4k_scale_min_pair(const uint4& head, int c, uint32_t* scales,
                                                   uint32_t* mins) {
  const uint32_t shift = 16u * uint32_t(c & 1);
  const uint32_t low = head.y >> shift, mid = head.z >> shift, high = head.w >> shift;
  if (c < 2) {  // sub-blocks 0-3: 6 bits in q[sub] and q[sub + 4]
    *scales = low & 0x3F3Fu;
    *mins = mid & 0x3F3Fu;
  } else {  // 4-7: a nibble of q[sub + 4], the top 2 bits of q[sub - 4] (scale) or q[sub] (min)
    *scales = (high & 0x0F0Fu) | ((low >> 2) & 0x3030u);
    *mins = ((high >> 4) & 0x0F0Fu) | ((mid >> 2) & 0x3030u);
  }
}

__device__ __forceinline__ float half_bits_to_float(uint32_t bits) {  // bits 0-15: an fp16
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}

}  // namespace rose
