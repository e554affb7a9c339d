#pragma once
// y = x W^T for a handful of rows (decode at small batch), where cuBLAS launches too few thread
// blocks to stream the weights at full bandwidth: one warp per output feature, 16-byte weight
// loads, every input row reused from L1. Optional epilogues fuse the MLP activation so no separate
// activation kernel runs. Small matrices (a block's first two chunks cover its rows whole, as in
// SmolLM2-135M) run in one resident wave with those weights loaded before the PDL wait, so they
// stream while the previous kernel finishes; the others, one block per feature group.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/gemv_fusion.cuh"

namespace rose {

constexpr int kGemvMaxRows = 4;
// True when launch_gemv handles this shape (n <= kGemvMaxRows, in a multiple of 8).
inline bool gemv_supported(int n, int in) { return n >= 1 && n <= kGemvMaxRows && in % 8 == 0; }

// Warps that share one output feature's dot product (1, 2 or 4): enough that out * split warps
// fill the GPU (~8k warps) while each warp keeps at least one 512-byte chunk of the row.
inline int gemv_split(int in, int out) {
  int split = 1;
  while (split < 4 && out * split < 8192 && in >= 256 * (split * 2)) split *= 2;
  return split;
}

// y (n, out) = x (n, in) W^T with W (out, in); y in fp32 when f32_out, else in dtype. `fusion`
// (gemv_fusion.cuh): the residual add (y the fp32 residual stream; not with f32_out), or a norm
// input (x unused) where gemv_norm_input_supported. The norm runs only on the one-wave kernel,
// once per resident block: normalizing in each of the per-group kernel's ~2,000 small blocks cost
// 3-5% on llama shapes (results/2026-11-25-fused-norm).
void launch_gemv(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                 DType dtype, cudaStream_t stream, const GemvFusion& fusion = {});

// The most bytes of normalized rows (n * in elements of a 2-byte dtype) a norm-input launch keeps
// in a block's shared memory: 4 rows of in = 2048, under the 48 KiB a launch gets without opt-in.
constexpr int64_t kGemvNormInputMaxBytes = 16 * 1024;

// True when a product of this shape (out: features, gate|up's half when gated) takes a norm input
// at n rows: it runs on the one-wave kernel (gemv.cu's wave_for), and its rows fit
// kGemvNormInputMaxBytes.
bool gemv_norm_input_supported(int n, int in, int out);

enum class GemvActivation {
  kGeluTanhBias,  // y = gelu_tanh(x W^T + bias), W (out, in), bias (out,)
  kSiluMul,       // y = silu(x G^T) * (x U^T), W (2 * out, in) rows gate | up
};

// The MLP's first projection with its activation; y (n, out) in dtype. `fusion`: a norm input
// (kSiluMul only, where gemv_norm_input_supported(n, in, out)).
void launch_gemv_act(const void* x, const void* w, const void* bias, void* y, int n, int in,
                     int out, GemvActivation act, DType dtype, cudaStream_t stream,
                     const GemvFusion& fusion = {});

}  // namespace rose
