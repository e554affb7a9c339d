#pragma once
// y = x W^T for a handful of rows (decode at small batch) with W kept in its GGUF blocks on the
// device, computed as llama.cpp's mmvq does: the activations are quantized to int8 per 32-element
// block inside the kernel and the block dot products run on __dp4a. Types are ggml's ids
// (rose::GgmlType's values): engine/model/quant.h needs C++20 and the .cu files are C++17.
//
// Numerics. Each row of x is quantized per 32 consecutive elements (in % 32 == 0): amax = max |x|,
// s = min(127 / amax, FLT_MAX) (fp32 division), q = rint(x * s) (fp32 product, round half to
// even) clamped to [-127, 127] (the clamp and the min act only for amax < ~2^-120), d = amax / 127;
// a block of zeros has d = 0 and q = 0. The result is the dot
// product of the dequantized weights with x' = d q, the integer parts exact and the scales applied
// in fp32 once per 32 (Q6_K: 16) elements. So against the exact sum(w x') the error is fp32
// rounding only (~40 roundings deep at in = 16k); against the unquantized x each element moves by
// at most d / 2 = amax / 254, i.e. |y - x W^T| <= sum over blocks of amax / 254 * sum |w| in the
// block (the same activation rounding as llama.cpp's q8_1).
//
// Batch invariance: row r of y is computed from row r of x by the same operations in the same
// order whatever n is (each output feature's sum is one warp's, in an order that depends on
// (type, in) only), so a sequence's result does not change with the rows decoded beside it.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/gemv_fusion.cuh"

namespace rose {

constexpr int kGemvQuantMaxRows = 8;

// Whether `ggml_type` (a GgmlType id) has a kernel: Q8_0, Q4_0, Q4_1, Q4_K and Q6_K.
bool gemv_quant_type_supported(uint32_t ggml_type);

// Elements per block of a supported type (32, or 256 for Q4_K / Q6_K); 0 for other types.
int gemv_quant_block_elems(uint32_t ggml_type);

// True when launch_gemv_quant handles this shape: a supported type, 1 <= n <= kGemvQuantMaxRows,
// `in` a positive multiple of the block size whose quantized row (~1.25 bytes per element) fits the
// kernel's 160 KiB shared memory budget (in <= 131072). Rows past the budget at larger n are run
// as several launches inside launch_gemv_quant, so n never makes a supported `in` unsupported.
bool gemv_quant_supported(uint32_t ggml_type, int n, int in);

// Bytes of one stored row of `in` elements: in / block_elems blocks.
int64_t gemv_quant_row_bytes(uint32_t ggml_type, int in);

// y (n, out) = x (n, in) W^T.
//   x:    (n, in) in dtype, rows back to back; 16-byte aligned
//   w:    (out, in) stored as `out` rows of in / block_elems ggml blocks of ggml_type, each row
//         right after the previous one (gemv_quant_row_bytes(ggml_type, in) bytes per row); aligned
//         to 16 bytes (the kernel streams 16-byte aligned spans; it reads nothing past the last
//         row's last byte)
//   y:    (n, y_stride) in fp32 when f32_out, else in dtype; columns [0, out) of each row are
//         written, so a matrix stored as row ranges of different types (GGUF q | k | v) fills one
//         output through one launch per range at y + range start
//   n:    1..kGemvQuantMaxRows; in: as gemv_quant_supported; out >= 1
//   y_stride: elements from one row of y to the next, >= out; 0 means out
//   fusion: gemv_fusion.cuh's norm input (x unused; the residual and norm weight 16-byte aligned)
//         and residual add (y the fp32 residual stream, not with f32_out); its
//         weights_before_wait is not read (the blocks are constants:
//         ROSEINFER_CUDA_GEMV_QUANT_EARLY)
void launch_gemv_quant(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n, int in,
                       int out, bool f32_out, DType dtype, cudaStream_t stream, int y_stride = 0,
                       const GemvFusion& fusion = {});

// The gated MLP's first projection: y (n, out) = silu(x G^T) * (x U^T) in dtype.
//   x: (n, in) in dtype;  w: (2 * out, in) blocks as above, rows gate (0..out-1) | up (out..)
//   fusion: the norm input only
void launch_gemv_quant_silu_mul(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n,
                                int in, int out, DType dtype, cudaStream_t stream,
                                const GemvFusion& fusion = {});

}  // namespace rose
