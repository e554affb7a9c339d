// Timing driver for the quantized GEMV (kernels/cuda/gemv_quant.cu) at the projection shapes of
// llama-1b and llama-8b, n = 1, 4 and 8 rows: microseconds per call, achieved GB/s of quantized
// weight bytes, and the bf16 launch_gemv of the same shape for comparison (speedup = bf16 time /
// quantized time; launch_gemv takes n <= 4, so n = 8 has no bf16 column). Built as
// gpu_bench_gemv_quant, not run by ctest; run with --no-skip. Each measurement cycles through
// enough copies of the weights (>= 256 MiB in all) that they come from HBM, not the 50 MB L2.
// gate|up is timed as one GEMV over its 2 x intermediate rows (the fused SiLU epilogue reads the
// same bytes), and as the step runs it, launch_gemv_quant_silu_mul (the line "silu"; not in the
// layer sums).
//   ROSEINFER_BENCH_ITERS=400 (timed calls per shape)  ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 (the types
//   timed; all five when unset)  ROSEINFER_BENCH_ROWS=1 (the row counts; 1, 4 and 8 when unset),
//   so a profiler sees only the launches it is asked about
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
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv_quant.cuh"
#include "tests/gpu/bench_util.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using benchutil::cold_copies;

namespace {

constexpr int kRowCounts[] = {1, 4, 8};
constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                               GgmlType::kQ6_K};
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);
constexpr size_t kNumRowCounts = sizeof(kRowCounts) / sizeof(kRowCounts[0]);

struct Shape {
  const char* name;
  int in, out;
  bool in_layer;  // one of a layer's four projections (not the lm_head)
};

struct Model {
  const char* name;
  std::vector<Shape> shapes;
};

// llama-1b: hidden 2048, intermediate 8192, 32 q + 2 x 8 kv heads of 64; its lm_head (vocab
// 128256) is usually bf16 but shows the kernel on a large matrix. llama-8b: hidden 4096,
// intermediate 14336, 32 q + 2 x 8 kv heads of 128.
const Model kModels[] = {
    {"llama-1b",
     {{"qkv", 2048, 3072, true},
      {"o", 2048, 2048, true},
      {"gate|up", 2048, 16384, true},
      {"down", 8192, 2048, true},
      {"lm_head", 2048, 128256, false}}},
    {"llama-8b",
     {{"qkv", 4096, 6144, true},
      {"o", 4096, 4096, true},
      {"gate|up", 4096, 28672, true},
      {"down", 14336, 4096, true}}},
    {"SmolLM2-135M",
     {{"qkv", 576, 960, true},
      {"o", 576, 576, true},
      {"gate|up", 576, 3072, true},
      {"down", 1536, 576, true},
      {"lm_head", 576, 49152, false}}},
};

// Mean time per call in microseconds of launch(copy) over `iters` calls cycling `copies`.
template <typename Launch>
double time_us(int copies, int iters, Launch launch) {
  for (int i = 0; i < 20; ++i) launch(i % copies);
  cudaEvent_t begin, end;
  ROSE_CUDA_CHECK(cudaEventCreate(&begin));
  ROSE_CUDA_CHECK(cudaEventCreate(&end));
  ROSE_CUDA_CHECK(cudaEventRecord(begin, nullptr));
  for (int i = 0; i < iters; ++i) launch(i % copies);
  ROSE_CUDA_CHECK(cudaEventRecord(end, nullptr));
  ROSE_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0.0f;
  ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  ROSE_CUDA_CHECK(cudaEventDestroy(begin));
  ROSE_CUDA_CHECK(cudaEventDestroy(end));
  return 1000.0 * ms / iters;
}

void bench_model(const Model& model, int iters, std::mt19937& rng) {
  constexpr int kMaxN = kRowCounts[kNumRowCounts - 1];
  std::printf("\n%s\n%-8s %-6s %2s %10s %10s %10s %10s %8s\n", model.name, "shape", "type", "n",
              "quant_us", "quant_GB/s", "bf16_us", "bf16_GB/s", "speedup");
  // One layer's four projections: [row count][type], and bf16 [row count] (0 where unsupported).
  double layer_quant[kNumRowCounts][kNumTypes] = {}, layer_bf16[kNumRowCounts] = {};
  for (const Shape& shape : model.shapes) {
    const gputest::Bf16Data x = gputest::random_bf16(size_t(kMaxN) * size_t(shape.in), rng);
    gputest::DeviceArray<uint16_t> x_dev(x.bits);
    gputest::DeviceArray<float> y_dev(size_t(kMaxN) * size_t(shape.out));
    // bf16 baseline, for the row counts launch_gemv takes.
    const size_t bf16_bytes = size_t(shape.in) * size_t(shape.out) * 2;
    double bf16_us[kNumRowCounts] = {};
    {
      const auto w = benchutil::cold_random_bf16(size_t(shape.in) * size_t(shape.out), rng);
      const int copies = int(w.size());
      for (size_t i = 0; i < kNumRowCounts; ++i) {
        const int n = kRowCounts[i];
        if (!gemv_supported(n, shape.in) ||
            !gputest::env_selects("ROSEINFER_BENCH_ROWS", std::to_string(n)))
          continue;
        bf16_us[i] = time_us(copies, iters, [&](int c) {
          launch_gemv(x_dev.get(), w[size_t(c)]->get(), y_dev.get(), n, shape.in, shape.out, true,
                      DType::kBF16, nullptr);
        });
        if (shape.in_layer) layer_bf16[i] += bf16_us[i];
      }
    }
    for (size_t t = 0; t < kNumTypes; ++t) {
      const GgmlType type = kTypes[t];
      if (!gputest::env_selects("ROSEINFER_BENCH_TYPES", ggml_type_traits(type).name)) continue;
      const std::vector<uint8_t> bytes =
          benchutil::random_weight_blocks(type, shape.out, shape.in, rng);
      const auto w = benchutil::cold_upload(bytes);
      const int copies = int(w.size());
      for (size_t i = 0; i < kNumRowCounts; ++i) {
        const int n = kRowCounts[i];
        if (!gemv_quant_supported(uint32_t(type), n, shape.in) ||
            !gputest::env_selects("ROSEINFER_BENCH_ROWS", std::to_string(n)))
          continue;
        const double us = time_us(copies, iters, [&](int c) {
          launch_gemv_quant(x_dev.get(), w[size_t(c)]->get(), uint32_t(type), y_dev.get(), n,
                            shape.in, shape.out, true, DType::kBF16, nullptr);
        });
        if (shape.in_layer) layer_quant[i][t] += us;
        if (std::string(shape.name) == "gate|up") {
          const double silu_us = time_us(copies, iters, [&](int c) {
            launch_gemv_quant_silu_mul(x_dev.get(), w[size_t(c)]->get(), uint32_t(type),
                                       y_dev.get(), n, shape.in, shape.out / 2, DType::kBF16,
                                       nullptr);
          });
          std::printf("%-8s %-6s %2d %10.2f %10.0f\n", "silu", ggml_type_traits(type).name, n,
                      silu_us, double(bytes.size()) / silu_us / 1e3);
        }
        if (bf16_us[i] > 0.0) {
          std::printf("%-8s %-6s %2d %10.2f %10.0f %10.2f %10.0f %7.2fx\n", shape.name,
                      ggml_type_traits(type).name, n, us, double(bytes.size()) / us / 1e3,
                      bf16_us[i], double(bf16_bytes) / bf16_us[i] / 1e3, bf16_us[i] / us);
        } else {
          std::printf("%-8s %-6s %2d %10.2f %10.0f %10s %10s %8s\n", shape.name,
                      ggml_type_traits(type).name, n, us, double(bytes.size()) / us / 1e3, "-", "-",
                      "-");
        }
      }
    }
  }
  std::printf("%s: one layer's four projections (qkv, o, gate|up, down), us (speedup vs bf16):\n",
              model.name);
  for (size_t i = 0; i < kNumRowCounts; ++i) {
    std::printf("  n %d: bf16 %8.2f |", kRowCounts[i], layer_bf16[i]);
    for (size_t t = 0; t < kNumTypes; ++t) {
      if (layer_quant[i][t] <= 0.0) continue;  // not selected
      std::printf(" %s %.2f", ggml_type_traits(kTypes[t]).name, layer_quant[i][t]);
      if (layer_bf16[i] > 0.0) std::printf(" (%.2fx)", layer_bf16[i] / layer_quant[i][t]);
    }
    std::printf("\n");
  }
}

}  // namespace

TEST_CASE("bench: quantized GEMV vs bf16 GEMV at llama-1b and llama-8b shapes, n = 1, 4, 8" *
          doctest::skip(true)) {
  const int iters = benchutil::iterations(400);
  std::mt19937 rng(1);
  for (const Model& model : kModels) bench_model(model, iters, rng);
  CHECK(iters > 0);
}
