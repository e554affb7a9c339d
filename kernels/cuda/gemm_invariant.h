#pragma once
// Batch-invariant y = x W^T (issue 10): row r of the product has the same bits whatever the number
// of rows n. The algorithm is a pure function of (weight shape, n's bucket), chosen once at start:
// cuBLASLt with workspace 0 and no split-K reduction; per shape a reference algorithm (the
// heuristic's best at the shape's largest n), and per bucket of n (1, 2-4, 5-16, 17-64, 65-256,
// larger) the fastest heuristic candidate whose rows equal the reference's bit for bit on random
// inputs at several n of the bucket (odd ones included). A shape whose reference fails its own
// check runs on launch_gemm_fixed_order instead. run() allocates nothing and never synchronises,
// so it can be captured in a CUDA graph.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/gemm_lt.h"  // GemmShape

namespace rose {

class InvariantGemm {
 public:
  // Chooses and self-checks the algorithms for every distinct shape (allocates scratch on the
  // device for the check and frees it before returning; synchronises `stream`). fixed_only skips
  // cuBLASLt and sends every shape to the fixed-order kernel (the tests check that path too).
  InvariantGemm(const std::vector<GemmShape>& shapes, DType dtype, cudaStream_t stream,
                bool fixed_only = false);
  ~InvariantGemm();
  InvariantGemm(const InvariantGemm&) = delete;
  InvariantGemm& operator=(const InvariantGemm&) = delete;

  // y (n, out) = x (n, in) W^T, W (out, in); (out, in, f32_out) must be one of the shapes and
  // 1 <= n <= its max_rows. Not thread safe (it sets n on preallocated layouts).
  void run(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
           cudaStream_t stream);

  // One line: per shape, the algorithm per bucket ("ref", "alt<i>" or "fixed") and the seconds
  // the choice and self-check took.
  std::string describe() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rose
