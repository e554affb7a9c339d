// Quantized small-batch GEMV (gemv_quant.cuh). kSplit warps per output feature; the lanes of a
// warp cover consecutive blocks of the feature's row, B::kLanes lanes per block, so one warp-wide
// load reads one contiguous run of the row. Each block type is a small struct whose dot() decodes
// one lane's slice of a block in registers and adds its dot products with the x rows to the lane's
// fp32 accumulators.
//
// Every fp32 operation is an explicit __fmaf_rn / __fmul_rn / __fadd_rn written in a fixed order:
// a row's rounding sequence is pinned by this source (not by the compiler's contraction choices),
// and nothing in it depends on n, which only decides which rows are computed (batch invariance).
// Per lane: for each of its blocks in row order, a partial dot of its slice (an fma chain from 0),
// folded into the accumulator with the slice's scale; then a fixed xor-shuffle tree over the warp,
// then the kSplit warps' sums added in warp order.
#include <algorithm>

#include "kernels/common/ggml_type.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemv_quant.cuh"
#include "kernels/cuda/ggml_block.cuh"
#include "kernels/cuda/launch.cuh"

namespace rose {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxRows = kGemvQuantMaxRows;

// The float of a small unsigned integer v (< 2^22) minus kBias, exactly: the bits 0x4B000000 | v
// are the float 2^23 + v, and subtracting 2^23 + kBias is exact. Two ALU ops instead of an I2F.
template <int kBias>
__device__ __forceinline__ float uint_minus(uint32_t v) {
  return __fsub_rn(__uint_as_float(0x4B000000u | v), 8388608.0f + float(kBias));
}

// s + w[0] x[0] + ... + w[N-1] x[N-1], one fma at a time in index order.
template <int N>
__device__ __forceinline__ float fma_chain(const float* w, const float* x, float s) {
#pragma unroll
  for (int k = 0; k < N; ++k) s = __fmaf_rn(w[k], x[k], s);
  return s;
}

// s + x[0] + ... + x[N-1] in index order.
template <int N>
__device__ __forceinline__ float sum_chain(const float* x, float s) {
#pragma unroll
  for (int k = 0; k < N; ++k) s = __fadd_rn(s, x[k]);
  return s;
}

// Byte k (0..3) of a little-endian word.
__device__ __forceinline__ uint32_t byte_of(uint32_t word, int k) {
  return (word >> (8 * k)) & 0xFFu;
}

// Every dot() below has the same contract:
//   block: the block's first byte;  slice: 0..kLanes-1, the lane's part of the block
//   x:     row 0's element at the block's first column; row r starts at x + r * in
//   acc:   (kMaxRows,) the lane's accumulators; rows r < n are updated, the others untouched

// Q8_0: d, int8 qs[32]. Four lanes per block, 8 quants each: elements 8s..8s+7.
struct BlockQ8_0 {
  static constexpr int kElems = 32, kBytes = 34, kLanes = 4;
  template <typename T>
  __device__ static void dot(const uint8_t* block, int slice, const T* x, int in, int n,
                             float (&acc)[kMaxRows]) {
    const float d = half_at_aligned(block);
    const uint8_t* qs = block + 2 + 8 * slice;
    const uint32_t word[2] = {u32_at_even(qs), u32_at_even(qs + 4)};
    float w[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) w[k] = uint_minus<128>(byte_of(word[k / 4], k % 4) ^ 0x80u);
#pragma unroll
    for (int row = 0; row < kMaxRows; ++row) {
      if (row < n) {
        float xv[8];
        load_as_float<T, 8>(x + int64_t(row) * in + 8 * slice, xv);
        acc[row] = __fmaf_rn(d, fma_chain<8>(w, xv, 0.0f), acc[row]);
      }
    }
  }
};

// Q4_0 / Q4_1: d, [m], qs[16]; byte j holds element j (low nibble) and j + 16 (high nibble).
// Four lanes per block, 4 bytes each: elements 4s..4s+3 and 4s+16..4s+19. Q4_0's value is
// d (q - 8); Q4_1's is d q + m, accumulated as d sum(q x) + m sum(x).
template <bool kHasMin>
struct BlockQ4 {
  static constexpr int kElems = 32, kBytes = kHasMin ? 20 : 18, kLanes = 4;
  template <typename T>
  __device__ static void dot(const uint8_t* block, int slice, const T* x, int in, int n,
                             float (&acc)[kMaxRows]) {
    const float d = half_at_aligned(block);
    const float m = kHasMin ? half_at_aligned(block + 2) : 0.0f;
    // Q4_1 blocks are 20 bytes, so its quants are 4-byte aligned; Q4_0's are only 2-byte aligned.
    const uint8_t* qs = block + (kHasMin ? 4 : 2) + 4 * slice;
    const uint32_t word = kHasMin ? *reinterpret_cast<const uint32_t*>(qs) : u32_at_even(qs);
    float low[4], high[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      low[k] = uint_minus < kHasMin ? 0 : 8 > (byte_of(word, k) & 0x0Fu);
      high[k] = uint_minus < kHasMin ? 0 : 8 > (byte_of(word, k) >> 4);
    }
#pragma unroll
    for (int row = 0; row < kMaxRows; ++row) {
      if (row < n) {
        float xl[4], xh[4];
        load_as_float<T, 4>(x + int64_t(row) * in + 4 * slice, xl);
        load_as_float<T, 4>(x + int64_t(row) * in + 16 + 4 * slice, xh);
        const float qx = fma_chain<4>(high, xh, fma_chain<4>(low, xl, 0.0f));
        acc[row] = __fmaf_rn(d, qx, acc[row]);
        if constexpr (kHasMin)
          acc[row] = __fmaf_rn(m, sum_chain<4>(xh, sum_chain<4>(xl, 0.0f)), acc[row]);
      }
    }
  }
};

// Q4_K: d, dmin, scales[12] (eight 6-bit scale/min pairs), qs[128] as four 32-byte chunks; in chunk
// c the low nibbles are sub-block 2c and the high nibbles sub-block 2c + 1 (32 elements each).
// Eight lanes per block, 16 bytes (one aligned 16-byte load) each: lane s takes half s % 2 of chunk
// s / 2, i.e. elements 64c + 16h + j (low) and 64c + 32 + 16h + j (high), j < 16. The value is
// dl q - ml with dl = d sc, ml = dmin m, accumulated as dl sum(q x) - ml sum(x) per sub-block.
struct BlockQ4_K {
  static constexpr int kElems = 256, kBytes = 144, kLanes = 8;
  template <typename T>
  __device__ static void dot(const uint8_t* block, int slice, const T* x, int in, int n,
                             float (&acc)[kMaxRows]) {
    const int chunk = slice / 2, half = slice % 2;
    const float d = half_at_aligned(block), dmin = half_at_aligned(block + 2);
    float dl[2], ml[2];  // [0]: sub-block 2c (low nibbles), [1]: 2c + 1 (high nibbles)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int scale, min;
      k4_scale_min(2 * chunk + i, block + 4, &scale, &min);
      dl[i] = __fmul_rn(d, float(scale));
      ml[i] = __fmul_rn(dmin, float(min));
    }
    const uint4 packed = *reinterpret_cast<const uint4*>(block + 16 + 32 * chunk + 16 * half);
    const uint32_t word[4] = {packed.x, packed.y, packed.z, packed.w};
    float q[2][16];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint32_t byte = byte_of(word[j / 4], j % 4);
      q[0][j] = uint_minus<0>(byte & 0x0Fu);
      q[1][j] = uint_minus<0>(byte >> 4);
    }
#pragma unroll
    for (int row = 0; row < kMaxRows; ++row) {
      if (row < n) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const T* xs = x + int64_t(row) * in + 64 * chunk + 32 * i + 16 * half;
          float xa[8], xb[8];
          load_as_float<T, 8>(xs, xa);
          load_as_float<T, 8>(xs + 8, xb);
          const float qx = fma_chain<8>(q[i] + 8, xb, fma_chain<8>(q[i], xa, 0.0f));
          const float sx = sum_chain<8>(xb, sum_chain<8>(xa, 0.0f));
          acc[row] = __fmaf_rn(dl[i], qx, acc[row]);
          acc[row] = __fmaf_rn(-ml[i], sx, acc[row]);
        }
      }
    }
  }
};

// Q6_K: ql[128], qh[64], int8 scales[16], d; two halves of 128 elements. In half h, for l < 32:
// element 32 p + l (p = 0..3) takes the low (p < 2) or high nibble of ql[64h + l + 32 (p & 1)],
// bits 2p, 2p+1 of qh[32h + l] as bits 4-5, minus 32, times d scales[8h + l/16 + 2p]. Eight lanes
// per block: lane s takes half s / 4 and l in 8 (s % 4) .. +7, i.e. 8 elements of each p. The
// blocks are 210 bytes, so every field is read with 2-byte loads.
struct BlockQ6_K {
  static constexpr int kElems = 256, kBytes = 210, kLanes = 8;
  template <typename T>
  __device__ static void dot(const uint8_t* block, int slice, const T* x, int in, int n,
                             float (&acc)[kMaxRows]) {
    const int half = slice / 4, l0 = 8 * (slice % 4);
    const uint8_t* ql = block + 64 * half + l0;
    const uint8_t* qh = block + 128 + 32 * half + l0;
    const int8_t* sc = reinterpret_cast<const int8_t*>(block + 192 + 8 * half + l0 / 16);
    const float d = half_at_aligned(block + 208);
    const uint32_t a[2] = {u32_at_even(ql), u32_at_even(ql + 4)};        // ql[l], p = 0, 2
    const uint32_t b[2] = {u32_at_even(ql + 32), u32_at_even(ql + 36)};  // ql[l + 32], p = 1, 3
    const uint32_t h[2] = {u32_at_even(qh), u32_at_even(qh + 4)};        // qh[l]
    float q[4][8];
    float scale[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) scale[p] = __fmul_rn(d, float(sc[2 * p]));
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t qa = byte_of(a[k / 4], k % 4), qb = byte_of(b[k / 4], k % 4);
      const uint32_t qhi = byte_of(h[k / 4], k % 4);
      q[0][k] = uint_minus<32>((qa & 0x0Fu) | (qhi & 3u) << 4);
      q[1][k] = uint_minus<32>((qb & 0x0Fu) | ((qhi >> 2) & 3u) << 4);
      q[2][k] = uint_minus<32>((qa >> 4) | ((qhi >> 4) & 3u) << 4);
      q[3][k] = uint_minus<32>((qb >> 4) | (qhi >> 6) << 4);
    }
#pragma unroll
    for (int row = 0; row < kMaxRows; ++row) {
      if (row < n) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          float xv[8];
          load_as_float<T, 8>(x + int64_t(row) * in + 128 * half + 32 * p + l0, xv);
          acc[row] = __fmaf_rn(scale[p], fma_chain<8>(q[p], xv, 0.0f), acc[row]);
        }
      }
    }
  }
};

enum class Epilogue { kStore, kStoreF32, kSiluMul };

// kSplit warps per output feature o (kWarps / kSplit features per thread block). Warp `part` of a
// feature takes the row's block groups part, part + kSplit, ..., a group being the 32 / kLanes
// consecutive blocks one warp-wide step covers. kWeightRows weight rows per feature (2 for
// gate | up, rows o and o + out).
template <typename B, typename T, Epilogue E, int kSplit>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_quant_kernel(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride) {
  pdl_wait();
  pdl_launch_dependents();
  constexpr int kWeightRows = E == Epilogue::kSiluMul ? 2 : 1;
  constexpr int kFeaturesPerBlock = kWarps / kSplit;
  constexpr int kBlocksPerStep = 32 / B::kLanes;
  __shared__ float partial[kWarps][kWeightRows][kMaxRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int local = warp / kSplit, part = warp % kSplit;
  const int o = blockIdx.x * kFeaturesPerBlock + local;
  const bool active = o < out;  // no early return: the block meets at a barrier below
  const int blocks_per_row = in / B::kElems;
  const int64_t row_bytes = int64_t(blocks_per_row) * B::kBytes;
  const int slice = lane % B::kLanes;
  float acc[kWeightRows][kMaxRows] = {};
#pragma unroll 2
  for (int first = part * kBlocksPerStep; active && first < blocks_per_row;
       first += kBlocksPerStep * kSplit) {
    const int blk = first + lane / B::kLanes;
    if (blk < blocks_per_row) {
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        const uint8_t* block =
            w + (int64_t(o) + int64_t(r) * out) * row_bytes + int64_t(blk) * B::kBytes;
        B::dot(block, slice, x + int64_t(blk) * B::kElems, in, n, acc[r]);
      }
    }
  }
#pragma unroll
  for (int row = 0; row < kMaxRows; ++row) {
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) acc[r][row] = warp_sum(acc[r][row]);
  }
  if constexpr (kSplit > 1) {
    if (lane == 0) {
#pragma unroll
      for (int row = 0; row < kMaxRows; ++row) {
#pragma unroll
        for (int r = 0; r < kWeightRows; ++r) partial[warp][r][row] = acc[r][row];
      }
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int row = 0; row < kMaxRows; ++row) {
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < kSplit; ++s) total = __fadd_rn(total, partial[warp + s][r][row]);
        acc[r][row] = total;
      }
    }
  }
  if (!active || lane != 0) return;
#pragma unroll
  for (int row = 0; row < kMaxRows; ++row) {
    if (row < n) {
      const int64_t at = int64_t(row) * y_stride + o;
      if constexpr (E == Epilogue::kStoreF32) {
        static_cast<float*>(y)[at] = acc[0][row];
      } else if constexpr (E == Epilogue::kStore) {
        static_cast<T*>(y)[at] = from_float<T>(acc[0][row]);
      } else {
        const float g = acc[0][row];
        static_cast<T*>(y)[at] = from_float<T>(g / (1.0f + expf(-g)) * acc[1][row]);
      }
    }
  }
}

// Warps per feature (1, 2 or 4), from the shape only (never from n: batch invariance). Enough
// warps in flight to stream the weights (out * split up to 16k warps, ~120 per SM) while each warp
// keeps at least one block group of its row.
template <typename B>
int split_for(int in, int out) {
  const int groups = (in / B::kElems + 32 / B::kLanes - 1) / (32 / B::kLanes);
  int split = 1;
  while (split < 4 && out * split * 2 <= 16384 && groups >= split * 2) split *= 2;
  return split;
}

template <typename B, typename T, Epilogue E>
void launch_typed(const void* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                  cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  const int split = split_for<B>(in, out);
  const int per_block = kWarps / split;
  const int blocks = (out + per_block - 1) / per_block;
  if (split == 4) {
    launch_kernel(gemv_quant_kernel<B, T, E, 4>, blocks, kWarps * 32, 0, stream, xt, w, y, n, in,
                  out, y_stride);
  } else if (split == 2) {
    launch_kernel(gemv_quant_kernel<B, T, E, 2>, blocks, kWarps * 32, 0, stream, xt, w, y, n, in,
                  out, y_stride);
  } else {
    launch_kernel(gemv_quant_kernel<B, T, E, 1>, blocks, kWarps * 32, 0, stream, xt, w, y, n, in,
                  out, y_stride);
  }
}

template <typename B, Epilogue E>
void launch_dtype(const void* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                  DType dtype, cudaStream_t stream) {
  if (dtype == DType::kBF16) {
    launch_typed<B, __nv_bfloat16, E>(x, w, y, n, in, out, y_stride, stream);
  } else {
    launch_typed<B, __half, E>(x, w, y, n, in, out, y_stride, stream);
  }
}

// The weight alignment each type's loads need (gemv_quant.cuh).
int weight_alignment(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ4_K:
      return 16;
    case GgmlType::kQ4_1:
      return 4;
    default:
      return 2;
  }
}

template <Epilogue E>
void launch_checked(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n, int in,
                    int out, int y_stride, DType dtype, cudaStream_t stream, const char* what) {
  if (!gemv_quant_supported(ggml_type, n, in) || out < 1 || y_stride < out) {
    cuda_fail("unsupported type or shape (n > 4, or in not a multiple of the block size)", what,
              __FILE__, __LINE__);
  }
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(w) % weight_alignment(ggml_type) != 0) {
    cuda_fail("misaligned x or weight pointer", what, __FILE__, __LINE__);
  }
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0:
      return launch_dtype<BlockQ8_0, E>(x, w, y, n, in, out, y_stride, dtype, stream);
    case GgmlType::kQ4_0:
      return launch_dtype<BlockQ4<false>, E>(x, w, y, n, in, out, y_stride, dtype, stream);
    case GgmlType::kQ4_1:
      return launch_dtype<BlockQ4<true>, E>(x, w, y, n, in, out, y_stride, dtype, stream);
    case GgmlType::kQ4_K:
      return launch_dtype<BlockQ4_K, E>(x, w, y, n, in, out, y_stride, dtype, stream);
    default:
      return launch_dtype<BlockQ6_K, E>(x, w, y, n, in, out, y_stride, dtype, stream);
  }
}

}  // namespace

bool gemv_quant_type_supported(uint32_t ggml_type) { return gemv_quant_block_elems(ggml_type) > 0; }

int gemv_quant_block_elems(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return 32;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return 256;
    default:
      return 0;
  }
}

bool gemv_quant_supported(uint32_t ggml_type, int n, int in) {
  const int elems = gemv_quant_block_elems(ggml_type);
  return elems > 0 && n >= 1 && n <= kGemvQuantMaxRows && in > 0 && in % elems == 0;
}

int64_t gemv_quant_row_bytes(uint32_t ggml_type, int in) {
  int bytes = 0;
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0:
      bytes = BlockQ8_0::kBytes;
      break;
    case GgmlType::kQ4_0:
      bytes = BlockQ4<false>::kBytes;
      break;
    case GgmlType::kQ4_1:
      bytes = BlockQ4<true>::kBytes;
      break;
    case GgmlType::kQ4_K:
      bytes = BlockQ4_K::kBytes;
      break;
    case GgmlType::kQ6_K:
      bytes = BlockQ6_K::kBytes;
      break;
    default:
      return 0;
  }
  return int64_t(in / gemv_quant_block_elems(ggml_type)) * bytes;
}

void launch_gemv_quant(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n, int in,
                       int out, bool f32_out, DType dtype, cudaStream_t stream, int y_stride) {
  if (y_stride == 0) y_stride = out;
  if (f32_out) {
    launch_checked<Epilogue::kStoreF32>(x, w, ggml_type, y, n, in, out, y_stride, dtype, stream,
                                        "launch_gemv_quant");
  } else {
    launch_checked<Epilogue::kStore>(x, w, ggml_type, y, n, in, out, y_stride, dtype, stream,
                                     "launch_gemv_quant");
  }
}

void launch_gemv_quant_silu_mul(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n,
                                int in, int out, DType dtype, cudaStream_t stream) {
  launch_checked<Epilogue::kSiluMul>(x, w, ggml_type, y, n, in, out, out, dtype, stream,
                                     "launch_gemv_quant_silu_mul");
}

}  // namespace rose
