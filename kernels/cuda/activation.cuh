#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/dtype.cuh"

namespace rose {

// GPT-2 MLP: x (rows, width) = gelu_tanh(x + bias) in place; bias (width,) or nullptr.
void launch_gelu_tanh_bias(void* x, const void* bias, int rows, int width, DType dtype,
                           cudaStream_t stream);
// Llama MLP: out (rows, width) = silu(gate_up[:, :width]) * gate_up[:, width:];
// gate_up (rows, 2 width).
void launch_silu_and_mul(void* out, const void* gate_up, int rows, int width, DType dtype,
                         cudaStream_t stream);

}  // namespace rose
