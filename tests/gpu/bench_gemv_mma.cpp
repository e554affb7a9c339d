// Timing driver for the dense tensor-core GEMV (gemv_mma.cuh): each bf16 product of a model's
// decode step at n = 4-32 rows on launch_gemv_mma, with 1, 2 and 4 row tiles a block and with the
// rule's choice, beside cuBLAS (cublasGemmEx as dense_gemm calls it): microseconds per call and
// GB/s of weights. Calls are captured into a CUDA graph and replayed, as a decode step runs them,
// over enough copies of the weights (>= 256 MiB) that they come from HBM, not L2. Built as
// gpu_bench_gemv_mma, not run by ctest; run with --no-skip.
//   ROSEINFER_BENCH_ITERS=200 (calls per graph)  ROSEINFER_BENCH_MODELS=llama-8b,gpt2 (all when
//   unset)  ROSEINFER_BENCH_ROWS=8,16 (4,8,16,24,32 when unset)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdio>
#include <random>
#include <string>

#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/gemv_mma.cuh"
#include "tests/gpu/bench_util.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using benchutil::graph_us;
using benchutil::ModelProducts;
using benchutil::Product;

namespace {

void bench_model(const ModelProducts& model, int iters, cublasHandle_t handle, cudaStream_t stream,
                 std::mt19937& rng) {
  constexpr int kRowCounts[] = {4, 8, 16, 24, 32};
  constexpr int kTiles[] = {0, 1, 2, 4};  // 0: the rule (row_tiles_for)
  std::printf("\n%s\n%-8s %2s %9s %9s %9s %9s %9s %9s\n", model.name, "product", "n", "rule_us",
              "tiles1_us", "tiles2_us", "tiles4_us", "cublas_us", "rule_GB/s");
  double layer[5][5] = {}, layer_cublas[5] = {};
  for (const Product& p : model.products) {
    const size_t weight_bytes = size_t(p.in) * size_t(p.out) * 2;
    const auto w = benchutil::cold_random_bf16(size_t(p.in) * size_t(p.out), rng);
    const gputest::Bf16Data x = gputest::random_bf16(size_t(kGemvMmaMaxRows) * size_t(p.in), rng);
    gputest::DeviceArray<uint16_t> x_dev(x.bits);
    gputest::DeviceArray<float> y_dev(size_t(kGemvMmaMaxRows) * size_t(p.out));
    const auto weights = [&](int i) { return w[size_t(i) % w.size()]->get(); };
    for (int r = 0; r < 5; ++r) {
      const int n = kRowCounts[r];
      if (!gputest::env_selects("ROSEINFER_BENCH_ROWS", std::to_string(n)) ||
          !gemv_mma_supported(n, p.in)) {
        continue;
      }
      double us[4];
      for (int v = 0; v < 4; ++v) {
        const ScopedKernelSwitches tiles(
            [&](KernelSwitches& s) { s.gemv_mma_row_tiles = kTiles[v]; });
        us[v] = graph_us(stream, iters, [&](int i) {
          launch_gemv_mma(x_dev.get(), weights(i), y_dev.get(), n, p.in, p.out, p.f32_out,
                          DType::kBF16, stream);
        });
      }
      const double cublas = graph_us(stream, iters, [&](int i) {
        benchutil::cublas_bf16_product(handle, x_dev.get(), weights(i), y_dev.get(), n, p.in, p.out,
                                       p.f32_out);
      });
      std::printf("%-8s %2d %9.2f %9.2f %9.2f %9.2f %9.2f %9.0f\n", p.name, n, us[0], us[1], us[2],
                  us[3], cublas, double(weight_bytes) / us[0] / 1e3);
      if (!p.f32_out) {
        for (int v = 0; v < 4; ++v) layer[r][v] += us[v];
        layer_cublas[r] += cublas;
      }
    }
  }
  std::printf("%s: one layer's products, us (rule, 1, 2, 4 row tiles; cuBLAS):\n", model.name);
  for (int r = 0; r < 5; ++r) {
    if (layer_cublas[r] <= 0.0) continue;  // not selected
    std::printf("  n %2d: %8.2f %8.2f %8.2f %8.2f  cublas %8.2f\n", kRowCounts[r], layer[r][0],
                layer[r][1], layer[r][2], layer[r][3], layer_cublas[r]);
  }
}

}  // namespace

TEST_CASE("bench: tensor-core GEMV vs cuBLAS per product at n = 4-32, graphs" *
          doctest::skip(true)) {
  const int iters = benchutil::bench_selected_models(200, bench_model);
  CHECK(iters > 0);
}
