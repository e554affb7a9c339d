#pragma once
// y = x W^T that is batch invariant by construction: every output element is one fp32 chain of
// fmas over k = 0, 1, ..., in - 1 in that order, whatever the number of rows, the tile or the
// grid. Slow (plain shared-memory tiles, no tensor cores): the fallback of InvariantGemm for a
// weight shape where cuBLASLt offers no algorithm whose rows keep their bits across row counts.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace rose {

// y (n, out) = x (n, in) W^T with W (out, in); y in fp32 when f32_out, else in dtype.
void launch_gemm_fixed_order(const void* x, const void* w, void* y, int n, int in, int out,
                             bool f32_out, DType dtype, cudaStream_t stream);

}  // namespace rose

namespace rose {

// The invariance self-check's comparison: adds to *count (device) the number of 16-bit words
// where a and b differ; a, b (words,).
void launch_count_mismatches(const uint16_t* a, const uint16_t* b, int64_t words,
                             unsigned long long* count, cudaStream_t stream);

}  // namespace rose
