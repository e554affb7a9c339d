#include <algorithm>
#include <cstdlib>

#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/launch.cuh"

namespace rose {
namespace {

constexpr int kWarps = 4;
constexpr int kChunk = 32 * 8;  // elements a warp covers with one 16-byte load per lane

enum class Epilogue { kStore, kStoreF32, kGeluBias, kSiluMul };

// kSplit warps per output feature o (kWarps / kSplit features per block), each taking every
// kSplit-th 512-byte chunk of the dot product; kWeightRows weight rows per feature (2 for
// gate | up). Splitting puts more warps, hence more 16-byte loads, in flight when `out` is small
// (o/down projections: 2048 features = 15 warps per SM unsplit; docs/gpu-notes.md run 11).
// residual_add: y is the fp32 residual stream, and each output, rounded to T, is added to it
// (gemv_fusion.cuh). kRows (1, 2 or 4) is the most input rows the kernel is compiled for (n <=
// kRows): a batch-1 kernel keeps one accumulator per weight row instead of four, so it needs fewer
// registers and more blocks fit on an SM (results/2026-11-24-gemv-rows). A row's sum is the same
// sequence of operations for every kRows and n, so row r of y does not depend on the other rows.
template <typename T, Epilogue E, int kSplit, int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* x, const T* w, const T* bias, void* y, int n, int in, int out,
                bool residual_add) {
  pdl_wait();
  pdl_launch_dependents();
  constexpr int kWeightRows = E == Epilogue::kSiluMul ? 2 : 1;
  constexpr int kFeaturesPerBlock = kWarps / kSplit;
  __shared__ float partial[kWarps][kWeightRows][kRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int local = warp / kSplit, part = warp % kSplit;
  const int o = blockIdx.x * kFeaturesPerBlock + local;
  const bool active = o < out;  // no early return: the block meets at a barrier below
  const T* w_row[kWeightRows];
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) w_row[r] = w + (int64_t(o) + int64_t(r) * out) * in;
  float acc[kWeightRows][kRows] = {};
  // Measured (docs/gpu-notes.md, run 4): issuing 8 weight loads before any use was slower than
  // this plain loop, which the compiler unrolls and pipelines itself.
#pragma unroll 4
  for (int c = (part * 32 + lane) * 8; active && c < in; c += kChunk * kSplit) {
    float wf[kWeightRows][8];
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) load_as_float<T, 8>(w_row[r] + c, wf[r]);
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
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
  for (int row = 0; row < kRows; ++row) {
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) acc[r][row] = warp_sum(acc[r][row]);
  }
  if constexpr (kSplit > 1) {
    if (lane == 0) {
#pragma unroll
      for (int row = 0; row < kRows; ++row) {
#pragma unroll
        for (int r = 0; r < kWeightRows; ++r) partial[warp][r][row] = acc[r][row];
      }
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < kSplit; ++s) total += partial[warp + s][r][row];
        acc[r][row] = total;
      }
    }
  }
  if (!active || lane != 0) return;
#pragma unroll
  for (int row = 0; row < kRows; ++row) {
    if (row < n) {
      const int64_t at = int64_t(row) * out + o;
      if constexpr (E == Epilogue::kStoreF32) {
        static_cast<float*>(y)[at] = acc[0][row];
      } else if constexpr (E == Epilogue::kStore) {
        const T value = from_float<T>(acc[0][row]);
        if (residual_add) {  // y is the fp32 residual stream (gemv_fusion.cuh)
          float* residual = static_cast<float*>(y);
          residual[at] = residual[at] + to_float(value);  // launch_add_norm's residual + delta
        } else {
          static_cast<T*>(y)[at] = value;
        }
      } else if constexpr (E == Epilogue::kGeluBias) {
        float v = acc[0][row];
        if (bias) v += to_float(bias[o]);
        static_cast<T*>(y)[at] = from_float<T>(gelu_tanh(v));
      } else {
        const float g = acc[0][row];
        static_cast<T*>(y)[at] = from_float<T>(silu(g) * acc[kWeightRows - 1][row]);
      }
    }
  }
}

// ROSEINFER_CUDA_GEMV_SPLIT=1 forces one warp per feature (the layout before run 11), for
// before/after comparisons with one binary.
int max_split() {
  static const int value = [] {
    const char* env = std::getenv("ROSEINFER_CUDA_GEMV_SPLIT");
    return env && env[0] == '1' ? 1 : 4;
  }();
  return value;
}

// ROSEINFER_CUDA_GEMV_ROWS=4 runs every n on the kernel compiled for 4 rows (the one kernel
// before the batch-1 and batch-2 ones), for before/after comparisons with one binary.
bool rows_specialized() {
  static const bool value = [] {
    const char* env = std::getenv("ROSEINFER_CUDA_GEMV_ROWS");
    return !(env && env[0] == '4');
  }();
  return value;
}

template <typename T, Epilogue E, int kSplit>
void launch_rows(const T* x, const T* w, const T* bias, void* y, int n, int in, int out,
                 bool residual_add, cudaStream_t stream) {
  const int blocks = (out + kWarps / kSplit - 1) / (kWarps / kSplit);
  auto* kernel = gemv_kernel<T, E, kSplit, kGemvMaxRows>;
  if (n == 1 && rows_specialized()) kernel = gemv_kernel<T, E, kSplit, 1>;
  if (n == 2 && rows_specialized()) kernel = gemv_kernel<T, E, kSplit, 2>;
  launch_kernel(kernel, blocks, kWarps * 32, 0, stream, x, w, bias, y, n, in, out, residual_add);
}

template <typename T, Epilogue E>
void launch_typed(const void* x, const void* w, const void* bias, void* y, int n, int in, int out,
                  bool residual_add, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(w);
  const T* bt = static_cast<const T*>(bias);
  const int split = std::min(gemv_split(in, out), max_split());
  if (split == 4) {
    launch_rows<T, E, 4>(xt, wt, bt, y, n, in, out, residual_add, stream);
  } else if (split == 2) {
    launch_rows<T, E, 2>(xt, wt, bt, y, n, in, out, residual_add, stream);
  } else {
    launch_rows<T, E, 1>(xt, wt, bt, y, n, in, out, residual_add, stream);
  }
}

template <Epilogue E>
void launch_dtype(const void* x, const void* w, const void* bias, void* y, int n, int in, int out,
                  const GemvFusion& fusion, DType dtype, cudaStream_t stream) {
  if (!gemv_supported(n, in)) {
    cuda_fail("unsupported shape (n > 4 or in not a multiple of 8)", "launch_gemv", __FILE__,
              __LINE__);
  }
  if (fusion.norm_residual) {
    cuda_fail("the dense GEMV takes no norm input (see gemv.cuh)", "launch_gemv", __FILE__,
              __LINE__);
  }
  if (fusion.residual_add && E != Epilogue::kStore) {
    cuda_fail("the residual add follows the plain product only", "launch_gemv", __FILE__, __LINE__);
  }
  dispatch_dtype(dtype, [&](auto tag) {
    launch_typed<typename decltype(tag)::type, E>(x, w, bias, y, n, in, out, fusion.residual_add,
                                                  stream);
  });
}

}  // namespace

void launch_gemv(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                 DType dtype, cudaStream_t stream, const GemvFusion& fusion) {
  if (f32_out) {
    launch_dtype<Epilogue::kStoreF32>(x, w, nullptr, y, n, in, out, fusion, dtype, stream);
  } else {
    launch_dtype<Epilogue::kStore>(x, w, nullptr, y, n, in, out, fusion, dtype, stream);
  }
}

void launch_gemv_act(const void* x, const void* w, const void* bias, void* y, int n, int in,
                     int out, GemvActivation act, DType dtype, cudaStream_t stream) {
  if (act == GemvActivation::kGeluTanhBias) {
    launch_dtype<Epilogue::kGeluBias>(x, w, bias, y, n, in, out, {}, dtype, stream);
  } else {
    launch_dtype<Epilogue::kSiluMul>(x, w, nullptr, y, n, in, out, {}, dtype, stream);
  }
}

}  // namespace rose
