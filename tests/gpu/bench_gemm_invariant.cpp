// What --batch-invariant costs per GEMM: default cublasGemmEx (the backend's normal path at n > 4,
// 32 MiB workspace) against InvariantGemm::run for llama-1b's shapes at n = 1, 16, 256, 8192 in
// bf16. A timing driver, not a test: built as gpu_bench_gemm_invariant, not run by ctest. Prints
// microseconds per product (median of 50 after 5 warm-ups) and the invariant path's choices.
#include <cublas_v2.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "engine/model/presets.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/fill.cuh"
#include "kernels/cuda/gemm_invariant.h"

using namespace rose;

namespace {

constexpr int kRows[] = {1, 16, 256, 8192};
constexpr int kWarmup = 5, kRuns = 50;

template <typename F>
double median_us(F&& launch) {
  cudaEvent_t start, stop;
  ROSE_CUDA_CHECK(cudaEventCreate(&start));
  ROSE_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmup; ++i) launch();
  std::vector<float> ms(kRuns);
  for (float& t : ms) {
    ROSE_CUDA_CHECK(cudaEventRecord(start));
    launch();
    ROSE_CUDA_CHECK(cudaEventRecord(stop));
    ROSE_CUDA_CHECK(cudaEventSynchronize(stop));
    ROSE_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
  }
  ROSE_CUDA_CHECK(cudaEventDestroy(start));
  ROSE_CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + kRuns / 2, ms.end());
  return double(ms[kRuns / 2]) * 1e3;
}

}  // namespace

TEST_CASE("bench: default cuBLAS vs invariant GEMM, llama-1b shapes, bf16") {
  const ModelConfig c = *preset_config("llama-1b");
  const int H = c.hidden_size, I = c.intermediate_size, T = 8192;
  const std::vector<GemmShape> shapes = {{c.qkv_dim(), H, false, T},
                                         {H, c.q_dim(), false, T},
                                         {2 * I, H, false, T},
                                         {H, I, false, T},
                                         {c.vocab_size, H, true, 256}};
  InvariantGemm inv(shapes, DType::kBF16, nullptr);
  std::printf("%s\n", inv.describe().c_str());
  cublasHandle_t handle;
  ROSE_CUBLAS_CHECK(cublasCreate(&handle));
  void* workspace = nullptr;  // as the backend: a fixed 32 MiB workspace
  ROSE_CUDA_CHECK(cudaMalloc(&workspace, size_t(32) << 20));
  ROSE_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, size_t(32) << 20));
  for (const GemmShape& s : shapes) {
    void *x, *w, *y;  // (rows, in), (out, in), (rows, out)
    ROSE_CUDA_CHECK(cudaMalloc(&x, size_t(s.max_rows) * s.in * 2));
    ROSE_CUDA_CHECK(cudaMalloc(&w, size_t(s.out) * s.in * 2));
    ROSE_CUDA_CHECK(cudaMalloc(&y, size_t(s.max_rows) * s.out * (s.f32_out ? 4 : 2)));
    launch_fill_uniform(x, DType::kBF16, int64_t(s.max_rows) * s.in, 1, 1.0f, nullptr);
    launch_fill_uniform(w, DType::kBF16, int64_t(s.out) * s.in, 2, 0.02f, nullptr);
    for (int n : kRows) {
      if (n > s.max_rows) continue;
      const float alpha = 1.0f, beta = 0.0f;
      const double base = median_us([&] {
        ROSE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.out, n, s.in, &alpha, w,
                                       CUDA_R_16BF, s.in, x, CUDA_R_16BF, s.in, &beta, y,
                                       s.f32_out ? CUDA_R_32F : CUDA_R_16BF, s.out,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      });
      const double invariant =
          median_us([&] { inv.run(x, w, y, n, s.in, s.out, s.f32_out, nullptr); });
      std::printf("%6d x %5d  n %5d: cublas %8.1f us, invariant %8.1f us (%+.0f%%)\n", s.out, s.in,
                  n, base, invariant, (invariant / base - 1.0) * 100.0);
    }
    ROSE_CUDA_CHECK(cudaFree(x));
    ROSE_CUDA_CHECK(cudaFree(w));
    ROSE_CUDA_CHECK(cudaFree(y));
  }
  ROSE_CUDA_CHECK(cudaFree(workspace));
  ROSE_CUBLAS_CHECK(cublasDestroy(handle));
}
