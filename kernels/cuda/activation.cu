#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/gemv_quant_mma_x.cuh"
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

// grid (x, rows), block kThreads: a warp takes 32 consecutive elements of a row at a time, so
// with int8_x (width a multiple of 32) it holds whole sub-blocks of x's int8 copy.
template <typename T, bool kInt8X>
__global__ void silu_and_mul_kernel(T* out, const T* gate_up, int width, void* int8_x) {
  pdl_wait();
  pdl_launch_dependents();
  const int row = int(blockIdx.y);
  const T* gate = gate_up + int64_t(row) * 2 * width;
  const T* up = gate + width;
  T* dst = out + int64_t(row) * width;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < width; i += gridDim.x * blockDim.x) {
    const float g = to_float(gate[i]);
    const T value = from_float<T>(silu(g) * to_float(up[i]));
    dst[i] = value;
    if constexpr (kInt8X) {
      const int sub[1] = {i / 32};
      const float v[1] = {to_float(value)};
      const bool valid[1] = {true};
      store_int8_x_warp<1>(Int8XScratch(int8_x, int(gridDim.y), width), row, sub, v, valid);
    }
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
                         cudaStream_t stream, void* int8_x) {
  if (rows <= 0) return;
  if (int8_x && (width % 32 != 0 || rows > kGemvQuantMmaMaxRows)) {
    cuda_fail("int8_x needs width a multiple of 32 and at most 32 rows", "launch_silu_and_mul",
              __FILE__, __LINE__);
  }
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(int8_x ? silu_and_mul_kernel<T, true> : silu_and_mul_kernel<T, false>,
                  grid_for(rows, width), kThreads, 0, stream, static_cast<T*>(out),
                  static_cast<const T*>(gate_up), width, int8_x);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

}  // namespace rose
