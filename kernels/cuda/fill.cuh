#pragma once
// Weight initialisation on the device: presets' synthetic tensors generated in place (the same
// counter-based function as the CPU, so the fp32 values are bit-identical before rounding), and
// checkpoint tensors converted from fp32.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace rose {

// dst (n,) = synthetic_uniform(seed, i, scale) rounded to dtype.
void launch_fill_uniform(void* dst, DType dtype, int64_t n, uint64_t seed, float scale,
                         cudaStream_t stream);
// dst (rows, cols) = the values at rows source_row.. and columns col_begin.. of a synthetic tensor
// of source_cols columns: element (i, j) is synthetic_uniform(seed, (source_row + i) * source_cols
// + col_begin + j, scale). A tensor-parallel shard's slice of a preset's tensor.
void launch_fill_uniform_slice(void* dst, DType dtype, int64_t rows, int64_t cols,
                               int64_t source_row, int64_t source_cols, int64_t col_begin,
                               uint64_t seed, float scale, cudaStream_t stream);
// dst (n,) = value.
void launch_fill_constant(void* dst, DType dtype, int64_t n, float value, cudaStream_t stream);
// dst (n,) = src (n,) fp32 rounded to dtype.
void launch_convert_from_f32(void* dst, DType dtype, const float* src, int64_t n,
                             cudaStream_t stream);

}  // namespace rose
