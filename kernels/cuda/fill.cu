#include "kernels/common/counter_rng.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/fill.cuh"

namespace rose {
namespace {

constexpr int kThreads = 256;

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65536 ? blocks : 65536);  // grid-stride beyond that
}

template <typename T>
__global__ void fill_uniform_kernel(T* dst, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = from_float<T>(synthetic_uniform(seed, static_cast<uint64_t>(i), scale));
  }
}

template <typename T>
__global__ void fill_uniform_slice_kernel(T* dst, int64_t rows, int64_t cols, int64_t source_row,
                                          int64_t source_cols, int64_t col_begin, uint64_t seed,
                                          float scale) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t source = (source_row + i / cols) * source_cols + col_begin + i % cols;
    dst[i] = from_float<T>(synthetic_uniform(seed, static_cast<uint64_t>(source), scale));
  }
}

template <typename T>
__global__ void fill_constant_kernel(T* dst, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = from_float<T>(value);
  }
}

template <typename T>
__global__ void convert_kernel(T* dst, const float* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = from_float<T>(src[i]);
  }
}

}  // namespace

void launch_fill_uniform(void* dst, DType dtype, int64_t n, uint64_t seed, float scale,
                         cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_uniform_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst), n, seed, scale);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

void launch_fill_uniform_slice(void* dst, DType dtype, int64_t rows, int64_t cols,
                               int64_t source_row, int64_t source_cols, int64_t col_begin,
                               uint64_t seed, float scale, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_uniform_slice_kernel<<<grid_for(n), kThreads, 0, stream>>>(
        static_cast<T*>(dst), rows, cols, source_row, source_cols, col_begin, seed, scale);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

void launch_fill_constant(void* dst, DType dtype, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_constant_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst), n, value);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

void launch_convert_from_f32(void* dst, DType dtype, const float* src, int64_t n,
                             cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    convert_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(dst), src, n);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

}  // namespace rose
