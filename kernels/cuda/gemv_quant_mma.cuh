#pragma once
// Quantized GEMV on int8 tensor cores for small batches: y = x W^T with W in Q4_K, Q6_K, Q8_0,
// Q4_0 or Q4_1 blocks and x quantized to int8 per 32 elements (the rule of gemv_quant.cuh), the
// integer dot products of each 32-element sub-block by mma.sync m16n8k32 (s8 x s8 -> s32; Q6_K's
// two 16-element scale halves as two mmas), scaled in fp32. The dp4a GEMV (gemv_quant.cuh) pays
// ~30 instructions per weight unit and activation row, so its step time grows with the rows
// (llama-1b Q4_K, H200: 0.44 ms a step at 1 row, 1.41 at 8); here one mma takes 16 weight rows by 8
// activation rows by 32 elements, and a nibble reaches the tensor core with one AND per four
// (Q8_0's bytes as they are).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/gemv_quant_mma_layout.h"  // kGemvQuantMmaMaxRows, the scratch's size
#include "kernels/cuda/dtype.cuh"

namespace rose {

// True when launch_gemv_quant_mma takes this product: Q4_K, Q6_K, Q8_0, Q4_0 or Q4_1, 1 <= n <=
// kGemvQuantMmaMaxRows, `in` a positive multiple of the block's elements (256 or 32).
bool gemv_quant_mma_supported(uint32_t ggml_type, int n, int in);

// x: (n, in) in dtype, 16-byte aligned; w: (out, in) blocks of ggml_type, rows back to back,
// 16-byte aligned; y: (n, y_stride) in dtype, or fp32 when f32_out (y_stride 0: out). x_scratch:
// gemv_quant_mma_scratch_bytes(n, in) bytes (gemv_quant_mma_layout.h), 16-byte aligned, written
// by a first kernel and read by the second. Row r of y does not depend on n or on the other rows
// (each output is summed in an order fixed by `in`).
void launch_gemv_quant_mma(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n,
                           int in, int out, bool f32_out, DType dtype, void* x_scratch,
                           cudaStream_t stream, int y_stride = 0);

}  // namespace rose
