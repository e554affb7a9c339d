#pragma once
// Device-side helpers shared by the kernels (included from .cu files only).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace rose {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ __forceinline__ float to_float<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_float<float>(float x) {
  return x;
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}

// Loads N consecutive 2-byte elements (N in 1, 2, 4, 8; the address aligned to 2N bytes) as floats
// with one vector access.
template <typename T, int N>
__device__ __forceinline__ void load_as_float(const T* ptr, float (&out)[N]) {
  static_assert(sizeof(T) == 2 && (N == 1 || N == 2 || N == 4 || N == 8), "2-byte types, N <= 8");
  if constexpr (N == 1) {
    out[0] = to_float(ptr[0]);
  } else {
    using Vec = std::conditional_t<N == 2, uint32_t, std::conditional_t<N == 4, uint2, uint4>>;
    union {
      Vec vec;
      T elems[N];
    } u;
    u.vec = *reinterpret_cast<const Vec*>(ptr);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_float(u.elems[i]);
  }
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats; blockDim.x is a
// multiple of 32. Ends with a barrier-protected read, so scratch can be reused right after.
__device__ __forceinline__ float block_sum(float x, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, num_warps = blockDim.x >> 5;
  x = warp_sum(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < num_warps ? scratch[lane] : 0.0f;
  return warp_sum(x);
}

__device__ __forceinline__ float block_max(float x, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, num_warps = blockDim.x >> 5;
  x = warp_max(x);
  __syncthreads();
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < num_warps ? scratch[lane] : -INFINITY;
  return warp_max(x);
}

}  // namespace rose
