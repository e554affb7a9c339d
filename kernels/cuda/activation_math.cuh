#pragma once
// The MLP activations on fp32 values, one definition for the standalone activation kernels
// (activation.cu) and the fused GEMV epilogues (gemv.cu), so both round the same way and a change
// to one cannot silently leave the other behind. Included from .cu files only.

namespace rose {

// GPT-2's "gelu_new": 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))).
__device__ __forceinline__ float gelu_tanh(float v) {
  const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);  // sqrt(2/pi)
  return 0.5f * v * (1.0f + tanhf(inner));
}

// Llama's gate activation: g * sigmoid(g), written as a division so the expression (and its
// rounding) is what both kernels computed before it was shared.
__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

}  // namespace rose
