#pragma once
// Elementwise MLP activations (GELU with bias, SiLU-and-mul).
#include <cuda_runtime_api.h>

#include "kernels/cuda/dtype.cuh"

namespace rose {

// GPT-2 MLP: x (rows, width) = gelu_tanh(x + bias) in place; bias (width,) or nullptr.
void launch_gelu_tanh_bias(void* x, const void* bias, int rows, int width, DType dtype,
                           cudaStream_t stream);
// Llama MLP: out (rows, width) = silu(gate_up[:, :width]) * gate_up[:, width:];
// gate_up (rows, 2 width). int8_x: also out's int8 copy into the int8 tensor-core GEMV's x scratch
// (gemv_quant_mma.cuh, gemv_quant_mma_scratch_bytes(rows, width) bytes, 16-byte aligned; width a
// multiple of 32, rows <= kGemvQuantMmaMaxRows), so the down projection need not quantize it.
void launch_silu_and_mul(void* out, const void* gate_up, int rows, int width, DType dtype,
                         cudaStream_t stream, void* int8_x = nullptr);

}  // namespace rose
