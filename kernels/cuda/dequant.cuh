#pragma once
// GGUF (ggml) blocks decoded on the device at load, so a quantized checkpoint is uploaded in its
// compact form and becomes bf16/fp16 weights without an fp32 pass on the host; and on every step
// that multiplies a kept quantized matrix by more rows than the quantized GEMV takes
// (CudaBackend::dequantize decodes it into a scratch for cuBLAS). Each element is computed with
// the same fp32 operations in the same order as the CPU reference (rose::dequantize in
// engine/model/quant.cpp), so the result is bit-identical to rounding the reference's fp32 value.
// Types are ggml's ids (rose::GgmlType's values): engine/model/quant.h needs C++20 and the .cu
// files are C++17.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace rose {

// Whether `ggml_type` (a GgmlType id) has a device decoder: all 13 types the CPU reference reads.
bool device_dequant_supported(uint32_t ggml_type);

// Decodes rows [row_begin, row_begin + num_rows) of one stored part into its canonical rows.
//   dst:  (part_rows, cols) in dtype, the part's first canonical row; stored row r is written to
//         row unpermuted_row(r, part_rows, unpermute_heads) (engine/model/weights.h)
//   src:  (num_rows, cols / block_elems) ggml blocks of ggml_type on the device, row_begin's first
//   cols: a multiple of the type's block_elems; unpermute_heads: 0 (rows in place) or a divisor
//         of part_rows into heads of even size
// Launched with PDL (kernels/cuda/launch.cuh). Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (the step-time
// types of CudaBackend::dequantize) take staged kernels that may read src before waiting for the
// previous kernel in the stream (src is constant weights there, and at load time it is written by
// a copy, not a kernel): src must not be written by the kernel launched just before.
void launch_dequantize_rows(void* dst, DType dtype, const uint8_t* src, uint32_t ggml_type,
                            int64_t row_begin, int64_t num_rows, int64_t part_rows, int64_t cols,
                            int unpermute_heads, cudaStream_t stream);

// launch_dequantize_rows through the generic kernel (one thread per element) for every type: the
// same bits, for the tests and the timing driver (tests/gpu/bench_dequant.cpp) to compare against.
void launch_dequantize_rows_generic(void* dst, DType dtype, const uint8_t* src, uint32_t ggml_type,
                                    int64_t row_begin, int64_t num_rows, int64_t part_rows,
                                    int64_t cols, int unpermute_heads, cudaStream_t stream);

}  // namespace rose
