// Timing driver for the GGUF block decoders (kernels/cuda/dequant.cu) at llama-1b's projection
// shapes: the generic kernel (one thread per element) against the staged kernel that
// launch_dequantize_rows takes for Q8_0, Q4_0, Q4_1, Q4_K and Q6_K, each decoding a whole matrix
// into bf16 as CudaBackend::dequantize does on every step with more rows than the quantized GEMV
// takes. Prints microseconds per call and GB/s of memory traffic (block bytes read + bf16 bytes
// written), the median of the timed runs after a warm-up, then a llama-1b step's decode time
// (16 layers of the four projections). Built as gpu_bench_dequant, not run by ctest; run with
// --no-skip. The sources cycle through enough copies (>= 256 MiB in all) that they come from HBM,
// not the 50 MB L2.
//   ROSEINFER_BENCH_RUNS=20 (timed runs per kernel and shape; each times kLaunchesPerRun calls)
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "engine/model/quant.h"
#include "kernels/cuda/dequant.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;

namespace {

constexpr size_t kColdBytes = size_t(256) << 20;
constexpr int kLaunchesPerRun = 10;
constexpr int kLayers = 16;  // llama-1b

struct Shape {
  const char* name;
  int in, out;  // the matrix is (out rows, in cols)
};

// llama-1b: hidden 2048, intermediate 8192 (gate|up fused: 16384 rows), 32 q + 2 x 8 kv heads of
// 64.
constexpr Shape kShapes[] = {
    {"qkv", 2048, 3072}, {"o", 2048, 2048}, {"gate|up", 2048, 16384}, {"down", 8192, 2048}};

constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                               GgmlType::kQ6_K};

int runs() {
  const char* env = std::getenv("ROSEINFER_BENCH_RUNS");
  return env ? std::max(3, std::atoi(env)) : 20;
}

// Random bytes with the fp16 scale fields set to small finite values (the speed does not depend on
// the values, but NaN/Inf scales are not what real weights hold).
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

// Median over `runs` timed runs of the mean time per call in microseconds, each run kLaunchesPerRun
// calls of launch(copy) cycling the copies, after a warm-up pass over all of them.
template <typename Launch>
double median_us(int copies, int runs, Launch launch) {
  for (int i = 0; i < std::max(copies, kLaunchesPerRun); ++i) launch(i % copies);
  cudaEvent_t begin, end;
  ROSE_CUDA_CHECK(cudaEventCreate(&begin));
  ROSE_CUDA_CHECK(cudaEventCreate(&end));
  std::vector<double> us;
  int next = 0;
  for (int r = 0; r < runs; ++r) {
    ROSE_CUDA_CHECK(cudaEventRecord(begin, nullptr));
    for (int i = 0; i < kLaunchesPerRun; ++i) launch(next++ % copies);
    ROSE_CUDA_CHECK(cudaEventRecord(end, nullptr));
    ROSE_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0.0f;
    ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    us.push_back(1000.0 * ms / kLaunchesPerRun);
  }
  ROSE_CUDA_CHECK(cudaEventDestroy(begin));
  ROSE_CUDA_CHECK(cudaEventDestroy(end));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

int copies_for(size_t bytes) { return int(std::max<size_t>(2, (kColdBytes + bytes - 1) / bytes)); }

}  // namespace

TEST_CASE("bench: GGUF block decode to bf16, generic vs staged, llama-1b shapes" *
          doctest::skip(true)) {
  const int timed_runs = runs();
  std::mt19937 rng(1);
  std::printf("%-8s %-5s %8s %10s %10s %10s %10s %8s\n", "shape", "type", "MB", "generic_us",
              "generic_GB/s", "staged_us", "staged_GB/s", "speedup");
  double step_generic[5] = {}, step_staged[5] = {};
  for (const Shape& shape : kShapes) {
    const int64_t elements = int64_t(shape.out) * shape.in;
    gputest::DeviceArray<uint16_t> dst{size_t(elements)};
    for (size_t t = 0; t < 5; ++t) {
      const GgmlType type = kTypes[t];
      const std::vector<uint8_t> bytes = weight_bytes(type, shape, rng);
      const int copies = copies_for(bytes.size());
      std::vector<std::unique_ptr<gputest::DeviceArray<uint8_t>>> src;
      for (int c = 0; c < copies; ++c)
        src.push_back(std::make_unique<gputest::DeviceArray<uint8_t>>(bytes));
      const auto decode = [&](bool staged, int c) {
        (staged ? launch_dequantize_rows : launch_dequantize_rows_generic)(
            dst.get(), DType::kBF16, src[size_t(c)]->get(), uint32_t(type), 0, shape.out, shape.out,
            shape.in, 0, nullptr);
      };
      // The two kernels must agree before their times mean anything.
      decode(false, 0);
      const std::vector<uint16_t> generic_bits = dst.download();
      dst.poison();
      decode(true, 0);
      CHECK(dst.download() == generic_bits);
      const double generic_us = median_us(copies, timed_runs, [&](int c) { decode(false, c); });
      const double staged_us = median_us(copies, timed_runs, [&](int c) { decode(true, c); });
      const double traffic = double(bytes.size()) + 2.0 * double(elements);
      std::printf("%-8s %-5s %8.1f %10.2f %10.0f %10.2f %10.0f %7.2fx\n", shape.name,
                  ggml_type_traits(type).name, traffic / 1e6, generic_us,
                  traffic / generic_us / 1e3, staged_us, traffic / staged_us / 1e3,
                  generic_us / staged_us);
      step_generic[t] += kLayers * generic_us;
      step_staged[t] += kLayers * staged_us;
    }
  }
  std::printf("a llama-1b step's decode (%d layers x qkv, o, gate|up, down):\n", kLayers);
  for (size_t t = 0; t < 5; ++t) {
    std::printf("  %-5s generic %7.3f ms  staged %7.3f ms  %.2fx\n",
                ggml_type_traits(kTypes[t]).name, step_generic[t] / 1e3, step_staged[t] / 1e3,
                step_generic[t] / step_staged[t]);
  }
  CHECK(step_staged[0] > 0.0);
}
