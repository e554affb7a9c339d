#pragma once
// Dense GEMV on the tensor cores for 3-32 rows: y = x W^T with W (out, in) in bf16 or fp16, one
// mma.sync m16n8k16 per 16 weight rows x 8 input rows x 16 elements, straight from 16-byte global
// loads. cuBLAS at these row counts streamed llama-8b's weights at ~2.9 TB/s where the one-row
// GEMV reaches ~3.7 (H200: 5.87 ms a 16-row step against 4.06 at one row), and the CUDA-core GEMV
// (gemv.cuh) pays a multiply-add per weight and row, so it loses from 3 rows on wide matrices.
#include <cuda_runtime_api.h>

#include "kernels/cuda/dtype.cuh"

namespace rose {

constexpr int kGemvMmaMaxRows = 32;

// True when launch_gemv_mma takes this product: 1 <= n <= kGemvMmaMaxRows, `in` a positive
// multiple of 32 (a warp's step is 16 rows x 32 elements).
inline bool gemv_mma_supported(int n, int in) {
  return n >= 1 && n <= kGemvMmaMaxRows && in > 0 && in % 32 == 0;
}

// y (n, out) = x (n, in) W^T with W (out, in), in dtype; y in fp32 when f32_out, else in dtype.
// x and w 16-byte aligned. w must not be written by the kernel launched just before on the
// stream: its first loads come before the PDL wait (launch.cuh's rule for constants of the run).
// Each output is summed in an order fixed by `in` (16-element mma
// partials in k order within each of the block's 8 warps, the warps in warp order), so row r of
// y does not depend on n or on the other rows.
void launch_gemv_mma(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                     DType dtype, cudaStream_t stream);

}  // namespace rose
