#pragma once
// Shared by the GPU timing drivers (tests/gpu/bench_*.cpp): weights cycled through enough copies
// that each call reads them from HBM, graph-replay timing, and the cuBLAS bf16 product as the
// engine's dense path calls it.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "kernels/cuda/check.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace rose::benchutil {

// Bytes of weight copies a measurement cycles through: several times the H100's 50 MB and the
// H200's 60 MB L2, so every call reads its weights from HBM.
constexpr size_t kColdBytes = size_t(256) << 20;

// One weight product of a decode step: y (n, out) = x (n, in) W^T.
struct Product {
  const char* name;
  int in, out;
  bool f32_out;  // the lm_head's logits
};

struct ModelProducts {
  const char* name;
  std::vector<Product> products;
};

// The decode step's products of the presets (engine/model/presets.cpp) and of SmolLM2-135M. gate|up
// is one product over its 2 x intermediate rows (the fused SiLU epilogue reads the same bytes).
inline const std::vector<ModelProducts>& decode_products() {
  static const std::vector<ModelProducts> models = {
      {"llama-1b",
       {{"qkv", 2048, 3072, false},
        {"o", 2048, 2048, false},
        {"gate|up", 2048, 16384, false},
        {"down", 8192, 2048, false},
        {"lm_head", 2048, 128256, true}}},
      {"llama-8b",
       {{"qkv", 4096, 6144, false},
        {"o", 4096, 4096, false},
        {"gate|up", 4096, 28672, false},
        {"down", 14336, 4096, false},
        {"lm_head", 4096, 128256, true}}},
      {"gpt2",
       {{"qkv", 768, 2304, false},
        {"o", 768, 768, false},
        {"up", 768, 3072, false},
        {"down", 3072, 768, false},
        {"lm_head", 768, 50257, true}}},
      {"SmolLM2-135M",
       {{"qkv", 576, 960, false},
        {"o", 576, 576, false},
        {"gate|up", 576, 3072, false},
        {"down", 1536, 576, false},
        {"lm_head", 576, 49152, true}}},
  };
  return models;
}

// Calls per measurement: ROSEINFER_BENCH_ITERS (at least 10), else the driver's default.
inline int iterations(int default_iters) {
  const char* env = std::getenv("ROSEINFER_BENCH_ITERS");
  return env ? std::max(10, std::atoi(env)) : default_iters;
}

// An (out, in) matrix of random `type` blocks whose fp16 scale fields (d, and Q4_1's m and Q4_K's
// dmin) are 2^-7: the kernels' speed does not depend on the values, but NaN or Inf scales are not
// what real weights hold.
inline std::vector<uint8_t> random_weight_blocks(GgmlType type, int out, int in,
                                                 std::mt19937& rng) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  std::vector<uint8_t> bytes(size_t(int64_t(out) * in / traits.block_elems * traits.block_bytes));
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

// Copies of a `bytes`-sized matrix that fill kColdBytes (at least 2).
inline int cold_copies(size_t bytes) {
  return int(std::max<size_t>(2, (kColdBytes + bytes - 1) / bytes));
}

// cold_copies(bytes of host) device copies of `host`; a measurement's call i reads copy i % size().
template <typename T>
std::vector<std::unique_ptr<gputest::DeviceArray<T>>> cold_upload(const std::vector<T>& host) {
  std::vector<std::unique_ptr<gputest::DeviceArray<T>>> copies;
  const int count = cold_copies(host.size() * sizeof(T));
  for (int c = 0; c < count; ++c) copies.push_back(std::make_unique<gputest::DeviceArray<T>>(host));
  return copies;
}

// Cold copies of a random bf16 matrix of `elements` values in [-0.05, 0.05] (weight-sized).
inline std::vector<std::unique_ptr<gputest::DeviceArray<uint16_t>>> cold_random_bf16(
    size_t elements, std::mt19937& rng) {
  return cold_upload(gputest::random_bf16(elements, rng, -0.05f, 0.05f).bits);
}

// Mean time per call in microseconds of `iters` calls of launch(i) captured into one graph on
// `stream`, timed on its second replay (the first warms up).
template <typename Launch>
double graph_us(cudaStream_t stream, int iters, Launch launch) {
  cudaGraph_t graph = nullptr;
  ROSE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < iters; ++i) launch(i);
  ROSE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  ROSE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  ROSE_CUDA_CHECK(cudaGraphDestroy(graph));
  cudaEvent_t begin, end;
  ROSE_CUDA_CHECK(cudaEventCreate(&begin));
  ROSE_CUDA_CHECK(cudaEventCreate(&end));
  ROSE_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // warm-up replay
  ROSE_CUDA_CHECK(cudaEventRecord(begin, stream));
  ROSE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  ROSE_CUDA_CHECK(cudaEventRecord(end, stream));
  ROSE_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0.0f;
  ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
  ROSE_CUDA_CHECK(cudaEventDestroy(begin));
  ROSE_CUDA_CHECK(cudaEventDestroy(end));
  ROSE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  return 1000.0 * ms / iters;
}

// A non-blocking stream and a cuBLAS handle bound to it with a fixed workspace, which keeps cuBLAS
// from allocating during graph capture (as CudaBackend does).
class CublasOnStream {
 public:
  CublasOnStream() {
    ROSE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ROSE_CUBLAS_CHECK(cublasCreate(&handle_));
    ROSE_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
    ROSE_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
    ROSE_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  }
  ~CublasOnStream() {
    ROSE_CUBLAS_CHECK(cublasDestroy(handle_));
    ROSE_CUDA_CHECK(cudaFree(workspace_));
    ROSE_CUDA_CHECK(cudaStreamDestroy(stream_));
  }
  CublasOnStream(const CublasOnStream&) = delete;
  CublasOnStream& operator=(const CublasOnStream&) = delete;
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t handle() const { return handle_; }

 private:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

// y (n, out) = x (n, in) W^T in bf16 on cuBLAS, as CudaBackend::dense_gemm calls it: W (out, in)
// and x row-major bf16, y bf16 or fp32 (f32_out).
inline void cublas_bf16_product(cublasHandle_t handle, const void* x, const void* w, void* y, int n,
                                int in, int out, bool f32_out) {
  const float alpha = 1.0f, beta = 0.0f;
  ROSE_CUBLAS_CHECK(cublasGemmEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, CUDA_R_16BF, in, x, CUDA_R_16BF, in,
      &beta, y, f32_out ? CUDA_R_32F : CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The per-product drivers' body: ROSEINFER_BENCH_ITERS calls a graph (default_iters unless set),
// one cuBLAS handle on its own stream, one random stream seeded 1, and bench_model(model, iters,
// handle, stream, rng) for each decode_products() model that ROSEINFER_BENCH_MODELS selects and
// `takes` accepts. Returns the iterations used.
template <typename BenchModel, typename Takes>
int bench_selected_models(int default_iters, BenchModel bench_model, Takes takes) {
  const int iters = iterations(default_iters);
  const CublasOnStream cublas;
  std::mt19937 rng(1);
  for (const ModelProducts& model : decode_products()) {
    if (takes(model) && gputest::env_selects("ROSEINFER_BENCH_MODELS", model.name)) {
      bench_model(model, iters, cublas.handle(), cublas.stream(), rng);
    }
  }
  return iters;
}
template <typename BenchModel>
int bench_selected_models(int default_iters, BenchModel bench_model) {
  return bench_selected_models(default_iters, bench_model,
                               [](const ModelProducts&) { return true; });
}

}  // namespace rose::benchutil
