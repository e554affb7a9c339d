// Timing driver for the GGUF block decoders (kernels/cuda/dequant.cu) at llama-1b's projection
// shapes (a second case times decode + cuBLAS at 64-256 rows, whole matrix against L2-sized
// chunks): the generic kernel (one thread per element) against the staged kernel that
// launch_dequantize_rows takes for Q8_0, Q4_0, Q4_1, Q4_K and Q6_K, each decoding a whole matrix
// into bf16 as CudaBackend::dequantize does on every step with more rows than the quantized GEMV
// takes. Prints microseconds per call and GB/s of memory traffic (block bytes read + bf16 bytes
// written), the median of the timed runs after a warm-up, then a llama-1b step's decode time
// (16 layers of the four projections). Built as gpu_bench_dequant, not run by ctest; run with
// --no-skip. The sources cycle through enough copies (>= 256 MiB in all) that they come from HBM,
// not the 50 MB L2.
//   ROSEINFER_BENCH_RUNS=20 (timed runs per kernel and shape; each times kLaunchesPerRun calls)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "engine/model/quant.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/dequant.cuh"
#include "tests/gpu/bench_util.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using benchutil::cold_copies;

namespace {

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
      const std::vector<uint8_t> bytes =
          benchutil::random_weight_blocks(type, shape.out, shape.in, rng);
      const int copies = cold_copies(bytes.size());
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

namespace {

// y (n, out) rows [r0, r0 + rows) of its columns = x (n, in) W_chunk^T, W_chunk (rows, in) bf16:
// cuBLAS's column-major y^T chunk (rows, n) at y + r0 with leading dimension out.
void gemm_rows(cublasHandle_t handle, const void* x, const void* w_chunk, void* y, int n, int in,
               int out, int r0, int rows) {
  const float alpha = 1.0f, beta = 0.0f;
  ROSE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, in, &alpha, w_chunk,
                                 CUDA_R_16BF, in, x, CUDA_R_16BF, in, &beta,
                                 static_cast<uint16_t*>(y) + r0, CUDA_R_16BF, out,
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

// Batch-256 decode with weights kept in Q4_K decodes each matrix into a bf16 scratch and runs
// cuBLAS on it (CudaBackend::dequantize): the scratch's 2 bytes a weight are written to HBM and
// read back. Decoded in chunks of rows small enough to stay in the 50 MB L2 (decode a chunk, run
// its GEMM, reuse the scratch), HBM would see only the blocks. This times, per llama-1b matrix at
// n rows: bf16 cuBLAS on dense weights, decode of the whole matrix + cuBLAS, and chunks of
// 4-32 MB, with and without an L2 persisting window on the scratch.
TEST_CASE("bench: Q4_K decode + cuBLAS at large batches, whole matrix vs L2-sized chunks" *
          doctest::skip(true)) {
  const int timed_runs = runs();
  std::mt19937 rng(2);
  cublasHandle_t handle;
  ROSE_CUBLAS_CHECK(cublasCreate(&handle));
  gputest::DeviceArray<uint8_t> cublas_workspace{size_t(32) << 20};
  ROSE_CUBLAS_CHECK(cublasSetWorkspace(handle, cublas_workspace.get(), size_t(32) << 20));
  cudaDeviceProp prop{};
  ROSE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("L2 %d MB, persisting max %d MB\n", prop.l2CacheSize >> 20,
              prop.persistingL2CacheMaxSize >> 20);
  const GgmlType type = GgmlType::kQ4_K;
  std::printf("%-8s %4s %10s %10s", "shape", "n", "bf16_us", "whole_us");
  const int chunk_mb[] = {4, 8, 16, 24, 32};
  for (int mb : chunk_mb) std::printf("  chunk%-2d_us", mb);
  std::printf("  persist16_us\n");
  for (int n : {64, 128, 256}) {
    double step_bf16 = 0, step_whole = 0, step_chunk[5] = {}, step_persist = 0;
    for (const Shape& shape : kShapes) {
      const int64_t elements = int64_t(shape.out) * shape.in;
      const std::vector<uint8_t> bytes =
          benchutil::random_weight_blocks(type, shape.out, shape.in, rng);
      const int copies = cold_copies(bytes.size());
      std::vector<std::unique_ptr<gputest::DeviceArray<uint8_t>>> src;
      for (int c = 0; c < copies; ++c)
        src.push_back(std::make_unique<gputest::DeviceArray<uint8_t>>(bytes));
      const int dense_copies = cold_copies(size_t(elements) * 2);
      std::vector<std::unique_ptr<gputest::DeviceArray<uint16_t>>> dense;
      for (int c = 0; c < dense_copies; ++c)
        dense.push_back(std::make_unique<gputest::DeviceArray<uint16_t>>(size_t(elements)));
      gputest::DeviceArray<uint16_t> scratch{size_t(elements)};
      gputest::DeviceArray<uint16_t> x{size_t(n) * shape.in}, y{size_t(n) * shape.out};
      ROSE_CUDA_CHECK(cudaMemset(x.get(), 0, size_t(n) * shape.in * 2));
      const double bf16_us = median_us(dense_copies, timed_runs, [&](int c) {
        gemm_rows(handle, x.get(), dense[size_t(c)]->get(), y.get(), n, shape.in, shape.out, 0,
                  shape.out);
      });
      const double whole_us = median_us(copies, timed_runs, [&](int c) {
        launch_dequantize_rows(scratch.get(), DType::kBF16, src[size_t(c)]->get(), uint32_t(type),
                               0, shape.out, shape.out, shape.in, 0, nullptr);
        gemm_rows(handle, x.get(), scratch.get(), y.get(), n, shape.in, shape.out, 0, shape.out);
      });
      const GgmlTypeTraits& traits = ggml_type_traits(type);
      const int64_t row_bytes = int64_t(shape.in) / traits.block_elems * traits.block_bytes;
      const auto chunked = [&](int mb, int c) {
        const int rows = int(std::min<int64_t>(shape.out, (int64_t(mb) << 20) / (2 * shape.in)));
        for (int r0 = 0; r0 < shape.out; r0 += rows) {
          const int count = std::min(rows, shape.out - r0);
          launch_dequantize_rows(scratch.get(), DType::kBF16,
                                 src[size_t(c)]->get() + int64_t(r0) * row_bytes, uint32_t(type), 0,
                                 count, count, shape.in, 0, nullptr);
          gemm_rows(handle, x.get(), scratch.get(), y.get(), n, shape.in, shape.out, r0, count);
        }
      };
      double chunk_us[5];
      for (int k = 0; k < 5; ++k) {
        chunk_us[k] = median_us(copies, timed_runs, [&](int c) { chunked(chunk_mb[k], c); });
        step_chunk[k] += kLayers * chunk_us[k];
      }
      // The same 16 MB chunks with the scratch's lines marked persisting in L2.
      ROSE_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, size_t(20) << 20));
      cudaStreamAttrValue window{};
      window.accessPolicyWindow.base_ptr = scratch.get();
      window.accessPolicyWindow.num_bytes = size_t(16) << 20;
      window.accessPolicyWindow.hitRatio = 1.0f;
      window.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
      window.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
      ROSE_CUDA_CHECK(
          cudaStreamSetAttribute(nullptr, cudaStreamAttributeAccessPolicyWindow, &window));
      const double persist_us = median_us(copies, timed_runs, [&](int c) { chunked(16, c); });
      window.accessPolicyWindow.num_bytes = 0;
      ROSE_CUDA_CHECK(
          cudaStreamSetAttribute(nullptr, cudaStreamAttributeAccessPolicyWindow, &window));
      ROSE_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
      std::printf("%-8s %4d %10.1f %10.1f", shape.name, n, bf16_us, whole_us);
      for (double us : chunk_us) std::printf("  %10.1f", us);
      std::printf("  %10.1f\n", persist_us);
      step_bf16 += kLayers * bf16_us;
      step_whole += kLayers * whole_us;
      step_persist += kLayers * persist_us;
    }
    std::printf("n=%d, 16 layers: bf16 %.3f ms, whole %.3f ms, chunks", n, step_bf16 / 1e3,
                step_whole / 1e3);
    for (int k = 0; k < 5; ++k) std::printf(" %dMB %.3f", chunk_mb[k], step_chunk[k] / 1e3);
    std::printf(" ms, persisting 16MB %.3f ms\n", step_persist / 1e3);
  }
  ROSE_CUBLAS_CHECK(cublasDestroy(handle));
}
