#pragma once
// x's int8 copy where the int8 tensor-core GEMV reads it (gemv_quant_mma.cuh), for the kernels
// that write it: the GEMV's own quantize kernel, and the kernels whose output is the GEMV's x
// (add-norm, SiLU-and-mul), which write it beside x and spare the GEMV that launch. Included from
// .cu files only.
#include <cstdint>

#include "kernels/common/gemv_quant_mma_layout.h"
#include "kernels/cuda/quantize_int8.cuh"

namespace rose {

constexpr int kInt8XColumns = 8;  // x rows of one mma column tile

struct alignas(8) Int8XSums {  // one sub-block of one x row: x ~ d q
  float d;
  float dsum;  // d times the sum of q (rounded once), the min terms' factor
};

// The scratch of n rows of `in` elements (gemv_quant_mma_scratch_bytes(n, in) bytes):
//   fragments: (padded rows / 8, in / 32, 256) bytes. Sub-block s of row r is the 32 bytes at
//              tile (r / 8, s), offset 32 (r % 8), element e at byte e: the mma's k order puts
//              elements 8t..8t+7 in lane 4 (r % 8) + t's 8-byte B fragment.
//   sums:      (padded rows / 8, in / 32, 8) Int8XSums, a column tile's rows side by side.
// Rows n..padded - 1 are read by the GEMV and never reach an output (a column's dot products use
// only that column).
struct Int8XScratch {
  uint8_t* fragments;
  Int8XSums* sums;
  int sub_blocks;  // in / 32

  __host__ __device__ Int8XScratch(void* scratch, int n, int in)
      : fragments(static_cast<uint8_t*>(scratch)),
        sums(reinterpret_cast<Int8XSums*>(static_cast<uint8_t*>(scratch) +
                                          gemv_quant_mma_fragment_bytes(n, in))),
        sub_blocks(in / 32) {}
  __device__ __forceinline__ int64_t tile(int row, int sub) const {
    return int64_t(row / kInt8XColumns) * sub_blocks + sub;
  }
  __device__ __forceinline__ uint8_t* sub_block(int row, int sub) const {
    return fragments + tile(row, sub) * 256 + (row % kInt8XColumns) * 32;
  }
  __device__ __forceinline__ Int8XSums* sum(int row, int sub) const {
    return sums + tile(row, sub) * kInt8XColumns + row % kInt8XColumns;
  }
};

// K sub-blocks of row `row`, each held one element a lane by the whole warp: v[k] this lane's
// element of sub-block sub[k] (as rounded to the activation dtype), stored where valid[k] (the
// same for the whole warp; v[k] = 0 elsewhere). Every lane of the warp must call it.
template <int K>
__device__ __forceinline__ void store_int8_x_warp(const Int8XScratch& x, int row,
                                                  const int (&sub)[K], const float (&v)[K],
                                                  const bool (&valid)[K]) {
  int q[K], sum[K];
  float d[K];
  quantize_warp<K>(v, q, d, sum);
  const int lane = int(threadIdx.x) % 32;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (!valid[k]) continue;
    x.sub_block(row, sub[k])[lane] = uint8_t(q[k]);  // the warp's 32 bytes: one contiguous store
    if (lane == 0) *x.sum(row, sub[k]) = Int8XSums{d[k], __fmul_rn(d[k], float(sum[k]))};
  }
}

}  // namespace rose
