#pragma once
// y = x W^T for a handful of rows (decode at small batch) with W kept in its GGUF blocks on the
// device: each lane loads its slice of a block, decodes it in registers (scales once per slice)
// and accumulates in fp32. Activations stay bf16/fp16 as the rest of the step sees them; no
// activation quantization (no dp4a), so the only error against the dequantized weights is fp32
// rounding. Types are ggml's ids (rose::GgmlType's values): engine/model/quant.h needs C++20 and
// the .cu files are C++17.
//
// Batch invariance: row r of y is computed from row r of x by the same operations in the same
// order whatever n is (the grid, the lanes' slices and every reduction depend on (type, in, out)
// only), so a sequence's result does not change with the rows decoded beside it.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace rose {

constexpr int kGemvQuantMaxRows = 4;

// Whether `ggml_type` (a GgmlType id) has a kernel: Q8_0, Q4_0, Q4_1, Q4_K and Q6_K.
bool gemv_quant_type_supported(uint32_t ggml_type);

// Elements per block of a supported type (32, or 256 for Q4_K / Q6_K); 0 for other types.
int gemv_quant_block_elems(uint32_t ggml_type);

// True when launch_gemv_quant handles this shape: a supported type, 1 <= n <= 4, `in` a positive
// multiple of the block size.
bool gemv_quant_supported(uint32_t ggml_type, int n, int in);

// Bytes of one stored row of `in` elements: in / block_elems blocks.
int64_t gemv_quant_row_bytes(uint32_t ggml_type, int in);

// y (n, out) = x (n, in) W^T.
//   x:    (n, in) in dtype, rows back to back; 16-byte aligned
//   w:    (out, in) stored as `out` rows of in / block_elems ggml blocks of ggml_type, each row
//         right after the previous one (gemv_quant_row_bytes(ggml_type, in) bytes per row); aligned
//         to 16 bytes for Q4_K, 4 for Q4_1, 2 for the others
//   y:    (n, y_stride) in fp32 when f32_out, else in dtype; columns [0, out) of each row are
//         written, so a matrix stored as row ranges of different types (GGUF q | k | v) fills one
//         output through one launch per range at y + range start
//   n:    1..kGemvQuantMaxRows; in: a multiple of the block size; out >= 1
//   y_stride: elements from one row of y to the next, >= out; 0 means out
void launch_gemv_quant(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n, int in,
                       int out, bool f32_out, DType dtype, cudaStream_t stream, int y_stride = 0);

// The gated MLP's first projection: y (n, out) = silu(x G^T) * (x U^T) in dtype.
//   x: (n, in) in dtype;  w: (2 * out, in) blocks as above, rows gate (0..out-1) | up (out..)
void launch_gemv_quant_silu_mul(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n,
                                int in, int out, DType dtype, cudaStream_t stream);

}  // namespace rose
