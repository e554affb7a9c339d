#pragma once
// Dense GEMV on the tensor cores for up to 32 rows: y = x W^T with W (out, in) in bf16 or fp16, one
// mma.sync m16n8k16 per 16 weight rows x 8 input rows x 16 elements, straight from 16-byte global
// loads. For small models only (CudaBackend's gemv_mma_rows_for): on an H200 cuBLAS took 100-112
// us for gpt2's 50,257-feature fp32 lm_head at 8-32 rows (24-50 here), and this kernel's weight
// loads before the PDL wait overlap the previous kernel, which cuBLAS's cannot. On llama-1b and
// llama-8b cuBLAS streams every product at 3.2-4.2 TB/s from 4 rows on, faster than this kernel
// (results/2026-12-02-gemv-mma).
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
