// Timing driver for the quantized GEMV (kernels/cuda/gemv_quant.cu) at llama-1b's projection
// shapes, n = 1: microseconds per call, achieved GB/s of weight bytes, and the bf16 launch_gemv of
// the same shape for comparison (speedup = bf16 time / quantized time). Built as
// gpu_bench_gemv_quant, not run by ctest; run with --no-skip. Each measurement cycles through
// enough copies of the weights (>= 256 MiB in all) that they come from HBM, not the 50 MB L2.
//   ROSEINFER_BENCH_ITERS=400 (timed calls per shape)
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
#include "tests/gpu/gpu_test_util.h"

using namespace rose;

namespace {

constexpr size_t kColdBytes = size_t(256) << 20;

struct Shape {
  const char* name;
  int in, out;
};

// llama-1b: hidden 2048, intermediate 8192 (gate|up fused: 16384 rows), 32 q + 2 x 8 kv heads
// of 64.
constexpr Shape kShapes[] = {{"qkv", 2048, 3072},
                             {"o", 2048, 2048},
                             {"gate|up", 2048, 16384},
                             {"down", 8192, 2048},
                             {"lm_head", 2048, 128256}};

int iterations() {
  const char* env = std::getenv("ROSEINFER_BENCH_ITERS");
  return env ? std::max(10, std::atoi(env)) : 400;
}

// Random bytes with fp16 scale fields set to small finite values (the kernel's speed does not
// depend on the values, but NaN/Inf scales are not what real weights hold).
std::vector<uint8_t> weight_bytes(GgmlType type, const Shape& shape, std::mt19937& rng) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  std::vector<uint8_t> bytes(
      size_t(int64_t(shape.out) * shape.in / traits.block_elems * traits.block_bytes));
  for (uint8_t& b : bytes) b = uint8_t(rng());
  const int half_at = type == GgmlType::kQ6_K ? 208 : 0;
  for (size_t i = 0; i < bytes.size(); i += size_t(traits.block_bytes)) {
    bytes[i + size_t(half_at)] = 0x00;
    bytes[i + size_t(half_at) + 1] = 0x20;  // 0x2000: fp16 2^-7
    if (type == GgmlType::kQ4_1 || type == GgmlType::kQ4_K) {
      bytes[i + 2] = 0x00;
      bytes[i + 3] = 0x20;
    }
  }
  return bytes;
}

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

int copies_for(size_t bytes) { return int(std::max<size_t>(2, (kColdBytes + bytes - 1) / bytes)); }

}  // namespace

TEST_CASE("bench: quantized GEMV vs bf16 GEMV at llama-1b shapes, n = 1" * doctest::skip(true)) {
  const int iters = iterations();
  std::mt19937 rng(1);
  const GgmlType types[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                            GgmlType::kQ6_K};
  std::printf("%-8s %-6s %10s %9s %10s %9s %8s\n", "shape", "type", "quant_us", "quant_GB/s",
              "bf16_us", "bf16_GB/s", "speedup");
  double layer_bf16 = 0.0, layer_quant[5] = {};
  for (const Shape& shape : kShapes) {
    const gputest::Bf16Data x = gputest::random_bf16(size_t(shape.in), rng);
    gputest::DeviceArray<uint16_t> x_dev(x.bits);
    gputest::DeviceArray<float> y_dev(size_t(shape.out));
    // bf16 baseline.
    const size_t bf16_bytes = size_t(shape.in) * size_t(shape.out) * 2;
    const int bf16_copies = copies_for(bf16_bytes);
    std::vector<std::unique_ptr<gputest::DeviceArray<uint16_t>>> bf16_w;
    {
      const gputest::Bf16Data w =
          gputest::random_bf16(size_t(shape.in) * size_t(shape.out), rng, -0.05f, 0.05f);
      for (int c = 0; c < bf16_copies; ++c)
        bf16_w.push_back(std::make_unique<gputest::DeviceArray<uint16_t>>(w.bits));
    }
    const double bf16_us = time_us(bf16_copies, iters, [&](int c) {
      launch_gemv(x_dev.get(), bf16_w[size_t(c)]->get(), y_dev.get(), 1, shape.in, shape.out, true,
                  DType::kBF16, nullptr);
    });
    bf16_w.clear();
    const bool in_layer = std::string(shape.name) != "lm_head";
    if (in_layer) layer_bf16 += bf16_us;
    for (size_t t = 0; t < 5; ++t) {
      const GgmlType type = types[t];
      const std::vector<uint8_t> bytes = weight_bytes(type, shape, rng);
      const int copies = copies_for(bytes.size());
      std::vector<std::unique_ptr<gputest::DeviceArray<uint8_t>>> w;
      for (int c = 0; c < copies; ++c)
        w.push_back(std::make_unique<gputest::DeviceArray<uint8_t>>(bytes));
      const double us = time_us(copies, iters, [&](int c) {
        launch_gemv_quant(x_dev.get(), w[size_t(c)]->get(), uint32_t(type), y_dev.get(), 1,
                          shape.in, shape.out, true, DType::kBF16, nullptr);
      });
      if (in_layer) layer_quant[t] += us;
      std::printf("%-8s %-6s %10.2f %9.0f %10.2f %9.0f %7.2fx\n", shape.name,
                  ggml_type_traits(type).name, us, double(bytes.size()) / us / 1e3, bf16_us,
                  double(bf16_bytes) / bf16_us / 1e3, bf16_us / us);
    }
  }
  std::printf("one llama-1b layer's four projections (qkv, o, gate|up, down), bf16 %.2f us:\n",
              layer_bf16);
  for (size_t t = 0; t < 5; ++t) {
    std::printf("  %-6s %8.2f us  %.2fx\n", ggml_type_traits(types[t]).name, layer_quant[t],
                layer_bf16 / layer_quant[t]);
  }
  CHECK(layer_bf16 > 0.0);
}
