// Timing driver for the int8 tensor-core GEMV (kernels/cuda/gemv_quant_mma.cu) at the Q4_K
// projection shapes of llama-1b and llama-8b, n = 8, 16, 24 and 32 rows: microseconds per call
// (the x quantization launch included, as a decode step runs it), GB/s of the Q4_K weight bytes,
// and cuBLAS's bf16 product of the same shape beside it (`vs_bf16` = cuBLAS time / quantized
// time). Calls are captured into a CUDA graph and replayed, as a decode step runs them; each
// measurement cycles through enough copies of the weights (>= 256 MiB) that they come from HBM,
// not L2. gate|up is one product over its 2 x intermediate rows. `regs_us`: the same launch on the
// register path (KernelSwitches::gemv_quant_mma_staged false; the same bits), which below 25 rows
// is the kernel. Built as gpu_bench_gemv_quant_mma, not run by ctest; run with --no-skip.
//   ROSEINFER_BENCH_ITERS=200 (calls per graph)  ROSEINFER_BENCH_MODELS=llama-8b (llama-1b and
//   llama-8b when unset) ROSEINFER_BENCH_ROWS=8,16 (8, 16, 24, 32 when unset)
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

#include "engine/model/quant.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/gemv_quant_mma.cuh"
#include "tests/gpu/bench_util.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using benchutil::graph_us;
using benchutil::ModelProducts;
using benchutil::Product;

namespace {

constexpr int kRowCounts[] = {8, 16, 24, 32};
constexpr GgmlType kType = GgmlType::kQ4_K;

// Mean us per cuBLAS bf16 call of p at each row count (0 where not selected).
std::vector<double> time_cublas(const Product& p, int iters, cublasHandle_t handle,
                                cudaStream_t stream, const void* x, void* y, std::mt19937& rng) {
  const auto w = benchutil::cold_random_bf16(size_t(p.in) * size_t(p.out), rng);
  std::vector<double> us;
  for (int n : kRowCounts) {
    if (!gputest::env_selects("ROSEINFER_BENCH_ROWS", std::to_string(n))) {
      us.push_back(0.0);
      continue;
    }
    us.push_back(graph_us(stream, iters, [&](int i) {
      benchutil::cublas_bf16_product(handle, x, w[size_t(i) % w.size()]->get(), y, n, p.in, p.out,
                                     p.f32_out);
    }));
  }
  return us;
}

void bench_model(const ModelProducts& model, int iters, cublasHandle_t handle, cudaStream_t stream,
                 std::mt19937& rng) {
  constexpr int kMaxRows = kGemvQuantMmaMaxRows;
  std::printf("\n%s (Q4_K)\n%-8s %2s %10s %10s %10s %10s %10s %8s\n", model.name, "product", "n",
              "q4k_us", "q4k_GB/s", "regs_us", "bf16_us", "bf16_GB/s", "vs_bf16");
  constexpr size_t kRows = sizeof(kRowCounts) / sizeof(kRowCounts[0]);
  double layer_q4k[kRows] = {}, layer_regs[kRows] = {}, layer_bf16[kRows] = {};
  for (const Product& p : model.products) {
    const gputest::Bf16Data x = gputest::random_bf16(size_t(kMaxRows) * size_t(p.in), rng);
    gputest::DeviceArray<uint16_t> x_dev(x.bits);
    gputest::DeviceArray<float> y_dev(size_t(kMaxRows) * size_t(p.out));  // fp32 fits either
    gputest::DeviceArray<uint8_t> scratch(size_t(gemv_quant_mma_scratch_bytes(kMaxRows, p.in)));
    const std::vector<double> bf16 =
        time_cublas(p, iters, handle, stream, x_dev.get(), y_dev.get(), rng);
    const std::vector<uint8_t> bytes = benchutil::random_weight_blocks(kType, p.out, p.in, rng);
    const auto w = benchutil::cold_upload(bytes);
    for (size_t r = 0; r < kRows; ++r) {
      const int n = kRowCounts[r];
      if (bf16[r] <= 0.0) continue;  // not selected
      const auto time_path = [&](int staged) {
        const ScopedKernelSwitches path(
            [&](KernelSwitches& s) { s.gemv_quant_mma_staged = staged == 1; });
        const double path_us = graph_us(stream, iters, [&](int i) {
          launch_gemv_quant_mma(x_dev.get(), w[size_t(i) % w.size()]->get(), uint32_t(kType),
                                y_dev.get(), n, p.in, p.out, p.f32_out, DType::kBF16, scratch.get(),
                                stream);
        });
        return path_us;
      };
      const double us = time_path(1), regs_us = time_path(0);
      const double bf16_bytes = double(p.in) * double(p.out) * 2.0;
      std::printf("%-8s %2d %10.2f %10.0f %10.2f %10.2f %10.0f %7.2fx\n", p.name, n, us,
                  double(bytes.size()) / us / 1e3, regs_us, bf16[r], bf16_bytes / bf16[r] / 1e3,
                  bf16[r] / us);
      if (!p.f32_out) {
        layer_q4k[r] += us;
        layer_regs[r] += regs_us;
        layer_bf16[r] += bf16[r];
      }
    }
  }
  std::printf("%s: one layer's four products (qkv, o, gate|up, down), us:\n", model.name);
  for (size_t r = 0; r < kRows; ++r) {
    if (layer_q4k[r] <= 0.0) continue;
    std::printf("  n %2d: q4k %8.2f  registers %8.2f  bf16 %8.2f  (%.2fx)\n", kRowCounts[r],
                layer_q4k[r], layer_regs[r], layer_bf16[r], layer_bf16[r] / layer_q4k[r]);
  }
}

}  // namespace

TEST_CASE("bench: int8 tensor-core Q4_K GEMV vs cuBLAS bf16 at n = 8-32, graphs" *
          doctest::skip(true)) {
  const int iters = benchutil::bench_selected_models(200, bench_model, [](const ModelProducts& m) {
    const std::string name = m.name;
    return name == "llama-1b" || name == "llama-8b";
  });
  CHECK(iters > 0);
}
