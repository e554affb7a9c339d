#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/launch.cuh"

namespace rose {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void gelu_tanh_bias_kernel(T* x, const T* bias, int width) {
  pdl_wait();
  pdl_launch_dependents();
  T* row = x + int64_t(blockIdx.y) * width;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x) {
    float v = to_float(row[i]);
    if (bias) v += to_float(bias[i]);
    row[i] = from_float<T>(gelu_tanh(v));
  }
}

template <typename T>
__global__ void silu_and_mul_kernel(T* out, const T* gate_up, int width) {
  pdl_wait();
  pdl_launch_dependents();
  const T* gate = gate_up + int64_t(blockIdx.y) * 2 * width;
  const T* up = gate + width;
  T* dst = out + int64_t(blockIdx.y) * width;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x) {
    const float g = to_float(gate[i]);
    dst[i] = from_float<T>(silu(g) * to_float(up[i]));
  }
}

dim3 grid_for(int rows, int width) {
  int x = (width + kThreads - 1) / kThreads;
  if (x > 64) x = 64;
  return dim3(x, rows);
}

}  // namespace

void launch_gelu_tanh_bias(void* x, const void* bias, int rows, int width, DType dtype,
                           cudaStream_t stream) {
  if (rows <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(gelu_tanh_bias_kernel<T>, grid_for(rows, width), kThreads, 0, stream,
                  static_cast<T*>(x), static_cast<const T*>(bias), width);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

void launch_silu_and_mul(void* out, const void* gate_up, int rows, int width, DType dtype,
                         cudaStream_t stream) {
  if (rows <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(silu_and_mul_kernel<T>, grid_for(rows, width), kThreads, 0, stream,
                  static_cast<T*>(out), static_cast<const T*>(gate_up), width);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

}  // namespace rose
