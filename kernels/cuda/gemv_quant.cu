// Quantized small-batch GEMV (gemv_quant.cuh), llama.cpp's mmvq approach written for this engine.
//
// Layout of one launch: a grid of about (#SMs x resident blocks per SM) thread blocks of kWarps
// warps. Each thread block first quantizes the n rows of x to int8 per 32-element block into
// shared memory (once per thread block, not once per feature); then each warp computes whole
// output features, gw, gw + total_warps, ... (gw its index in the grid). One feature's row (two
// rows, gate and up, for the gated epilogue) is cut into pieces of B::kBlocksPerPiece blocks; a
// piece is copied from global memory into one of the warp's kStages shared staging buffers with
// 16-byte cp.async (the 16-byte aligned span covering the piece, so every type streams at full
// width whatever its block size), kStages - 1 pieces ahead of the one being computed: ~3-5 KB in
// flight per warp, tens of KB per SM. Lane L then decodes unit L of the piece (a 32- or 64-element
// slice of a block) and takes its int8 dot products with x's rows by __dp4a, applying the weight
// scale and the activation block's d in fp32 once per 32 (Q6_K: 16) elements.
//
// Every type takes a second, direct kernel instead (further down; Q6_K at one row only): each lane
// loads its units straight into registers, with no staging and no per-piece bookkeeping, in the
// same lane order and with the same operations, so a row's bits are the same on both kernels. The
// staged kernel stays for comparisons (ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0) and as the reference
// the direct kernel is tested against.
//
// Numerics (batch invariance): integer dot products are exact; every fp32 operation is an explicit
// __fmaf_rn / __fmul_rn / __fadd_rn in a fixed order. A lane folds its units' terms into its
// accumulator piece by piece, then a fixed xor-shuffle tree sums the warp. Which warp computes a
// feature, the grid size and n change nothing in that sequence, so row r of y is bit-identical
// whatever rows are decoded beside it.
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "kernels/common/error.h"
#include "kernels/common/ggml_type.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemv_quant.cuh"
#include "kernels/cuda/ggml_block.cuh"
#include "kernels/cuda/l2_hint.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm_row.cuh"
#include "kernels/cuda/quantize_int8.cuh"
#include "kernels/cuda/tile_ptx.cuh"
#include "kernels/cuda/trace_probe.cuh"

namespace rose {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
// Shared memory for the quantized x of one launch (x_row_bytes per row): 160 KiB keeps 8
// rows of in = 16384 (llama-8b's down has in = 14336) beside the largest staging area (Q6_K, 54
// KiB) under the H100's 227 KiB per block. More rows than fit run as several launches.
constexpr int64_t kXSmemBudget = 160 * 1024;

// One 32-element block of a quantized x row: x ~ d q, q int8 in [-127, 127]; sum = sum of q.
struct alignas(8) XBlock {  // one 8-byte shared load
  float d;
  int sum;
};

// Bytes between rows of quantized x in shared memory: whole 128-byte groups, which the swizzle
// below permutes within.
constexpr int x_stride(int in) { return (in + 127) / 128 * 128; }

// Shared memory per quantized x row: its int8 values and its XBlocks.
constexpr int64_t x_row_bytes(int in) {
  return int64_t(x_stride(in)) + int64_t(in / 32) * int64_t(sizeof(XBlock));
}

// The quantized x rows in shared memory as a unit reads them. A row's 16-byte chunk j is stored at
// chunk j ^ ((j / 8) * kSwizzle % 8) of the row (a permutation within each 128-byte group), so
// that the 8 lanes of one shared-memory phase, each reading its own contiguous slice of the row,
// hit 8 different 16-byte bank groups (4-way conflicts without it): kSwizzle = 1 suits lanes
// reading 32 or 64 contiguous bytes, 2 suits Q6_K's 16-byte pieces 32 bytes apart.
struct XView {
  const int8_t* q;       // (n, stride) row 0's int8 values
  const XBlock* blocks;  // (n, block_stride) row 0's XBlock of the unit block's first 32 columns
  int stride;            // bytes from one row of q to the next (x_stride(in))
  int block_stride;      // in / 32
  int chunk;             // the unit block's first column / 16
};

template <int kSwizzle>
__device__ __forceinline__ int swizzled_chunk(int j) {
  return j ^ ((j >> 3) * kSwizzle & 7);
}

// K words (K a multiple of 4) of row `row` of x: logical chunks j .. j + K/4 - 1. kGroupAligned:
// the caller's j is a multiple of K/4 (K/4 <= 4), so the chunks lie in one 8-chunk group (j % 8 +
// K/4 - 1 < 8), share j's swizzle s, and chunk j + k sits at (j ^ s) ^ k: one XOR each instead of
// recomputing the swizzle (the direct Q4_K kernel's units).
template <int kSwizzle, int K, bool kGroupAligned = false>
__device__ __forceinline__ void x_words(const XView& x, int row, int j, uint32_t (&out)[K]) {
  static_assert(K % 4 == 0, "whole 16-byte chunks");
  static_assert(!kGroupAligned || K / 4 <= 4, "one 8-chunk group");
  const int8_t* q = x.q + row * x.stride;
  const int base = swizzled_chunk<kSwizzle>(j);
#pragma unroll
  for (int k = 0; k < K / 4; ++k) {
    const int chunk = kGroupAligned ? base ^ k : swizzled_chunk<kSwizzle>(j + k);
    const uint4 v = *reinterpret_cast<const uint4*>(q + 16 * chunk);
    out[4 * k] = v.x;
    out[4 * k + 1] = v.y;
    out[4 * k + 2] = v.z;
    out[4 * k + 3] = v.w;
  }
}

constexpr int align16(int bytes) { return (bytes + 15) / 16 * 16; }

// ---- cp.async (cp_async16, cp_async_commit, cp_async_wait): tile_ptx.cuh ----

// ---- shared-memory readers ----

// K little-endian words starting at any byte address p in shared memory: K + 1 aligned loads and
// a funnel shift each (the staged blocks of 34-, 18- and 210-byte types are only 2-byte aligned).
// Reads up to 3 bytes past p + 4K (the staging buffers keep 16 bytes of slack).
template <int K>
__device__ __forceinline__ void unaligned_words(const uint8_t* p, uint32_t (&out)[K]) {
  // Pointer arithmetic on p (not an integer round trip) keeps it known as shared memory, so the
  // loads compile to ld.shared rather than generic loads.
  const int misalign = int(reinterpret_cast<uintptr_t>(p) & 3);
  const uint32_t* word = reinterpret_cast<const uint32_t*>(p - misalign);
  const uint32_t shift = 8u * uint32_t(misalign);
  uint32_t previous = word[0];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const uint32_t next = word[k + 1];
    out[k] = __funnelshift_r(previous, next, shift);
    previous = next;
  }
}

// K words (K a multiple of 4) at a 16-byte aligned shared address, as K / 4 16-byte loads.
template <int K>
__device__ __forceinline__ void aligned_words(const void* p, uint32_t (&out)[K]) {
  static_assert(K % 4 == 0, "whole 16-byte vectors");
  const uint4* vec = static_cast<const uint4*>(p);
#pragma unroll
  for (int k = 0; k < K / 4; ++k) {
    const uint4 v = vec[k];
    out[4 * k] = v.x;
    out[4 * k + 1] = v.y;
    out[4 * k + 2] = v.z;
    out[4 * k + 3] = v.w;
  }
}

// sum over k of the int8 products of a[k] and b[k] (4 per word), plus c: exact.
template <int K>
__device__ __forceinline__ int dot_words(const uint32_t* a, const uint32_t* b, int c) {
#pragma unroll
  for (int k = 0; k < K; ++k) c = __dp4a(int(a[k]), int(b[k]), c);
  return c;
}

constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// ---- the block types ----
// Each type describes its blocks (kElems elements in kBytes bytes), how a piece is cut (kUnits
// units per block, kBlocksPerPiece blocks: 32 units, one per lane), how the direct kernel's
// one-row norm path quantizes x (kOneRowNormSixteens: sixteen elements a thread, else eight; see
// norm_quantize_one_row) and computes one unit:
//   unit<kRows>(block, u, x, n, acc)
//     block: the staged block's first byte (shared memory; alignment as the type states)
//     u:     0..kUnits-1, the unit within the block
//     x:     the quantized x rows, positioned at the block's first column (XView)
//     acc:   (kRows,) the lane's accumulators; rows r < n gain this unit's terms, in a fixed order

// Q8_0: d, int8 qs[32]; value d q. One unit per block (34 bytes: only 2-byte aligned).
struct BlockQ8_0 {
  static constexpr int kElems = 32, kBytes = 34, kUnits = 1, kBlocksPerPiece = 32, kStages = 4,
                       kSwizzle = 1;
  // Sixteen a thread: llama-1b's batch-1 step 0.644 -> 0.633 ms but llama-8b's 2.610 -> 2.633
  // (results/2026-12-01-norm-by-type): not taken.
  static constexpr bool kOneRowNormSixteens = false;
  template <int kRows>
  __device__ static void unit(const uint8_t* block, int, const XView& xv, int n,
                              float (&acc)[kRows]) {
    const float d = half_at_aligned(block);
    uint32_t q[8];
    unaligned_words<8>(block + 2, q);
    terms<kRows>(d, q, xv, n, acc);
  }
  // A unit's terms from its scale d and its 32 quants q (8 words), wherever they were loaded
  // from: the staged and the direct kernel both call this, so they apply the same operations.
  template <int kRows>
  __device__ __forceinline__ static void terms(float d, const uint32_t (&q)[8], const XView& xv,
                                               int n, float (&acc)[kRows]) {
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      if (row < n) {
        uint32_t x[8];
        x_words<kSwizzle>(xv, row, xv.chunk, x);
        const XBlock a = xv.blocks[row * xv.block_stride];
        acc[row] = __fmaf_rn(__fmul_rn(d, a.d), float(dot_words<8>(q, x, 0)), acc[row]);
      }
    }
  }
};

// Q4_0 / Q4_1: d, [m], qs[16]; byte j holds element j (low nibble) and j + 16 (high nibble).
// Q4_0's value is d (q - 8): d dx (sum q qx - 8 sum qx). Q4_1's is d q + m: d dx sum q qx +
// m dx sum qx. One unit per block; Q4_1's 20-byte blocks keep its quants 4-byte aligned.
template <bool kHasMin>
struct BlockQ4 {
  static constexpr int kElems = 32, kBytes = kHasMin ? 20 : 18, kUnits = 1, kBlocksPerPiece = 32,
                       kStages = 6, kSwizzle = 1;
  // Sixteen a thread: Q4_0's batch-1 step on llama-1b 0.560 -> 0.533 ms, on llama-8b 2.202 ->
  // 2.084, gpt2 unchanged (results/2026-12-01-norm-by-type); the real SmolLM2's Q4_1 0.396 ->
  // 0.397-0.404 (hidden 576; results/2026-12-01-smollm2): Q4_0 only.
  static constexpr bool kOneRowNormSixteens = !kHasMin;
  template <int kRows>
  __device__ static void unit(const uint8_t* block, int, const XView& xv, int n,
                              float (&acc)[kRows]) {
    const float d = half_at_aligned(block);
    const float m = kHasMin ? half_at_aligned(block + 2) : 0.0f;
    uint32_t packed[4];
    if constexpr (kHasMin) {
      const uint32_t* words = reinterpret_cast<const uint32_t*>(block + 4);
#pragma unroll
      for (int k = 0; k < 4; ++k) packed[k] = words[k];
    } else {
      unaligned_words<4>(block + 2, packed);
    }
    terms<kRows>(d, m, packed, xv, n, acc);
  }
  // A unit's terms from d, m (Q4_1; unused for Q4_0) and its 16 bytes of packed nibbles, wherever
  // they were loaded from: the staged and the direct kernel both call this.
  template <int kRows>
  __device__ __forceinline__ static void terms(float d, float m, const uint32_t (&packed)[4],
                                               const XView& xv, int n, float (&acc)[kRows]) {
    uint32_t q[8];  // elements 0..15 (low nibbles), then 16..31 (high nibbles)
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      q[k] = packed[k] & kLowNibbles;
      q[k + 4] = (packed[k] >> 4) & kLowNibbles;
    }
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      if (row < n) {
        uint32_t x[8];
        x_words<kSwizzle>(xv, row, xv.chunk, x);
        const XBlock a = xv.blocks[row * xv.block_stride];
        const int dot = dot_words<8>(q, x, 0);
        if constexpr (kHasMin) {
          acc[row] = __fmaf_rn(__fmul_rn(d, a.d), float(dot), acc[row]);
          acc[row] = __fmaf_rn(__fmul_rn(m, a.d), float(a.sum), acc[row]);
        } else {
          acc[row] = __fmaf_rn(__fmul_rn(d, a.d), float(dot - 8 * a.sum), acc[row]);
        }
      }
    }
  }
};

// Q4_K: d, dmin, scales[12] (eight 6-bit scale/min pairs), qs[128] as four 32-byte chunks; in chunk
// c the low nibbles are sub-block 2c (elements 64c + j) and the high nibbles sub-block 2c + 1
// (64c + 32 + j). Unit c = chunk c (64 elements). The value is d sc q - dmin m, so a sub-block adds
// d dx (sc sum q qx) - dmin dx (m sum qx). Blocks are 144 bytes and rows start 16-byte aligned, so
// the staged blocks are 16-byte aligned.
struct BlockQ4_K {
  static constexpr int kElems = 256, kBytes = 144, kUnits = 4, kBlocksPerPiece = 8, kStages = 4,
                       kSwizzle = 1;
  // Sixteen a thread made llama-8b's qkv preparation 2.0 -> 2.5 us
  // (results/2026-11-30-x-sixteens-trace).
  static constexpr bool kOneRowNormSixteens = false;
  template <int kRows>
  __device__ static void unit(const uint8_t* block, int c, const XView& xv, int n,
                              float (&acc)[kRows]) {
    const float d = half_at_aligned(block), dmin = half_at_aligned(block + 2);
    int scale[2], min[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) k4_scale_min(2 * c + i, block + 4, &scale[i], &min[i]);
    uint32_t packed[8];
    aligned_words<8>(block + 16 + 32 * c, packed);
    uint32_t q[16];  // sub-block 2c (low nibbles), then 2c + 1 (high nibbles)
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      q[k] = packed[k] & kLowNibbles;
      q[k + 8] = (packed[k] >> 4) & kLowNibbles;
    }
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      if (row < n) {
        uint32_t x[16];
        x_words<kSwizzle>(xv, row, xv.chunk + 4 * c, x);
        const XBlock* a = xv.blocks + row * xv.block_stride + 2 * c;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const XBlock ai = a[i];
          const int dot = dot_words<8>(q + 8 * i, x + 8 * i, 0);
          // scale * dot < 2^22 and min * sum < 2^18: exact in fp32.
          acc[row] = __fmaf_rn(__fmul_rn(d, ai.d), float(scale[i] * dot), acc[row]);
          acc[row] = __fmaf_rn(-__fmul_rn(dmin, ai.d), float(min[i] * ai.sum), acc[row]);
        }
      }
    }
  }
};

// Q6_K: ql[128], qh[64], int8 scales[16], d; two halves of 128 elements. In half h, for l < 32:
// element 128h + 32p + l (p = 0..3) takes the low (p < 2) or high nibble of ql[64h + l + 32 (p &
// 1)], bits 2p, 2p+1 of qh[32h + l] as bits 4-5, minus 32, times d scales[8h + l/16 + 2p]. Unit u
// takes half h = u / 2 and l in 16g..16g+15 (g = u % 2) for all four p: 64 elements, 4 scales. The
// q - 32 are formed as int8 (per-byte subtract), so a 16-element group adds d dx (sc sum (q-32)
// qx).
struct BlockQ6_K {
  static constexpr int kElems = 256, kBytes = 210, kUnits = 4, kBlocksPerPiece = 8, kStages = 4,
                       kSwizzle = 2;
  static constexpr bool kOneRowNormSixteens = false;  // as Q4_K (not timed apart)
  template <int kRows>
  __device__ static void unit(const uint8_t* block, int u, const XView& xv, int n,
                              float (&acc)[kRows]) {
    const int h = u / 2, g = u % 2;
    uint32_t low[4], high[4], hbits[4];  // ql[l], ql[l + 32], qh[l] for l = 16g .. 16g + 15
    unaligned_words<4>(block + 64 * h + 16 * g, low);
    unaligned_words<4>(block + 64 * h + 32 + 16 * g, high);
    unaligned_words<4>(block + 128 + 32 * h + 16 * g, hbits);
    int scale[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) scale[p] = int(static_cast<int8_t>(block[192 + 8 * h + g + 2 * p]));
    terms<kRows>(half_at_aligned(block + 208), low, high, hbits, scale, h, g, xv, n, acc);
  }
  // Unit (h, g)'s terms from the block's d, its 16 bytes of ql[l], ql[l + 32] and qh[l] (l = 16g ..
  // 16g + 15, in 64-element half h) and its four scales, wherever they were loaded from: the staged
  // and the direct kernel both call this, so they apply the same operations.
  template <int kRows>
  __device__ __forceinline__ static void terms(float d, const uint32_t (&low)[4],
                                               const uint32_t (&high)[4],
                                               const uint32_t (&hbits)[4], const int (&scale)[4],
                                               int h, int g, const XView& xv, int n,
                                               float (&acc)[kRows]) {
    uint32_t q[4][4];  // [p][word]: the 16 elements 128h + 32p + 16g + j as int8 q - 32
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      q[0][k] = __vsub4((low[k] & kLowNibbles) | ((hbits[k] << 4) & 0x30303030u), 0x20202020u);
      q[1][k] = __vsub4((high[k] & kLowNibbles) | ((hbits[k] << 2) & 0x30303030u), 0x20202020u);
      q[2][k] = __vsub4(((low[k] >> 4) & kLowNibbles) | (hbits[k] & 0x30303030u), 0x20202020u);
      q[3][k] =
          __vsub4(((high[k] >> 4) & kLowNibbles) | ((hbits[k] >> 2) & 0x30303030u), 0x20202020u);
    }
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      if (row < n) {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          uint32_t x[4];
          x_words<kSwizzle>(xv, row, xv.chunk + 8 * h + 2 * p + g, x);
          const XBlock a = xv.blocks[row * xv.block_stride + 4 * h + p];
          // |scale * dot| <= 128 * 16 * 32 * 127 < 2^24: exact in fp32.
          acc[row] =
              __fmaf_rn(__fmul_rn(d, a.d), float(scale[p] * dot_words<4>(q[p], x, 0)), acc[row]);
        }
      }
    }
  }
};

template <typename B>
struct Staging {
  static_assert(B::kUnits * B::kBlocksPerPiece == 32, "one unit per lane");
  static constexpr int kPieceBytes = B::kBlocksPerPiece * B::kBytes;
  // The 16-byte aligned span covering a piece starts up to 15 bytes before it; 16 more bytes of
  // slack for unaligned_words' read past the end.
  static constexpr int kStageBytes = align16(kPieceBytes + 15) + 16;
  static constexpr int kBlockBytes = kWarps * B::kStages * kStageBytes;  // per thread block
};

// Each thread block's rows' RMSNorm inverse scales, when the kernel normalizes its own input:
// inv (kRows,) in shared memory, visible to the whole block on return.
template <int kRows>
__device__ __forceinline__ void norm_prologue(GemvFusion fusion, int n, int in, float* inv) {
  if (!fusion.norm_residual) return;  // uniform over the grid
  __shared__ float scratch[kRows * kNormWarps];
  rms_inverse_rows(fusion.norm_residual, n, in, fusion.norm_eps, scratch, inv);
}

// Stores one thread's quantized 8 elements at..at+7 of row `row` (col: their first column): the
// int8 values into xq's swizzled chunk, and, from the first of a 32-element block's four threads,
// the block's XBlock.
template <int kSwizzle>
__device__ __forceinline__ void store_quantized(const Int8Eight& q, int row, int col, int at,
                                                int in, int8_t* xq, XBlock* xb) {
  int8_t* dst = xq + row * x_stride(in) + 16 * swizzled_chunk<kSwizzle>(col / 16) + col % 16;
  *reinterpret_cast<uint2*>(dst) = make_uint2(q.words[0], q.words[1]);
  if (threadIdx.x % 4 == 0) xb[at / 32] = XBlock{q.d, q.sum};
}

// The same for one thread's 16 elements at..at+15 (two lanes a 32-element block; col % 16 == 0):
// one 16-byte store, and the block's XBlock from the even lane.
template <int kSwizzle>
__device__ __forceinline__ void store_quantized(const Int8Sixteen& q, int row, int col, int at,
                                                int in, int8_t* xq, XBlock* xb) {
  *reinterpret_cast<uint4*>(xq + row * x_stride(in) + 16 * swizzled_chunk<kSwizzle>(col / 16)) =
      q.word;
  if (threadIdx.x % 2 == 0) xb[at / 32] = XBlock{q.d, q.sum};
}

// Quantizes x (n, in) (rows back to back) into xq (n, x_stride(in)) int8, 16-byte chunks swizzled
// (XView), and xb (n, in / 32): per 32 elements amax = max |x|, s = min(127 / amax, FLT_MAX), q =
// rint(x s) (round half to even) clamped to [-127, 127], d = amax / 127 (all zero when amax = 0).
// Four threads per block, eight elements each (the staged kernel's; the direct kernel takes
// quantize_x_sixteens, the same bits); ends with a barrier, so every warp may read all of it.
//
// With a norm input (fusion.norm_residual) x is not read: each element is RMSNorm(residual) *
// weight rounded to T, launch_add_norm's bits (norm_row.cuh), from the rows' inverse scales inv
// (n,).
template <int kSwizzle, typename T, int kBlockThreads = kThreads>
__device__ void quantize_x(const T* x, int n, int in, int8_t* xq, XBlock* xb, GemvFusion fusion,
                           const float* inv) {
  // A round is kBlockThreads * 8 elements; each thread issues the loads of kBatch rounds before it
  // uses the first, so x of in = 14336 (llama-8b's down, 7 rounds of 256 threads) costs 2 trips to
  // L2 in a row, not 7.
  constexpr int kBatch = 4;
  constexpr int kRound = kBlockThreads * 8;
  const int count = n * in;
  for (int first = 0; first < count; first += kBatch * kRound) {  // uniform over the thread block
    uint4 raw[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int at = first + k * kRound + 8 * int(threadIdx.x);
      raw[k] = make_uint4(0, 0, 0, 0);
      if (at < count && fusion.norm_residual) {
        raw[k] = normalized_words<T>(fusion, at, in, inv);
      } else if (at < count) {
        raw[k] = *reinterpret_cast<const uint4*>(x + at);
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int at = first + k * kRound + 8 * int(threadIdx.x);
      if (first + k * kRound >= count) break;  // uniform over the thread block
      const bool valid = at < count;  // the same for the 4 threads of a block (count % 32 == 0)
      const Int8Eight q = quantize_eight<T>(raw[k]);  // zero bits (0.0) where not valid
      if (valid) {
        const int row = at / in;
        store_quantized<kSwizzle>(q, row, at - row * in, at, in, xq, xb);
      }
    }
  }
  __syncthreads();
}

// quantize_x's values and bits, two lanes a 32-element block instead of four (quantize_sixteen:
// half the shuffles, a quarter of the divisions, ~7 instructions an element against
// quantize_eight's ~13). Leaving the quantization out of llama-8b's down and o products saved
// 4.5% of the batch-1 Q4_K step (results/2026-11-30-x-prep), so the direct kernel's preparation
// was issue-bound there, not waiting on its loads (leaving those out saved nothing). Each thread
// issues the loads of kBatch rounds before it quantizes the first, as quantize_x does (the same
// 16 registers of x). Ends with a barrier.
template <int kSwizzle, typename T, int kBlockThreads>
__device__ void quantize_x_sixteens(const T* x, int n, int in, int8_t* xq, XBlock* xb,
                                    const GemvFusion& fusion, const float* inv) {
  constexpr int kBatch = 2;
  constexpr int kRound = kBlockThreads * 16;
  const int count = n * in;
  for (int first = 0; first < count; first += kBatch * kRound) {  // uniform over the thread block
    uint4 raw[kBatch][2];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int at = first + k * kRound + 16 * int(threadIdx.x);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        raw[k][h] = make_uint4(0, 0, 0, 0);
        if (at < count && fusion.norm_residual) {
          raw[k][h] = normalized_words<T>(fusion, at + 8 * h, in, inv);
        } else if (at < count) {
          raw[k][h] = *reinterpret_cast<const uint4*>(x + at + 8 * h);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int at = first + k * kRound + 16 * int(threadIdx.x);
      if (first + k * kRound >= count) break;  // uniform over the thread block
      // Uniform over the warp: a warp past the rows has nothing to store.
      if (first + k * kRound + 16 * 32 * (int(threadIdx.x) / 32) >= count) continue;
      const Int8Sixteen q = quantize_sixteen<T>(raw[k]);  // zero bits (0.0) where not valid
      if (at < count) {  // the same for both lanes of a block (count % 32 == 0)
        // One row needs no division (a runtime divisor: ~30 instructions, a third of the rest).
        const int row = n == 1 ? 0 : at / in;
        store_quantized<kSwizzle>(q, row, at - row * in, at, in, xq, xb);
      }
    }
  }
  __syncthreads();
}

// The most `in` norm_quantize_one_row takes at kBlockThreads threads: each thread holds its
// elements of kOneRowNormRounds rounds of kBlockThreads * 8 in registers at once (or, sixteen a
// thread, 16 elements of one round: the same bound).
constexpr int kOneRowNormRounds = 2;
template <int kBlockThreads>
constexpr int one_row_norm_max_in() {
  return kOneRowNormRounds * kBlockThreads * 8;
}

// The one-row norm path's inverse scale, once every thread has written its elements of the row to
// stage ((in,) fp32) and passed a barrier: the warps that play add_norm_kernel's reduction sum the
// squares in rms_inverse_rows' order, then every warp derives the inverse scale from their
// kNormWarps sums itself (the same shuffles, so the same bits, and no barrier to publish it).
__device__ __forceinline__ float one_row_norm_inverse(const GemvFusion& fusion, int in,
                                                      const float* stage) {
  __shared__ float partial[kNormWarps];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (warp < kNormWarps) {  // virtual thread v sums elements v, v + kNormThreads, ... in order
    float sum = 0.0f;
    for (int i = warp * 32 + lane; i < in; i += kNormThreads) {
      sum = norm_square_step(stage[i], 0.0f, sum);
    }
    sum = warp_sum(sum);
    if (lane == 0) partial[warp] = sum;
  }
  __syncthreads();
  return norm_inverse(warp_sum(lane < kNormWarps ? partial[lane] : 0.0f), in, fusion.norm_eps);
}

// norm_quantize_one_row eight elements a thread in each of kOneRowNormRounds rounds
// (quantize_eight), the residual held in registers through the reduction.
template <int kSwizzle, typename T, int kBlockThreads>
__device__ void norm_quantize_one_row_eights(const GemvFusion& fusion, int in, float* stage,
                                             int8_t* xq, XBlock* xb) {
  constexpr int kRound = kBlockThreads * 8;
  float4 lo[kOneRowNormRounds], hi[kOneRowNormRounds];
  uint4 weight[kOneRowNormRounds];
#pragma unroll
  for (int k = 0; k < kOneRowNormRounds; ++k) {
    const int at = k * kRound + 8 * int(threadIdx.x);
    if (at < in) {
      lo[k] = *reinterpret_cast<const float4*>(fusion.norm_residual + at);
      hi[k] = *reinterpret_cast<const float4*>(fusion.norm_residual + at + 4);
      weight[k] = *reinterpret_cast<const uint4*>(static_cast<const T*>(fusion.norm_weight) + at);
    }
  }
#pragma unroll
  for (int k = 0; k < kOneRowNormRounds; ++k) {
    const int at = k * kRound + 8 * int(threadIdx.x);
    if (at < in) {
      *reinterpret_cast<float4*>(stage + at) = lo[k];
      *reinterpret_cast<float4*>(stage + at + 4) = hi[k];
    }
  }
  __syncthreads();
  const float inv = one_row_norm_inverse(fusion, in, stage);
#pragma unroll
  for (int k = 0; k < kOneRowNormRounds; ++k) {
    if (k * kRound >= in) break;  // uniform over the thread block
    const int at = k * kRound + 8 * int(threadIdx.x);
    const bool valid = at < in;  // the same for the 4 threads of a block (in % 32 == 0)
    const uint4 normalized = normalized_eight<T>(lo[k], hi[k], weight[k], inv);
    const Int8Eight q = quantize_eight<T>(valid ? normalized : make_uint4(0, 0, 0, 0));
    if (valid) store_quantized<kSwizzle>(q, 0, at, at, in, xq, xb);
  }
  __syncthreads();
}

// norm_quantize_one_row sixteen elements a thread, two lanes a block (quantize_sixteen), the
// residual read back from the stage after the reduction rather than held in registers.
template <int kSwizzle, typename T, int kBlockThreads>
__device__ void norm_quantize_one_row_sixteens(const GemvFusion& fusion, int in, float* stage,
                                               int8_t* xq, XBlock* xb) {
  static_assert(kBlockThreads * 16 == one_row_norm_max_in<kBlockThreads>(),
                "sixteen a thread covers the rows eight a thread does");
  const int at = 16 * int(threadIdx.x);
  const bool valid = at < in;  // the same for both lanes of a block (in % 32 == 0)
  uint4 weight[2];
  if (valid) {
    float4 residual[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      residual[k] = *reinterpret_cast<const float4*>(fusion.norm_residual + at + 4 * k);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      weight[h] =
          *reinterpret_cast<const uint4*>(static_cast<const T*>(fusion.norm_weight) + at + 8 * h);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) *reinterpret_cast<float4*>(stage + at + 4 * k) = residual[k];
  }
  __syncthreads();
  const float inv = one_row_norm_inverse(fusion, in, stage);
  if (16 * 32 * (int(threadIdx.x) / 32) < in) {  // uniform over the warp: past the row, no stores
    uint4 raw[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};  // zero bits where not valid
    if (valid) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 lo = *reinterpret_cast<const float4*>(stage + at + 8 * h);
        const float4 hi = *reinterpret_cast<const float4*>(stage + at + 8 * h + 4);
        raw[h] = normalized_eight<T>(lo, hi, weight[h], inv);
      }
    }
    const Int8Sixteen q = quantize_sixteen<T>(raw);
    if (valid) store_quantized<kSwizzle>(q, 0, at, at, in, xq, xb);
  }
  __syncthreads();
}

// norm_prologue + quantize_x for one row with the norm input (fusion.norm_residual), with the
// same values and bits, in one trip to memory instead of three (the norm's two rounds of 8 loads
// a virtual thread, then quantize_x's reload of the row and the weight). Each thread loads its
// elements of the residual row and of the norm weight at once; the row goes through shared
// memory (stage: (in,) fp32) to one_row_norm_inverse; then each thread normalizes and quantizes
// its elements, as normalized_words and quantize_x do. Two ways, chosen per block type
// (kSixteens: the type's kOneRowNormSixteens, which says where each was measured), the same bits:
//   - eight a thread (_eights): at the hidden sizes of llama-1b and llama-8b every thread is busy;
//     sixteen a thread left half of them idle and made llama-8b's Q4_K qkv preparation 2.0 -> 2.5
//     us (results/2026-11-30-x-sixteens-trace);
//   - sixteen a thread (_sixteens): fewer registers. Q4_0 takes it.
// in <= one_row_norm_max_in<kBlockThreads>(), in % 32 == 0. Ends with a barrier.
template <int kSwizzle, typename T, int kBlockThreads, bool kSixteens>
__device__ __forceinline__ void norm_quantize_one_row(const GemvFusion& fusion, int in,
                                                      float* stage, int8_t* xq, XBlock* xb) {
  if constexpr (kSixteens) {
    norm_quantize_one_row_sixteens<kSwizzle, T, kBlockThreads>(fusion, in, stage, xq, xb);
  } else {
    norm_quantize_one_row_eights<kSwizzle, T, kBlockThreads>(fusion, in, stage, xq, xb);
  }
}

enum class Epilogue { kStore, kStoreF32, kSiluMul };

// After a feature's last unit, in both kernels: sums each accumulator over the warp (a fixed xor
// tree), lane 0 stores feature o of rows 0..n-1 of y (n, y_stride) by the epilogue E (kStore with
// residual_add: adds it to y, the fp32 residual stream), and the
// accumulators restart at zero for the warp's next feature. acc: (kWeightRows, kRows) this lane's.
template <typename T, Epilogue E, int kWeightRows, int kRows>
__device__ __forceinline__ void finish_feature(float (&acc)[kWeightRows][kRows], int n, int lane,
                                               int o, void* y, int y_stride, bool residual_add) {
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) {
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      if (row < n) acc[r][row] = warp_sum(acc[r][row]);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      if (row < n) {
        const int64_t at = int64_t(row) * y_stride + o;
        if constexpr (E == Epilogue::kStoreF32) {
          static_cast<float*>(y)[at] = acc[0][row];
        } else if constexpr (E == Epilogue::kStore) {
          const T value = from_float<T>(acc[0][row]);
          if (residual_add) {  // y is the fp32 residual: launch_add_norm's residual + delta
            float* residual = static_cast<float*>(y);
            residual[at] = residual[at] + to_float(value);
          } else {
            static_cast<T*>(y)[at] = value;
          }
        } else {
          const float g = acc[0][row];
          static_cast<T*>(y)[at] = from_float<T>(g / (1.0f + expf(-g)) * acc[kWeightRows - 1][row]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) {
#pragma unroll
    for (int row = 0; row < kRows; ++row) acc[r][row] = 0.0f;
  }
}

// x (n, in) in T (16-byte aligned); w (kWeightRows * out, in) ggml blocks, 16-byte aligned; y (n,
// y_stride). kRows >= n: the accumulators' size (n only selects the rows computed). Dynamic shared
// memory: Staging<B>::kBlockBytes, then xq (n, x_stride(in)) int8, then xb (n, in / 32) XBlocks.
template <typename B, typename T, Epilogue E, int kRows>
__global__ void __launch_bounds__(kThreads, kRows <= 2 ? 3 : 2)
    gemv_quant_kernel(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                      bool weights_before_wait, GemvFusion fusion) {
  // The weights are constants of the run: with weights_before_wait the first pieces' copies go
  // out before the PDL wait, overlapping the previous kernel's end (the grid is one resident wave,
  // so a block that waits keeps no other block of this kernel off its SM).
  if (!weights_before_wait) {
    pdl_wait();
    pdl_launch_dependents();
  }
  using S = Staging<B>;
  constexpr int kWeightRows = E == Epilogue::kSiluMul ? 2 : 1;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  uint8_t* stages = smem + warp * B::kStages * S::kStageBytes;
  int8_t* xq = reinterpret_cast<int8_t*>(smem + S::kBlockBytes);
  XBlock* xb = reinterpret_cast<XBlock*>(xq + n * x_stride(in));

  const int blocks_per_row = in / B::kElems;
  const int pieces = (blocks_per_row + B::kBlocksPerPiece - 1) / B::kBlocksPerPiece;
  const int64_t row_bytes = int64_t(blocks_per_row) * B::kBytes;
  const int64_t total_bytes = int64_t(kWeightRows) * out * row_bytes;
  const int total_warps = int(gridDim.x) * kWarps;
  const int gw = int(blockIdx.x) * kWarps + warp;
  const int features = gw < out ? (out - 1 - gw) / total_warps + 1 : 0;
  const int items_per_feature = kWeightRows * pieces;
  const int items = features * items_per_feature;

  // Item t of this warp: piece p of weight row r (0: gate or the only row, 1: up) of its feature
  // number t / items_per_feature; `begin` is the piece's first byte in w.
  struct Item {
    int o, r, p;
    int64_t begin;
  };
  const auto locate = [&](int t) {
    Item it;
    const int f = t / items_per_feature, rest = t - f * items_per_feature;
    it.r = rest / pieces;
    it.p = rest - it.r * pieces;
    it.o = gw + f * total_warps;
    it.begin = (int64_t(it.o) + int64_t(it.r) * out) * row_bytes + int64_t(it.p) * S::kPieceBytes;
    return it;
  };
  // Starts the copy of item t's 16-byte aligned span into its staging buffer (t % kStages).
  const auto issue = [&](int t) {
    const Item it = locate(t);
    const int64_t row_end = (int64_t(it.o) + int64_t(it.r) * out + 1) * row_bytes;
    const int64_t end = std::min(it.begin + S::kPieceBytes, row_end);
    const int64_t first = it.begin & ~int64_t(15);
    const int chunks = int((end - first + 15) / 16);
    uint8_t* dst = stages + (t % B::kStages) * S::kStageBytes;
    for (int c = lane; c < chunks; c += 32) {
      const int64_t at = first + 16 * int64_t(c);
      const int64_t left = total_bytes - at;  // >= 1: the span ends inside the weights
      if (left >= 16) {
        cp_async16(dst + 16 * c, w + at, 16);
      } else {
        // The weights' last, partial 16 bytes: copied byte by byte, so nothing past the end of the
        // allocation is touched (compute-sanitizer flags a 16-byte cp.async there even with a
        // smaller source size). The __syncwarp after the group wait publishes these stores too.
        for (int i = 0; i < 16; ++i) dst[16 * c + i] = i < left ? w[at + i] : uint8_t(0);
      }
    }
  };

  // The first pieces' loads go out before x is quantized, so their latency overlaps it.
#pragma unroll
  for (int t = 0; t < B::kStages - 1; ++t) {
    if (t < items) issue(t);
    cp_async_commit();
  }
  prefetch_norm_weight(fusion, in, int(sizeof(T)));
  if (weights_before_wait) {
    pdl_wait();
    pdl_launch_dependents();
  }
  __shared__ float inv[kRows];
  norm_prologue<kRows>(fusion, n, in, inv);
  quantize_x<B::kSwizzle>(x, n, in, xq, xb, fusion, inv);

  float acc[kWeightRows][kRows];
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) {
#pragma unroll
    for (int row = 0; row < kRows; ++row) acc[r][row] = 0.0f;
  }
  for (int t = 0; t < items; ++t) {
    if (t + B::kStages - 1 < items) issue(t + B::kStages - 1);
    cp_async_commit();  // one group per iteration, empty or not: group t is item t
    cp_async_wait<B::kStages - 1>();
    __syncwarp();  // every lane's copies of item t are visible to the whole warp
    const Item it = locate(t);
    const uint8_t* piece = stages + (t % B::kStages) * S::kStageBytes + (it.begin & 15);
    const int first_block = it.p * B::kBlocksPerPiece;
    const int units = std::min(int(B::kBlocksPerPiece), blocks_per_row - first_block) * B::kUnits;
    if (lane < units) {
      const int b = lane / B::kUnits, u = lane % B::kUnits;
      const int blk = first_block + b;
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        if (r == it.r) {
          const XView xv{xq, xb + blk * (B::kElems / 32), x_stride(in), in / 32,
                         blk * (B::kElems / 16)};
          B::template unit<kRows>(piece + b * B::kBytes, u, xv, n, acc[r]);
        }
      }
    }
    __syncwarp();  // the buffer is refilled by the next iteration's issue
    // After the feature's last piece: sum the lanes (fixed xor tree) and store.
    if (it.r != kWeightRows - 1 || it.p != pieces - 1) continue;
    finish_feature<T, E>(acc, n, lane, it.o, y, y_stride, fusion.residual_add);
  }
  cp_async_wait<0>();  // nothing outstanding at exit (only empty groups remain by now)
}

// ---- the direct path: Q4_K, Q4_1, Q4_0 and Q8_0 at 1 to 8 rows, Q6_K at 1 ----
// At batch 1 the staged kernel above is bound by its own instructions, not by memory: ncu on the
// H100 (results/2026-11-25-gemv-quant-direct/profile) shows it issuing 0.38-0.69 warp
// instructions per scheduler cycle with only 12-62% of DRAM bandwidth in use, where the bf16 GEMV
// issues 0.23-0.32 and reaches 39-91%. The per-piece bookkeeping (locating an item with two integer
// divisions, the cp.async loop, the group waits) and the shared-memory round trip of every weight
// byte cost more than the decode itself. Here each lane loads its units straight into registers:
// a Q4_K unit is the block's 16-byte head (d, dmin, scales; the block's four lanes read the same
// 16 bytes, one request) and its chunk's 32 bytes, three 16-byte loads; a unit of the 32-element
// types is its whole block, as 4-byte loads (Q4_1's 20 bytes are 4-byte aligned: five words; Q4_0's
// 18 and Q8_0's 34 are only 2-byte aligned: the 4 or 8 aligned words inside the block and one
// 2-byte load, nothing outside the block). Adjacent lanes read adjacent blocks, so each of these
// narrow loads covers a few consecutive 32-byte sectors across the warp. The next unit's loads go
// out before this one is computed.
//
// Lane L takes units L, L + 32, L + 64, ... of a row, in that order, and folds them with the
// staged kernel's operations: the same unit-to-lane map, the same fp32 sequence (the 32-element
// types call the staged unit's own terms()) and the same xor tree, so a row's bits equal the
// staged kernel's for any n (gpu_test_cuda_gemv_quant runs both for every type with a direct
// kernel, at every row count it takes, and compares them bit for bit).
//
// Direct<B> describes B's units to the direct kernel (kExists false: B has none):
//   Regs                                 one unit's bytes as loaded into registers
//   load(block, c) -> Regs               unit c of the block at `block` (global memory, aligned as
//                                        B's blocks are in a 16-byte aligned matrix)
//   compute<kRows>(regs, c, xv, n, acc)  B::unit's terms from Regs, in B::unit's order
//   kMaxRows                             the most rows it takes (more: the staged kernel)
//   kMaxRowsAt256                        the most rows ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256
//                                        runs at 256 threads without spilling (more: 512)
template <typename B>
struct Direct {
  static constexpr bool kExists = false;
  static constexpr int kMaxRows = 0;
  static constexpr int kMaxRowsAt256 = 0;
};

struct Q4KUnitRegs {
  uint4 head;    // d, dmin (fp16), then the 12 bytes of packed 6-bit scales and mins
  uint4 lo, hi;  // the chunk's 32 bytes: low nibbles sub-block 2c, high nibbles 2c + 1
};

template <>
struct Direct<BlockQ4_K> {
  static constexpr bool kExists = true;
  static constexpr int kMaxRows = kGemvQuantMaxRows;
  static constexpr int kMaxRowsAt256 = 2;  // the gated 4-row kernel spills 16 bytes at 256
  using Regs = Q4KUnitRegs;

  // Unit c of the Q4_K block at `block` (16-byte aligned).
  __device__ __forceinline__ static Regs load(const uint8_t* block, int c, const StreamHint& hint) {
    const uint4* head = reinterpret_cast<const uint4*>(block);
    const uint4* qs = reinterpret_cast<const uint4*>(block + 16 + 32 * c);
    return Regs{hint.load(head), hint.load(qs), hint.load(qs + 1)};
  }

  // BlockQ4_K::unit on a unit held in registers: the same terms in the same order.
  template <int kRows>
  __device__ __forceinline__ static void compute(const Regs& k, int c, const XView& xv, int n,
                                                 float (&acc)[kRows]) {
    const float d = half_bits_to_float(k.head.x), dmin = half_bits_to_float(k.head.x >> 16);
    uint32_t scales, mins;
    q4k_scale_min_pair(k.head, c, &scales, &mins);
    const uint32_t packed[8] = {k.lo.x, k.lo.y, k.lo.z, k.lo.w, k.hi.x, k.hi.y, k.hi.z, k.hi.w};
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
      if (row < n) {
        uint32_t x[16];
        x_words<BlockQ4_K::kSwizzle, 16, true>(xv, row, xv.chunk + 4 * c, x);  // chunk: 16 blk
        const XBlock* a = xv.blocks + row * xv.block_stride + 2 * c;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const XBlock ai = a[i];
          int dot = 0;
#pragma unroll
          for (int w = 0; w < 8; ++w) {
            const uint32_t q = i == 0 ? packed[w] & kLowNibbles : (packed[w] >> 4) & kLowNibbles;
            dot = __dp4a(int(q), int(x[8 * i + w]), dot);
          }
          const int scale = int((scales >> (8 * i)) & 0xFFu), min = int((mins >> (8 * i)) & 0xFFu);
          acc[row] = __fmaf_rn(__fmul_rn(d, ai.d), float(scale * dot), acc[row]);
          acc[row] = __fmaf_rn(-__fmul_rn(dmin, ai.d), float(min * ai.sum), acc[row]);
        }
      }
    }
  }
};

// A 2-byte aligned block of 2 + 4K bytes, an fp16 d and K words of quants (Q4_0: K = 4, Q8_0: K =
// 8), as loaded: the K 4-byte aligned words inside the block and the 2 bytes outside them (its
// first 2 when the block starts 2 bytes past a word, else its last 2), so nothing past the block
// (the row's or the matrix's end) is read.
template <int K>
struct HalfAlignedRegs {
  uint32_t words[K];  // block bytes 2 .. 4K + 1 (block 2 bytes past a word) or 0 .. 4K - 1
  uint32_t half;      // bits 0-15: the other 2 bytes; bits 16+: 0 or 16, the shift that realigns
};

template <int K>
__device__ __forceinline__ HalfAlignedRegs<K> load_half_aligned(const uint8_t* block,
                                                                const StreamHint& hint) {
  const bool word_aligned = (reinterpret_cast<uintptr_t>(block) & 2) == 0;
  const uint32_t* words = reinterpret_cast<const uint32_t*>(block + (word_aligned ? 0 : 2));
  const unsigned short* half =
      reinterpret_cast<const unsigned short*>(block + (word_aligned ? 4 * K : 0));
  HalfAlignedRegs<K> regs;
#pragma unroll
  for (int k = 0; k < K; ++k) regs.words[k] = hint.load(words + k);
  regs.half = hint.load(half) | (word_aligned ? 16u << 16 : 0u);
  return regs;
}

// The block's d, and its K quant words (block bytes 2 + 4k .. 5 + 4k) into q. Word aligned, d is
// the first word's low half and quant word k straddles words k and k + 1 (the last: the loaded
// half), a funnel shift by 16; otherwise d is the loaded half and the words are as loaded (a
// funnel shift by 0 returns its low word).
template <int K>
__device__ __forceinline__ float half_aligned_words(const HalfAlignedRegs<K>& regs,
                                                    uint32_t (&q)[K]) {
  const uint32_t shift = regs.half >> 16;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    q[k] = __funnelshift_r(regs.words[k], k + 1 < K ? regs.words[k + 1] : regs.half, shift);
  }
  return half_bits_to_float(shift != 0 ? regs.words[0] : regs.half);
}

struct Q4_1Regs {
  uint32_t dm;     // d (bits 0-15), m (16-31), fp16
  uint32_t qs[4];  // the 16 bytes of packed nibbles
};

template <bool kHasMin>
struct Direct<BlockQ4<kHasMin>> {
  static constexpr bool kExists = true;
  static constexpr int kMaxRows = kGemvQuantMaxRows;
  static constexpr int kMaxRowsAt256 = 4;
  using Regs = std::conditional_t<kHasMin, Q4_1Regs, HalfAlignedRegs<4>>;

  // The block at `block` (Q4_1: 4-byte aligned; Q4_0: 2-byte aligned).
  __device__ __forceinline__ static Regs load(const uint8_t* block, int, const StreamHint& hint) {
    if constexpr (kHasMin) {
      const uint32_t* words = reinterpret_cast<const uint32_t*>(block);
      Regs regs;
      regs.dm = hint.load(words);
#pragma unroll
      for (int k = 0; k < 4; ++k) regs.qs[k] = hint.load(words + 1 + k);
      return regs;
    } else {
      return load_half_aligned<4>(block, hint);
    }
  }

  template <int kRows>
  __device__ __forceinline__ static void compute(const Regs& regs, int, const XView& xv, int n,
                                                 float (&acc)[kRows]) {
    uint32_t packed[4];
    if constexpr (kHasMin) {
#pragma unroll
      for (int k = 0; k < 4; ++k) packed[k] = regs.qs[k];
      BlockQ4<kHasMin>::template terms<kRows>(
          half_bits_to_float(regs.dm), half_bits_to_float(regs.dm >> 16), packed, xv, n, acc);
    } else {
      const float d = half_aligned_words<4>(regs, packed);
      BlockQ4<kHasMin>::template terms<kRows>(d, 0.0f, packed, xv, n, acc);
    }
  }
};

template <>
struct Direct<BlockQ8_0> {
  static constexpr bool kExists = true;
  static constexpr int kMaxRows = kGemvQuantMaxRows;
  static constexpr int kMaxRowsAt256 = 4;
  using Regs = HalfAlignedRegs<8>;

  // The block at `block` (2-byte aligned).
  __device__ __forceinline__ static Regs load(const uint8_t* block, int, const StreamHint& hint) {
    return load_half_aligned<8>(block, hint);
  }

  template <int kRows>
  __device__ __forceinline__ static void compute(const Regs& regs, int, const XView& xv, int n,
                                                 float (&acc)[kRows]) {
    uint32_t q[8];
    const float d = half_aligned_words<8>(regs, q);
    BlockQ8_0::terms<kRows>(d, q, xv, n, acc);
  }
};

// A Q6_K unit (h, g) = (c / 2, c % 2) as loaded. The 210-byte blocks are only 2-byte aligned
// (every other block of a 16-byte aligned matrix starts 2 bytes past a word), so each 16-byte span
// is loaded as the five words from the aligned word at or before it, and realigned by a funnel
// shift when computed: a block 2 bytes past a word (never a matrix's first) reads the previous
// block's last 2 bytes, a word-aligned one 4 bytes past the span, inside its block (the last span,
// qh, ends at byte 192). The four scales (bytes 192 + 8h + g + 2p) lie in the two words from byte
// 192 + 8h, or, 2 bytes past a word, three words from 190 + 8h (ending at byte 209); d (208-209)
// is one 2-byte load, so nothing past the block is read. 19 words a unit, twice over with the next
// unit's loads in flight (80 registers at one row, no spills; the 8-row gated kernel, not built,
// spilled 4 bytes).
struct Q6KUnitRegs {
  uint32_t low[5], high[5], hbits[5];  // words covering ql[64h + 16g ..], ql[.. + 32], qh[..]
  uint32_t scales[3];                  // words covering bytes 192 + 8h .. 199 + 8h
  uint32_t d_shift;                    // bits 0-15: d (fp16); bits 16+: 0 or 16, the realignment
};

template <>
struct Direct<BlockQ6_K> {
  static constexpr bool kExists = true;
  // One row only: there it beat the staged kernel on every llama-1b/8b shape but llama-1b's qkv
  // (one layer's four products 8% and 22% faster, the lm_head 8%); at 4 and 8 rows the down and o
  // projections still gained 11-35% but the lm_head lost 5-14% and gate|up up to 5%
  // (results/2026-11-28-q6k-direct, H200).
  static constexpr int kMaxRows = 1;
  // Its 19-word units spill under 256 threads' bound at every row count (ptxas: 192-348 bytes).
  static constexpr int kMaxRowsAt256 = 0;
  using Regs = Q6KUnitRegs;

  // Unit c of the Q6_K block at `block` (2-byte aligned).
  __device__ __forceinline__ static Regs load(const uint8_t* block, int c, const StreamHint& hint) {
    const int h = c / 2, g = c % 2;
    const int misalign = int(reinterpret_cast<uintptr_t>(block) & 2);  // 0 or 2
    const auto words = [&](int offset) {
      return reinterpret_cast<const uint32_t*>(block + offset - misalign);
    };
    Regs regs;
    const uint32_t* low = words(64 * h + 16 * g);
    const uint32_t* high = words(64 * h + 32 + 16 * g);
    const uint32_t* hbits = words(128 + 32 * h + 16 * g);
#pragma unroll
    for (int k = 0; k < 5; ++k) {
      regs.low[k] = hint.load(low + k);
      regs.high[k] = hint.load(high + k);
      regs.hbits[k] = hint.load(hbits + k);
    }
    const uint32_t* scales = words(192 + 8 * h);
    regs.scales[0] = hint.load(scales);
    regs.scales[1] = hint.load(scales + 1);
    regs.scales[2] = misalign != 0 ? hint.load(scales + 2) : 0u;
    regs.d_shift = hint.load(reinterpret_cast<const unsigned short*>(block + 208)) |
                   (uint32_t(8 * misalign) << 16);
    return regs;
  }

  // BlockQ6_K::unit on a unit held in registers: the same terms in the same order.
  template <int kRows>
  __device__ __forceinline__ static void compute(const Regs& regs, int c, const XView& xv, int n,
                                                 float (&acc)[kRows]) {
    const int h = c / 2, g = c % 2;
    const uint32_t shift = regs.d_shift >> 16;
    uint32_t low[4], high[4], hbits[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      low[k] = __funnelshift_r(regs.low[k], regs.low[k + 1], shift);
      high[k] = __funnelshift_r(regs.high[k], regs.high[k + 1], shift);
      hbits[k] = __funnelshift_r(regs.hbits[k], regs.hbits[k + 1], shift);
    }
    // Scale p is byte misalign + g + 2p of the scale words: bytes 0 and 2 of v0, then of v1.
    const uint32_t byte_shift = shift + 8u * uint32_t(g);
    const uint32_t v0 = __funnelshift_r(regs.scales[0], regs.scales[1], byte_shift);
    const uint32_t v1 = __funnelshift_r(regs.scales[1], regs.scales[2], byte_shift);
    const int scale[4] = {
        int(static_cast<int8_t>(v0 & 0xFFu)), int(static_cast<int8_t>((v0 >> 16) & 0xFFu)),
        int(static_cast<int8_t>(v1 & 0xFFu)), int(static_cast<int8_t>((v1 >> 16) & 0xFFu))};
    BlockQ6_K::terms<kRows>(half_bits_to_float(regs.d_shift), low, high, hbits, scale, h, g, xv, n,
                            acc);
  }
};

// x (n, in) in T; w (kWeightRows * out, in) blocks of B, 16-byte aligned; y (n, y_stride).
// Dynamic shared memory: xq (n, x_stride(in)) int8, then xb (n, in / 32) XBlocks. Each warp
// computes features gw, gw + total_warps, ...; an item is one round of units (k) of one feature,
// all its weight rows at once, and the next item's loads are in flight while one is computed.
// kBlockThreads (512; 256 for comparisons): each thread block quantizes x into its own
// shared memory, so fewer, larger blocks quantize it fewer times per SM (llama-8b's down, in =
// 14336, went from 17.6 to 15.1 us at 512 for Q4_K; results/2026-11-25-gemv-quant-direct).
// Loading two items ahead instead of one was slower on every Q4_K shape measured there.
// kMinBlocks: the blocks of 512 threads an SM must hold (2: at most 64 registers; see
// kTwoBlockMinFeatures). kOneRowNorm: one row with the norm input, prepared by
// norm_quantize_one_row (dynamic shared memory: xq and xb, then the (in,) fp32 stage at the next
// 16-byte boundary).
template <typename B, typename T, Epilogue E, int kRows, int kBlockThreads, int kMinBlocks = 1,
          bool kOneRowNorm = false>
__global__ void __launch_bounds__(kBlockThreads, kBlockThreads == 256 ? 3 : kMinBlocks)
    gemv_direct_kernel(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                       bool weights_before_wait, bool evict_first, GemvFusion fusion) {
  using D = Direct<B>;
  using Regs = typename D::Regs;
  constexpr int kWeightRows = E == Epilogue::kSiluMul ? 2 : 1;
  constexpr int kBlockWarps = kBlockThreads / 32;
  trace_probe::Stamps stamps;  // probe builds only (trace_probe.cuh)
  stamps.start();
  if (!weights_before_wait) {
    pdl_wait();
    pdl_launch_dependents();
  }
  extern __shared__ __align__(16) uint8_t smem[];
  int8_t* xq = reinterpret_cast<int8_t*>(smem);
  XBlock* xb = reinterpret_cast<XBlock*>(xq + n * x_stride(in));
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int blocks_per_row = in / B::kElems;
  const int units = blocks_per_row * B::kUnits;
  const int rounds = (units + 31) / 32;  // unit rounds per row, the same for every lane
  const int64_t row_bytes = int64_t(blocks_per_row) * B::kBytes;
  const int total_warps = int(gridDim.x) * kBlockWarps;
  const int gw = int(blockIdx.x) * kBlockWarps + warp;
  const int features = gw < out ? (out - 1 - gw) / total_warps + 1 : 0;
  const int items = features * rounds;
  const int c = lane % B::kUnits;  // the lane's unit within every block it reads

  // Item (f, k): unit lane + 32 k of weight row r of feature gw + f total_warps. Units past the
  // row's end are not loaded (nor computed).
  // Q4_K takes a leaner loop (results/2026-11-29-direct-lean: 13-15% fewer instructions an item
  // with x_words' kGroupAligned): a unit's block is u / kUnits = lane / kUnits + k * (32 / kUnits),
  // the lane's first block plus whole items and features, so a load adds offsets instead of
  // multiplying out the row; and the register buffers are not zeroed (a unit past the row's end
  // is neither loaded nor computed). The same two changes made llama-1b's Q4_0 batch-1 step 3.5%
  // slower (cause not found), so the other types keep the plain loop.
  constexpr bool kLean = std::is_same_v<B, BlockQ4_K>;
  const uint8_t* lane_w = w + int64_t(gw) * row_bytes + (lane / B::kUnits) * B::kBytes;
  const int64_t feature_bytes = int64_t(total_warps) * row_bytes;
  const int64_t gate_bytes = int64_t(out) * row_bytes;  // gate row o to up row o
  constexpr int kItemBytes = 32 / B::kUnits * B::kBytes;
  const StreamHint hint = StreamHint::make(evict_first);
  const auto load = [&](int f, int k, Regs(&regs)[kWeightRows]) {
    const int u = lane + 32 * k;
    if (u >= units) return;
    if constexpr (kLean) {
      const uint8_t* block = lane_w + f * feature_bytes + k * kItemBytes;
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) regs[r] = D::load(block + r * gate_bytes, c, hint);
    } else {
      const int o = gw + f * total_warps;
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        const uint8_t* block =
            w + (int64_t(o) + int64_t(r) * out) * row_bytes + int64_t(u / B::kUnits) * B::kBytes;
        regs[r] = D::load(block, c, hint);
      }
    }
  };
  const auto clear = [&](Regs(&regs)[kWeightRows]) {
    if constexpr (!kLean) {
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) regs[r] = Regs{};
    }
  };
  const auto advance = [&](int& f, int& k) {
    if (++k == rounds) {
      k = 0;
      ++f;
    }
  };
  // The first item's loads go out before x is quantized (the weights are constants of the run:
  // also before the PDL wait unless asked not to).
  Regs current[kWeightRows];
  clear(current);
  int load_f = 0, load_k = 0;  // the next item to load
  if (items > 0) load(load_f, load_k, current);
  advance(load_f, load_k);
  prefetch_norm_weight(fusion, in, int(sizeof(T)));
  if (weights_before_wait) {
    pdl_wait();
    pdl_launch_dependents();
  }
  stamps.wait_done();
  if constexpr (kOneRowNorm) {
    // One row with the norm input: one trip to memory (stage: after xq and xb).
    float* stage = reinterpret_cast<float*>(smem + align16(int(x_row_bytes(in))));
    norm_quantize_one_row<B::kSwizzle, T, kBlockThreads, B::kOneRowNormSixteens>(fusion, in, stage,
                                                                                 xq, xb);
  } else {
    __shared__ float inv[kRows];
    norm_prologue<kRows>(fusion, n, in, inv);
    quantize_x_sixteens<B::kSwizzle, T, kBlockThreads>(x, n, in, xq, xb, fusion, inv);
  }
  stamps.input_ready();

  float acc[kWeightRows][kRows];
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) {
#pragma unroll
    for (int row = 0; row < kRows; ++row) acc[r][row] = 0.0f;
  }
  int f = 0, k = 0;
  for (int t = 0; t < items; ++t) {
    Regs next[kWeightRows];
    clear(next);
    if (t + 1 < items) load(load_f, load_k, next);
    advance(load_f, load_k);
    const int u = lane + 32 * k;
    if (u < units) {
      // The staged kernel's XView for this unit's block.
      const int blk = u / B::kUnits;
      const XView xv{xq, xb + blk * (B::kElems / 32), x_stride(in), in / 32,
                     blk * (B::kElems / 16)};
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r)
        D::template compute<kRows>(current[r], c, xv, n, acc[r]);
    }
    if (k == rounds - 1) {  // the feature's last round: sum the lanes (fixed xor tree) and store
      finish_feature<T, E>(acc, n, lane, gw + f * total_warps, y, y_stride, fusion.residual_add);
    }
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) current[r] = next[r];
    advance(f, k);
  }
  trace_probe::block_barrier();
  stamps.finish(out * 4 + int(E), in);  // tag: the product's features and epilogue
}

// ---- host side ----

// The opt-in shared memory size and the resident blocks per SM of one kernel at one dynamic
// shared memory size, per device; cached (the graph cache runs a step eagerly before capturing
// it, so these calls happen outside stream capture).
struct Occupancy {
  int sms = 0, blocks_per_sm = 0;
};

Occupancy occupancy(const void* kernel, size_t smem, size_t max_smem, int threads = kThreads) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, size_t>, Occupancy> cache;
  int device = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device, kernel, smem);
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  allow_dynamic_shared_memory(kernel, int(max_smem));
  Occupancy result;
  ROSE_CUDA_CHECK(cudaDeviceGetAttribute(&result.sms, cudaDevAttrMultiProcessorCount, device));
  ROSE_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&result.blocks_per_sm, kernel, threads, smem));
  if (result.blocks_per_sm < 1) {
    cuda_fail("the kernel does not fit on an SM", "gemv_quant occupancy", __FILE__, __LINE__);
  }
  cache[key] = result;
  return result;
}

// KernelSwitches::gemv_quant_early false (ROSEINFER_CUDA_GEMV_QUANT_EARLY=0): every load after the
// PDL wait (comparisons).
bool weights_before_wait() { return kernel_switches().gemv_quant_early; }

// KernelSwitches::gemv_quant_direct false (ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0): every type through
// the staged kernel (comparisons, tests).
bool direct_enabled() { return kernel_switches().gemv_quant_direct; }

// The most rows the direct kernel takes: all the GEMV's 8 (compiled for 1, 2, 4 and 8). Measured
// end to end for Q4_K against the staged kernel (results/2026-11-25-gemv-quant-direct/rows4,
// rows8): +20-30% at 3-4 rows, +22-26% at 6 and 8; the 32-element types share the cap.
// KernelSwitches::gemv_quant_direct_max_rows 2 or 4 (ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS) sends
// the rows above that to the staged kernel (comparisons).
int direct_max_rows() { return kernel_switches().gemv_quant_direct_max_rows; }

// The grid of one resident wave in which every warp gets the same number of features.
int resident_wave_blocks(const Occupancy& occ, int out, int block_warps = kWarps) {
  const int64_t resident_warps = int64_t(occ.sms) * occ.blocks_per_sm * block_warps;
  const int64_t per_warp = (out + resident_warps - 1) / resident_warps;
  const int64_t warps = (out + per_warp - 1) / per_warp;
  return int((warps + block_warps - 1) / block_warps);
}

// The 1-row plain products (not gate|up) of at least kTwoBlockMinFeatures features run a build of
// the direct kernel capped at 64 registers (56-63 by type, no spills), so two 512-thread blocks
// fit an SM: its one wave has twice the warps, each with half the features. Batch-1 decode on the
// H200 (results/2026-11-29-fixed-costs/two_blocks): llama-8b Q4_K 537 -> 581 tok/s (its qkv, o,
// down and lm_head take it); llama-1b Q4_K 2,223 -> 2,254 (only its lm_head does). Capping every
// plain product cost llama-1b 3.5% (not measured apart: its qkv's grid doubles, its o and down
// keep theirs), and capping gate|up too spilled and lost on both (quant_cap/ there).
// KernelSwitches::gemv_quant_two_blocks false (ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS=0): never
// (comparisons).
constexpr int kTwoBlockMinFeatures = 4096;

bool two_blocks_enabled() { return kernel_switches().gemv_quant_two_blocks; }

// KernelSwitches::gemv_quant_one_row_norm false (ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=0): one
// row with the norm input through norm_prologue and quantize_x too (comparisons).
bool one_row_norm_enabled() { return kernel_switches().gemv_quant_one_row_norm; }

// The direct kernel's weight loads carry an L2 evict_first policy (StreamHint).
// KernelSwitches::gemv_quant_evict_first false (ROSEINFER_CUDA_GEMV_QUANT_EVICT_FIRST=0):
// evict_normal (comparisons; such loads are not plain loads: in the dense GEMV they measured
// slower, results/2026-11-30-evict-first-dense).
bool evict_first_enabled() { return kernel_switches().gemv_quant_evict_first; }

template <typename B, typename T, Epilogue E, int kRows, int kBlockThreads>
void launch_direct_as(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                      const GemvFusion& fusion, cudaStream_t stream) {
  auto* kernel = gemv_direct_kernel<B, T, E, kRows, kBlockThreads>;
  // One row with the norm input: the build with norm_quantize_one_row (its fp32 stage after x's
  // int8 copy); a build of its own, so the products without the norm input keep their registers.
  bool one_row_norm = false;
  if constexpr (kRows == 1 && kBlockThreads == 512) {
    one_row_norm = fusion.norm_residual != nullptr && in <= one_row_norm_max_in<kBlockThreads>() &&
                   one_row_norm_enabled();
    // gate|up (SiLU) keeps one block an SM (results/2026-11-30-gated-two-blocks).
    if constexpr (E == Epilogue::kSiluMul) {
      if (one_row_norm) kernel = gemv_direct_kernel<B, T, E, kRows, kBlockThreads, 1, true>;
    } else {
      const bool two = out >= kTwoBlockMinFeatures && two_blocks_enabled();
      if (one_row_norm) {
        kernel = two ? gemv_direct_kernel<B, T, E, kRows, kBlockThreads, 2, true>
                     : gemv_direct_kernel<B, T, E, kRows, kBlockThreads, 1, true>;
      } else if (two) {
        kernel = gemv_direct_kernel<B, T, E, kRows, kBlockThreads, 2>;
      }
    }
  }
  const size_t smem = one_row_norm ? size_t(align16(int(x_row_bytes(in)))) + size_t(in) * 4
                                   : size_t(n * x_row_bytes(in));
  const Occupancy occ =
      occupancy(reinterpret_cast<const void*>(kernel), smem, size_t(kXSmemBudget), kBlockThreads);
  launch_kernel(kernel, dim3(resident_wave_blocks(occ, out, kBlockThreads / 32)),
                dim3(kBlockThreads), smem, stream, x, w, y, n, in, out, y_stride,
                weights_before_wait(), evict_first_enabled(), fusion);
}

// KernelSwitches::gemv_quant_direct_threads 256 (ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256): the
// direct kernel's blocks at 256 threads, the size it was first measured at (comparisons). 1024
// threads (one weight row, one x row) measured the same as 512 and was removed after 4772d16.
int direct_threads() { return kernel_switches().gemv_quant_direct_threads; }

template <typename B, typename T, Epilogue E, int kRows>
void launch_direct(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                   const GemvFusion& fusion, cudaStream_t stream) {
  // Above Direct<B>::kMaxRowsAt256 the kernel would spill under 256 threads' bound (the 8-row gated
  // Q4_K kernel; Q6_K's at every row count), so those stay at 512.
  if constexpr (kRows <= Direct<B>::kMaxRowsAt256) {
    if (direct_threads() == 256) {
      return launch_direct_as<B, T, E, kRows, 256>(x, w, y, n, in, out, y_stride, fusion, stream);
    }
  }
  launch_direct_as<B, T, E, kRows, 512>(x, w, y, n, in, out, y_stride, fusion, stream);
}

// Calls f(std::integral_constant<int, kRows>{}) with the accumulator count the kernels are
// compiled for (1, 2, 4 or 8) that holds `rows` (1..kMaxRows); counts above kMaxRows are never
// instantiated.
template <int kMaxRows = kGemvQuantMaxRows, typename F>
void with_kernel_rows(int rows, F&& f) {
  ROSE_ASSERT(rows >= 1 && rows <= kMaxRows);
  if (rows == 1) {
    f(std::integral_constant<int, 1>{});
  } else if constexpr (kMaxRows >= 2) {
    if (rows == 2) {
      f(std::integral_constant<int, 2>{});
    } else if constexpr (kMaxRows >= 4) {
      if (rows <= 4) {
        f(std::integral_constant<int, 4>{});
      } else if constexpr (kMaxRows >= 8) {
        f(std::integral_constant<int, 8>{});
      }
    }
  }
}

template <typename B, typename T, Epilogue E, int kRows>
void launch_rows(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                 const GemvFusion& fusion, cudaStream_t stream) {
  auto* kernel = gemv_quant_kernel<B, T, E, kRows>;
  const size_t smem = size_t(Staging<B>::kBlockBytes + n * x_row_bytes(in));
  const size_t max_smem = size_t(Staging<B>::kBlockBytes + kXSmemBudget);
  const Occupancy occ = occupancy(reinterpret_cast<const void*>(kernel), smem, max_smem);
  // Every warp gets the same number of features, and all warps are resident at once: no tail
  // wave, no warp with one feature more than the others.
  launch_kernel(kernel, dim3(resident_wave_blocks(occ, out)), dim3(kThreads), smem, stream, x, w, y,
                n, in, out, y_stride, weights_before_wait(), fusion);
}

template <typename B, typename T, Epilogue E>
void launch_typed(const void* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                  size_t y_element, const GemvFusion& fusion, cudaStream_t stream) {
  // Rows whose quantized x exceeds the budget run as several launches of the rows that fit: each
  // row's arithmetic is the same in any launch, so this keeps batch invariance.
  const int fit = int(std::min<int64_t>(kGemvQuantMaxRows, kXSmemBudget / x_row_bytes(in)));
  for (int first = 0; first < n; first += fit) {
    const int rows = std::min(fit, n - first);
    const T* xr = x ? static_cast<const T*>(x) + int64_t(first) * in : nullptr;  // null: norm in
    void* yr = static_cast<char*>(y) + int64_t(first) * y_stride * int64_t(y_element);
    GemvFusion fr = fusion;
    if (fr.norm_residual) fr.norm_residual += int64_t(first) * in;
    if constexpr (Direct<B>::kExists) {
      const int cap = std::min(direct_max_rows(), Direct<B>::kMaxRows);
      if (rows <= cap && direct_enabled()) {
        with_kernel_rows<Direct<B>::kMaxRows>(rows, [&](auto kernel_rows) {
          launch_direct<B, T, E, decltype(kernel_rows)::value>(xr, w, yr, rows, in, out, y_stride,
                                                               fr, stream);
        });
        continue;
      }
    }
    with_kernel_rows(rows, [&](auto kernel_rows) {
      launch_rows<B, T, E, decltype(kernel_rows)::value>(xr, w, yr, rows, in, out, y_stride, fr,
                                                         stream);
    });
  }
}

template <typename B, Epilogue E>
void launch_dtype(const void* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                  const GemvFusion& fusion, DType dtype, cudaStream_t stream) {
  const size_t y_element = E == Epilogue::kStoreF32 || fusion.residual_add ? 4 : 2;
  if (dtype == DType::kBF16) {
    launch_typed<B, __nv_bfloat16, E>(x, w, y, n, in, out, y_stride, y_element, fusion, stream);
  } else {
    launch_typed<B, __half, E>(x, w, y, n, in, out, y_stride, y_element, fusion, stream);
  }
}

template <Epilogue E>
void launch_checked(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n, int in,
                    int out, int y_stride, const GemvFusion& fusion, DType dtype,
                    cudaStream_t stream, const char* what) {
  if (!gemv_quant_supported(ggml_type, n, in) || out < 1 || y_stride < out) {
    cuda_fail(
        "unsupported type or shape (n > kGemvQuantMaxRows, or in not a multiple of the block "
        "size or too large)",
        what, __FILE__, __LINE__);
  }
  if (fusion.norm_residual ? misaligned16(fusion.norm_residual) || misaligned16(fusion.norm_weight)
                           : misaligned16(x)) {
    cuda_fail("misaligned x, or norm residual or weight (16 bytes needed)", what, __FILE__,
              __LINE__);
  }
  if (misaligned16(w))
    cuda_fail("misaligned weight pointer (16 bytes needed)", what, __FILE__, __LINE__);
  if (fusion.residual_add && E != Epilogue::kStore) {
    cuda_fail("the residual add follows the plain product only", what, __FILE__, __LINE__);
  }
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0:
      return launch_dtype<BlockQ8_0, E>(x, w, y, n, in, out, y_stride, fusion, dtype, stream);
    case GgmlType::kQ4_0:
      return launch_dtype<BlockQ4<false>, E>(x, w, y, n, in, out, y_stride, fusion, dtype, stream);
    case GgmlType::kQ4_1:
      return launch_dtype<BlockQ4<true>, E>(x, w, y, n, in, out, y_stride, fusion, dtype, stream);
    case GgmlType::kQ4_K:
      return launch_dtype<BlockQ4_K, E>(x, w, y, n, in, out, y_stride, fusion, dtype, stream);
    default:
      return launch_dtype<BlockQ6_K, E>(x, w, y, n, in, out, y_stride, fusion, dtype, stream);
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
  return elems > 0 && n >= 1 && n <= kGemvQuantMaxRows && in > 0 && in % elems == 0 &&
         x_row_bytes(in) <= kXSmemBudget;
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
                       int out, bool f32_out, DType dtype, cudaStream_t stream, int y_stride,
                       const GemvFusion& fusion) {
  if (y_stride == 0) y_stride = out;
  if (f32_out) {
    launch_checked<Epilogue::kStoreF32>(x, w, ggml_type, y, n, in, out, y_stride, fusion, dtype,
                                        stream, "launch_gemv_quant");
  } else {
    launch_checked<Epilogue::kStore>(x, w, ggml_type, y, n, in, out, y_stride, fusion, dtype,
                                     stream, "launch_gemv_quant");
  }
}

void launch_gemv_quant_silu_mul(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n,
                                int in, int out, DType dtype, cudaStream_t stream,
                                const GemvFusion& fusion) {
  launch_checked<Epilogue::kSiluMul>(x, w, ggml_type, y, n, in, out, out, fusion, dtype, stream,
                                     "launch_gemv_quant_silu_mul");
}

bool trace_probe::dump_gemv_quant(std::FILE* f, std::string* error) {
  return trace_probe::write_ring(f, "gemv_quant", error);
}

}  // namespace rose
