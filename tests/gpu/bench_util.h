#pragma once
// Shared by the GPU timing drivers (tests/gpu/bench_*.cpp): weights cycled through enough copies
// that each call reads them from HBM, graph-replay timing, and the cuBLAS bf16 product as the
// engine's dense path calls it.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "kernels/cuda/check.cuh"

namespace rose::benchutil {

// Bytes of weight copies a measurement cycles through: several times the H100's 50 MB and the
// H200's 60 MB L2, so every call reads its weights from HBM.
constexpr size_t kColdBytes = size_t(256) << 20;

// Copies of a `bytes`-sized matrix that fill kColdBytes (at least 2).
inline int cold_copies(size_t bytes) {
  return int(std::max<size_t>(2, (kColdBytes + bytes - 1) / bytes));
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

// y (n, out) = x (n, in) W^T in bf16 on cuBLAS, as CudaBackend::dense_gemm calls it: W (out, in)
// and x row-major bf16, y bf16 or fp32 (f32_out).
inline void cublas_bf16_product(cublasHandle_t handle, const void* x, const void* w, void* y, int n,
                                int in, int out, bool f32_out) {
  const float alpha = 1.0f, beta = 0.0f;
  ROSE_CUBLAS_CHECK(cublasGemmEx(
      handle, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, CUDA_R_16BF, in, x, CUDA_R_16BF, in,
      &beta, y, f32_out ? CUDA_R_32F : CUDA_R_16BF, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace rose::benchutil
