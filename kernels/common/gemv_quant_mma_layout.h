#pragma once
// Sizes of the int8 tensor-core GEMV's x scratch (kernels/cuda/gemv_quant_mma.cuh), plain C++ so
// the host's workspace plan reserves it without CUDA.
#include <cstdint>

namespace rose {

// The most activation rows one launch takes (four mma column tiles of 8). Eight tiles (64 rows)
// were no faster than the tile-decoding GEMM there (results/2026-11-30-mma-fold, call 1).
constexpr int kGemvQuantMmaMaxRows = 32;

// Rows rounded up to whole column tiles of 8 (the padding rows are quantized zeros).
constexpr int gemv_quant_mma_padded_rows(int n) { return (n + 7) / 8 * 8; }

// The scratch's int8 values, in the mma's B-fragment order: (padded rows / 8, in / 32, 32 lanes)
// of 8 bytes.
constexpr int64_t gemv_quant_mma_fragment_bytes(int n, int in) {
  return int64_t(gemv_quant_mma_padded_rows(n)) * in;
}

// The whole scratch for n rows of `in` elements: the fragments, then (padded rows, in / 32) pairs
// (d, d times the sum of q; fp32) of 8 bytes.
constexpr int64_t gemv_quant_mma_scratch_bytes(int n, int in) {
  return gemv_quant_mma_fragment_bytes(n, in) +
         int64_t(gemv_quant_mma_padded_rows(n)) * (in / 32) * 8;
}

}  // namespace rose
