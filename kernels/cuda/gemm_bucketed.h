#pragma once
// Default-mode linear layers above the GEMV's rows: y = x W^T through cuBLASLt with one algorithm
// per (weight shape, bucket of row counts), chosen once by the heuristic at the bucket's largest
// row count when the backend starts. cublasGemmEx chooses per exact row count at its first call:
// 8-10 ms on the host for seed000's first 1,360-row step (results/2026-11-24-small-steps/
// step_times), paid again by every new prompt mix. Not batch-invariant (split-K allowed); the
// pinned, checked algorithms of --batch-invariant are InvariantGemm's (gemm_invariant.h).
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/gemm_lt.h"  // GemmShape

namespace rose {

class BucketedGemm {
 public:
  // Chooses the algorithms for every distinct shape (host-side only: no device memory, no sync).
  // workspace (workspace_bytes) is the cuBLAS workspace the algorithms may use; it must outlive
  // this object and not be used concurrently on another stream.
  BucketedGemm(const std::vector<GemmShape>& shapes, DType dtype, void* workspace,
               size_t workspace_bytes);
  ~BucketedGemm();
  BucketedGemm(const BucketedGemm&) = delete;
  BucketedGemm& operator=(const BucketedGemm&) = delete;

  // y (n, out) = x (n, in) W^T, W (out, in), x and y row-major in dtype (y in fp32 when f32_out).
  // False, having launched nothing, when the shape was not prepared, n is outside 1..max_rows, or
  // cuBLASLt refuses the bucket's algorithm at n: the caller then runs cublasGemmEx. Not thread
  // safe (it sets n on preallocated layouts). Allocates nothing; can be captured in a CUDA graph.
  bool run(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
           cudaStream_t stream);

  // The bucket bounds (the largest row count of each) for a shape of max_rows: 8, 16, 24, 32,
  // 48, 64, 96, ... (two per doubling), the last one max_rows.
  static std::vector<int> bucket_bounds(int max_rows);

  // One line: per shape, the buckets and how many got an algorithm (the rest fall back).
  std::string describe() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rose
