// Timing driver for the dense row rule (CudaBackend's gemv_rows_for): each bf16 product of a
// model's decode step at n = 1-4 rows on the GEMV (launch_gemv) and on cuBLAS (cublasGemmEx as
// dense_gemm calls it), microseconds per call and GB/s of weights, so the rule can follow the
// product rather than the model's hidden size. Calls are captured into a CUDA graph and replayed,
// as a decode step runs them; each measurement cycles through enough copies of the weights (>= 256
// MiB) that they come from HBM, not L2. gate|up is one product over its 2 x intermediate rows (the
// fused SiLU epilogue reads the same bytes). Built as gpu_bench_gemv_rows, not run by ctest; run
// with --no-skip.
//   ROSEINFER_BENCH_ITERS=200 (calls per graph)  ROSEINFER_BENCH_MODELS=llama-8b,gpt2 (all when
//   unset)  ROSEINFER_BENCH_ROWS=3,4 (1-4 when unset)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/gemv.cuh"
#include "tests/gpu/bench_util.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using benchutil::graph_us;
using benchutil::ModelProducts;
using benchutil::Product;

namespace {

void bench_model(const ModelProducts& model, int iters, cublasHandle_t handle, cudaStream_t stream,
                 std::mt19937& rng) {
  constexpr int kMaxRows = kGemvMaxRows;
  std::printf("\n%s\n%-8s %2s %10s %10s %10s %10s  %s\n", model.name, "product", "n", "gemv_us",
              "gemv_GB/s", "cublas_us", "cublas_GB/s", "faster");
  double layer_gemv[kMaxRows + 1] = {}, layer_cublas[kMaxRows + 1] = {};
  for (const Product& p : model.products) {
    const size_t weight_bytes = size_t(p.in) * size_t(p.out) * 2;
    const auto w = benchutil::cold_random_bf16(size_t(p.in) * size_t(p.out), rng);
    const gputest::Bf16Data x = gputest::random_bf16(size_t(kMaxRows) * size_t(p.in), rng);
    gputest::DeviceArray<uint16_t> x_dev(x.bits);
    gputest::DeviceArray<float> y_dev(size_t(kMaxRows) * size_t(p.out));  // fp32 fits either
    for (int n = 1; n <= kMaxRows; ++n) {
      if (!gputest::env_selects("ROSEINFER_BENCH_ROWS", std::to_string(n)) ||
          !gemv_supported(n, p.in)) {
        continue;
      }
      const auto weights = [&](int i) { return w[size_t(i) % w.size()]->get(); };
      const double gemv = graph_us(stream, iters, [&](int i) {
        launch_gemv(x_dev.get(), weights(i), y_dev.get(), n, p.in, p.out, p.f32_out, DType::kBF16,
                    stream);
      });
      const double cublas = graph_us(stream, iters, [&](int i) {
        benchutil::cublas_bf16_product(handle, x_dev.get(), weights(i), y_dev.get(), n, p.in, p.out,
                                       p.f32_out);
      });
      std::printf("%-8s %2d %10.2f %10.0f %10.2f %10.0f  %s\n", p.name, n, gemv,
                  double(weight_bytes) / gemv / 1e3, cublas, double(weight_bytes) / cublas / 1e3,
                  gemv <= cublas ? "gemv" : "cublas");
      if (!p.f32_out) {
        layer_gemv[n] += gemv;
        layer_cublas[n] += cublas;
      }
    }
  }
  std::printf("%s: one layer's products, us:\n", model.name);
  for (int n = 1; n <= kMaxRows; ++n) {
    if (layer_gemv[n] <= 0.0) continue;  // not selected
    std::printf("  n %d: gemv %8.2f  cublas %8.2f\n", n, layer_gemv[n], layer_cublas[n]);
  }
}

}  // namespace

TEST_CASE("bench: dense GEMV vs cuBLAS per product at n = 1-4, graphs" * doctest::skip(true)) {
  const int iters = benchutil::bench_selected_models(200, bench_model);
  CHECK(iters > 0);
}
