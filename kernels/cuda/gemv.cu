#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/launch.cuh"

namespace rose {
namespace {

constexpr int kWarps = 4;
constexpr int kChunk = 32 * 8;  // elements a warp covers with one 16-byte load per lane

enum class Epilogue { kStore, kStoreF32, kGeluBias, kSiluMul };

// One warp per output feature o; kWeightRows weight rows per feature (2 for gate | up).
template <typename T, Epilogue E>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* x, const T* w, const T* bias, void* y, int n, int in, int out) {
  pdl_wait();
  pdl_launch_dependents();
  constexpr int kWeightRows = E == Epilogue::kSiluMul ? 2 : 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int o = blockIdx.x * kWarps + warp;
  if (o >= out) return;
  const T* w_row[kWeightRows];
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) w_row[r] = w + (int64_t(o) + int64_t(r) * out) * in;
  float acc[kWeightRows][kGemvMaxRows] = {};
  // Measured (docs/gpu-notes.md, run 4): issuing 8 weight loads before any use was slower than
  // this plain loop, which the compiler unrolls and pipelines itself.
#pragma unroll 4
  for (int c = lane * 8; c < in; c += kChunk) {
    float wf[kWeightRows][8];
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) load_as_float<T, 8>(w_row[r] + c, wf[r]);
#pragma unroll
    for (int row = 0; row < kGemvMaxRows; ++row) {
      if (row < n) {
        float xv[8];
        load_as_float<T, 8>(x + int64_t(row) * in + c, xv);
#pragma unroll
        for (int r = 0; r < kWeightRows; ++r) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][row] += wf[r][e] * xv[e];
        }
      }
    }
  }
#pragma unroll
  for (int row = 0; row < kGemvMaxRows; ++row) {
    if (row < n) {
      float sum[kWeightRows];
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) sum[r] = warp_sum(acc[r][row]);
      if (lane == 0) {
        const int64_t at = int64_t(row) * out + o;
        if constexpr (E == Epilogue::kStoreF32) {
          static_cast<float*>(y)[at] = sum[0];
        } else if constexpr (E == Epilogue::kStore) {
          static_cast<T*>(y)[at] = from_float<T>(sum[0]);
        } else if constexpr (E == Epilogue::kGeluBias) {
          float v = sum[0];
          if (bias) v += to_float(bias[o]);
          const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);  // sqrt(2/pi)
          static_cast<T*>(y)[at] = from_float<T>(0.5f * v * (1.0f + tanhf(inner)));
        } else {
          const float g = sum[0];
          static_cast<T*>(y)[at] = from_float<T>(g / (1.0f + expf(-g)) * sum[kWeightRows - 1]);
        }
      }
    }
  }
}

template <typename T, Epilogue E>
void launch_typed(const void* x, const void* w, const void* bias, void* y, int n, int in, int out,
                  cudaStream_t stream) {
  const int blocks = (out + kWarps - 1) / kWarps;
  launch_kernel(gemv_kernel<T, E>, blocks, kWarps * 32, 0, stream, static_cast<const T*>(x),
                static_cast<const T*>(w), static_cast<const T*>(bias), y, n, in, out);
}

template <Epilogue E>
void launch_dtype(const void* x, const void* w, const void* bias, void* y, int n, int in, int out,
                  DType dtype, cudaStream_t stream) {
  if (!gemv_supported(n, in)) {
    cuda_fail("unsupported shape (n > 4 or in not a multiple of 8)", "launch_gemv", __FILE__,
              __LINE__);
  }
  if (dtype == DType::kBF16) {
    launch_typed<__nv_bfloat16, E>(x, w, bias, y, n, in, out, stream);
  } else {
    launch_typed<__half, E>(x, w, bias, y, n, in, out, stream);
  }
}

}  // namespace

void launch_gemv(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                 DType dtype, cudaStream_t stream) {
  if (f32_out) {
    launch_dtype<Epilogue::kStoreF32>(x, w, nullptr, y, n, in, out, dtype, stream);
  } else {
    launch_dtype<Epilogue::kStore>(x, w, nullptr, y, n, in, out, dtype, stream);
  }
}

void launch_gemv_act(const void* x, const void* w, const void* bias, void* y, int n, int in,
                     int out, GemvActivation act, DType dtype, cudaStream_t stream) {
  if (act == GemvActivation::kGeluTanhBias) {
    launch_dtype<Epilogue::kGeluBias>(x, w, bias, y, n, in, out, dtype, stream);
  } else {
    launch_dtype<Epilogue::kSiluMul>(x, w, nullptr, y, n, in, out, dtype, stream);
  }
}

}  // namespace rose
