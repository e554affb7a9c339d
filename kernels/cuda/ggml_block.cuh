#pragma once
// Field readers for ggml blocks on the device, shared by the load-time decoders (dequant.cu) and
// the quantized GEMV (gemv_quant.cu), so each packing rule is written once. Layouts: ggml's
// ggml-common.h, as read by the CPU reference engine/model/quant.cpp. Included from .cu files only.
#include <cuda_fp16.h>

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

}  // namespace rose
