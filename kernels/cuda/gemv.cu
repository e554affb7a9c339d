#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemv.cuh"

namespace rose {
namespace {

constexpr int kWarps = 4;

template <typename T, bool kF32Out>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* x, const T* w, void* y, int n, int in, int out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int o = blockIdx.x * kWarps + warp;
  if (o >= out) return;
  const T* w_row = w + int64_t(o) * in;
  float acc[kGemvMaxRows] = {};
#pragma unroll 4
  for (int c = lane * 8; c < in; c += 32 * 8) {
    float wv[8];
    load_as_float<T, 8>(w_row + c, wv);
#pragma unroll
    for (int r = 0; r < kGemvMaxRows; ++r) {
      if (r < n) {
        float xv[8];
        load_as_float<T, 8>(x + int64_t(r) * in + c, xv);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] += wv[e] * xv[e];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemvMaxRows; ++r) {
    if (r < n) {
      const float sum = warp_sum(acc[r]);
      if (lane == 0) {
        if constexpr (kF32Out) {
          static_cast<float*>(y)[int64_t(r) * out + o] = sum;
        } else {
          static_cast<T*>(y)[int64_t(r) * out + o] = from_float<T>(sum);
        }
      }
    }
  }
}

template <typename T>
void launch_typed(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                  cudaStream_t stream) {
  const int blocks = (out + kWarps - 1) / kWarps;
  if (f32_out) {
    gemv_kernel<T, true><<<blocks, kWarps * 32, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), y, n, in, out);
  } else {
    gemv_kernel<T, false><<<blocks, kWarps * 32, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), y, n, in, out);
  }
  ROSE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_gemv(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                 DType dtype, cudaStream_t stream) {
  if (!gemv_supported(n, in)) {
    cuda_fail("launch_gemv: unsupported shape (n > 4 or in not a multiple of 8)", "launch_gemv",
              __FILE__, __LINE__);
  }
  if (dtype == DType::kBF16) {
    launch_typed<__nv_bfloat16>(x, w, y, n, in, out, f32_out, stream);
  } else {
    launch_typed<__half>(x, w, y, n, in, out, f32_out, stream);
  }
}

}  // namespace rose
