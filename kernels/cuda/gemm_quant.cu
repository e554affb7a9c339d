// Quantized tensor-core GEMM (gemm_quant.cuh): y = x W^T with W in its GGUF blocks.
//
// Layout of one thread block (a "tile"): W warps, each owning R weight rows (R = 8, 16 or 32) of
// the block's BM = W R rows, all against the block's BN activation rows. The tile's weight rows
// are the A operand (rows of W, decoded straight into A fragments in registers), x^T is the B
// operand (its columns are x's K-contiguous rows). Two multipliers share everything else:
//   - mma.sync m16n8k16, B fragments by ldmatrix (every tile shape);
//   - wgmma.mma_async with A from registers (a warpgroup's 4 warps hold the m16n8k16 A layout of
//     16 rows each of an m64 tile) and B through a shared-memory descriptor (the x buffer's layout
//     is exactly the 128-byte swizzle mode), for the large shapes: 32x8w by n64 / n128 (two m64
//     tiles per warpgroup) and 16x8w by n256 (one m64 tile, the decode amortized over 256 rows).
// Both give the same bits (checked by the tests for every shape and n).
//
// The k loop runs in 64-element sub-steps through a cp.async pipeline:
//   - x: a ring of 4 buffers of BN rows x 64 elements (128 bytes a row, 16-byte chunks swizzled by
//     the row so ldmatrix's 8 row addresses hit 8 different bank groups), 3 sub-steps ahead;
//   - W: a ring of 2 buffers holding, for each of the BM rows, the byte span of its 256-element
//     "big step" (one K-quant block, or 8 blocks of a 32-element type: 144..272 bytes), copied as
//     the 16-byte aligned chunks that cover it (blocks are byte-packed, so a row's span may start
//     anywhere mod 16; the slot keeps the offset). Its copy rides in the x group of the big step's
//     first sub-step, so one cp.async group per sub-step tracks both.
// Each weight element is decoded by exactly one thread per tile (no redundant decode): thread
// (g = lane / 4, t = lane % 4) of a warp builds the A fragments of rows g and g + 8 of each of its
// 16-row mma tiles. An mma step's 16 k values are chosen per type so one 2-byte shared load gives
// a thread its two element pairs: for Q4_K the pair (2t, 2t+1) of an mma step is the low nibbles
// of qs bytes 8s + 2t, 2t+1 and the pair (2t+8, 2t+9) their high nibbles, i.e. the step covers
// elements [8s, 8s+8) and [32+8s, 32+8s+8) of a 64-element chunk. The B fragments take x's chunks
// at the same two offsets (ldmatrix reads any 8-element chunk per 8x8 matrix), so the product is
// the same dot product in another order of k -- an order that depends on the type only.
//
// Numerics: every decoded value is the CPU reference's fp32 value (see dequant.cu, same operations
// and rounding), rounded to bf16/fp16 by the same cvt.rn. Where the reference's product is exact in
// fp32 (d * q with d fp16 and q a small integer; Q4_K's d * scale * q has at most 21 significant
// bits), a following add or subtract is folded into one fma: fma(a, b, c) rounds a * b + c once,
// which equals round(round(a * b) + c) when a * b is exact (signed zeros included: x - y is
// x + (-y) in IEEE arithmetic, and fma(d, q, +0.0f) gives +0 for a zero product as the reference's
// "+ m" with m = +0.0f does). Each output is one fp32 accumulator that takes the mma steps k = 0,
// 16, 32, ... in order whatever the tile shape, so no result depends on n.
//
// Speed notes (H100, measured with tests/gpu/bench_gemm_quant.cpp and Nsight Compute).
//   - The kernel is bound by the decode's instruction issue. A weight element costs ~5-6 issued
//     instructions (a 2-byte LDS per 4 elements, LOP/PRMT to place a nibble or byte in a float's
//     mantissa, FADD to remove the magic, FFMA/FMUL with the scale, half an F2FP to pack two) plus
//     the per-sub-step scale decode; with 2 warps per scheduler (registers: 128 fp32 accumulators
//     per thread in the large tiles) the schedulers issue ~0.37 instructions per cycle, stalled on
//     the ALU chains' latency. The tensor cores are far from busy (15-30% in the large tiles).
//   - The decode is amortized over a tile's BN activation rows, so large BN wins at large n while
//     small tiles keep every SM busy at small n (choose_tile, from measurements). Long-K, few-row
//     products (llama-1b down: 2048 rows x 8192) have too few warps at small n, so k is split
//     into slices fixed per shape (gemm_quant_split.h; still batch invariant): llama-1b down at
//     16 rows, Q4_K, 20.4 us in 4 slices against 44.8 unsplit (results/2026-11-24-splitk/final).
//   - The first version's copy code (64-bit address math and a branchy chunk permutation per copy)
//     made the k loop 4x longer than its work; the copies now come from per-thread addresses.
//   - wgmma: no wgmma under a branch (ptxas serializes every wgmma of the kernel then). The tiles
//     of one block an SM are software-pipelined: a warpgroup issues sub-step j's wgmmas, then
//     waits for j + 1's copies, refills j - 1's buffers and decodes j + 1 into a second set of A
//     registers before it waits for the wgmmas (ptxas keeps them asynchronous: the A registers
//     written meanwhile are not those in flight). Against decode, multiply, wait: faster in 358
//     of 360 products timed on those tiles (Q8_0 gate|up at 256 rows on 16x8w n256: llama-1b
//     52.3 -> 41.5 us, llama-8b 197 -> 152; Q4_K's on 32x8w n128 9-12%;
//     results/2026-12-03-wgmma-pipeline). The K-quants' products stay slower
//     than decode + cuBLAS at 256 rows even so (llama-1b Q4_K gate|up 72 against 51 us).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/common/ggml_type.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm_quant.cuh"
#include "kernels/cuda/ggml_block.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tile_ptx.cuh"

namespace rose {
namespace {

constexpr int kSubK = 64;              // elements of k per pipeline sub-step (4 mma steps)
constexpr int kBigK = 256;             // elements of k per weight copy (one K-quant block)
constexpr int kMaxXStages = 4;         // x ring buffers (Tile::kXStages: 3 or 4)
constexpr int kXRowBytes = kSubK * 2;  // one x row of a sub-step: 128 bytes, 8 chunks
constexpr float kMagic = 8388608.0f;   // 2^23

// ---- bit tricks -------------------------------------------------------------------------------

// 2^23 + (byte k of v), exactly: the bits 0x4B0000bb are that float (as in dequant.cu's staged
// decoders), so subtracting 2^23 + bias gives float(byte - bias) exactly with one PRMT and one
// FADD instead of a quarter-rate I2F.
template <int k>
__device__ __forceinline__ float magic_byte(uint32_t v) {
  return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440 + k));
}

// Two bytes at an even shared-memory address (blocks are byte-packed; every field the decoders
// read through this is at an even offset of an even-sized block).
__device__ __forceinline__ uint32_t u16_at(const uint8_t* p) {
  return *reinterpret_cast<const unsigned short*>(p);
}

// ---- the block types --------------------------------------------------------------------------
// Each type decodes, for one weight row, the four mma steps of a 64-element sub-step:
//   Row prepare(big, sub): the row's per-sub-step state (scales, field pointers); `big` is the
//     row's first byte of the current 256-element big step in shared memory, sub = 0..3 the
//     sub-step within it
//   step(row, s, t, lo, hi): the values of this thread's element pairs in mma step s (0..3):
//     lo = mma k (2t, 2t+1), the elements base0(s) + 2t, +1 of the sub-step; hi = mma k (2t+8,
//     2t+9), the elements base1(s) + 2t, +1. base0 and base1 are multiples of 8.
// Every value is computed with the reference's fp32 operations (engine/model/quant.cpp); see the
// top of the file for the fma folding.

// Q8_0: d, int8 qs[32]; value d q. A sub-step is blocks 2 sub, 2 sub + 1 of the big step's 8;
// step s takes block s / 2, elements 16 (s % 2) + [0, 16) in order.
struct TileQ8_0 {
  static constexpr int kElems = 32, kBytes = 34;
  static constexpr int base0(int s) { return 16 * s; }
  static constexpr int base1(int s) { return 16 * s + 8; }
  struct Row {
    const uint8_t* blocks;  // the sub-step's first block
    float d[2];
  };
  __device__ static Row prepare(const uint8_t* big, int sub) {
    Row row;
    row.blocks = big + 2 * sub * kBytes;
    row.d[0] = half_at_aligned(row.blocks);
    row.d[1] = half_at_aligned(row.blocks + kBytes);
    return row;
  }
  __device__ static void step(const Row& row, int s, int t, float (&lo)[2], float (&hi)[2]) {
    const uint8_t* qs = row.blocks + (s / 2) * kBytes + 2 + 16 * (s % 2) + 2 * t;
    const float d = row.d[s / 2];
    // Flipping the sign bit of each byte makes it q + 128, unsigned.
    const uint32_t a = u16_at(qs) ^ 0x8080u, b = u16_at(qs + 8) ^ 0x8080u;
    constexpr float kBias = kMagic + 128.0f;
    lo[0] = __fmul_rn(d, __fsub_rn(magic_byte<0>(a), kBias));
    lo[1] = __fmul_rn(d, __fsub_rn(magic_byte<1>(a), kBias));
    hi[0] = __fmul_rn(d, __fsub_rn(magic_byte<0>(b), kBias));
    hi[1] = __fmul_rn(d, __fsub_rn(magic_byte<1>(b), kBias));
  }
};

// Q4_0 / Q4_1: d, [m], qs[16]; byte j holds element j (low nibble) and j + 16 (high nibble).
// Values d (q - 8) + 0.0f and d q + m: d q is exact, so one fma each. Step s takes block s / 2,
// bytes 8 (s % 2) + [0, 8): elements 8 (s % 2) + [0, 8) (low) and 16 + 8 (s % 2) + [0, 8) (high).
template <bool kHasMin>
struct TileQ4 {
  static constexpr int kElems = 32, kBytes = kHasMin ? 20 : 18;
  static constexpr int base0(int s) { return 32 * (s / 2) + 8 * (s % 2); }
  static constexpr int base1(int s) { return base0(s) + 16; }
  struct Row {
    const uint8_t* blocks;
    float d[2], m[2];
  };
  __device__ static Row prepare(const uint8_t* big, int sub) {
    Row row;
    row.blocks = big + 2 * sub * kBytes;
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      row.d[b] = half_at_aligned(row.blocks + b * kBytes);
      // The reference adds +0.0f to Q4_0's products (it shares the code with Q4_1).
      row.m[b] = kHasMin ? half_at_aligned(row.blocks + b * kBytes + 2) : 0.0f;
    }
    return row;
  }
  __device__ static void step(const Row& row, int s, int t, float (&lo)[2], float (&hi)[2]) {
    const uint8_t* qs = row.blocks + (s / 2) * kBytes + (kHasMin ? 4 : 2) + 8 * (s % 2) + 2 * t;
    const float d = row.d[s / 2], m = row.m[s / 2];
    const uint32_t v = u16_at(qs);
    const uint32_t low = v & 0x0F0Fu, high = (v >> 4) & 0x0F0Fu;
    constexpr float kBias = kMagic + (kHasMin ? 0.0f : 8.0f);
    lo[0] = __fmaf_rn(d, __fsub_rn(magic_byte<0>(low), kBias), m);
    lo[1] = __fmaf_rn(d, __fsub_rn(magic_byte<1>(low), kBias), m);
    hi[0] = __fmaf_rn(d, __fsub_rn(magic_byte<0>(high), kBias), m);
    hi[1] = __fmaf_rn(d, __fsub_rn(magic_byte<1>(high), kBias), m);
  }
};

// Q4_K: d, dmin, scales[12], qs[128]. Sub-step c is qs chunk c (32 bytes): low nibbles are
// sub-block 2c (elements 64c + j), high nibbles sub-block 2c + 1 (64c + 32 + j). Value
// dl q - ml with dl = d sc, ml = dmin m (exact products of an fp16 and a 6-bit integer); dl q has
// at most 11 + 6 + 4 significant bits, so the subtraction folds into one fma.
struct TileQ4_K {
  static constexpr int kElems = 256, kBytes = 144;
  static constexpr int base0(int s) { return 8 * s; }
  static constexpr int base1(int s) { return 32 + 8 * s; }
  struct Row {
    const uint8_t* qs;   // the chunk's 32 bytes
    float dl[2], ml[2];  // sub-blocks 2c, 2c + 1
  };
  __device__ static Row prepare(const uint8_t* big, int sub) {
    Row row;
    const float d = half_at_aligned(big), dmin = half_at_aligned(big + 2);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int scale, min;
      k4_scale_min(2 * sub + i, big + 4, &scale, &min);
      row.dl[i] = __fmul_rn(d, float(scale));
      row.ml[i] = __fmul_rn(dmin, float(min));
    }
    row.qs = big + 16 + 32 * sub;
    return row;
  }
  __device__ static void step(const Row& row, int s, int t, float (&lo)[2], float (&hi)[2]) {
    const uint32_t v = u16_at(row.qs + 8 * s + 2 * t);
    const uint32_t low = v & 0x0F0Fu, high = (v >> 4) & 0x0F0Fu;
    lo[0] = __fmaf_rn(row.dl[0], __fsub_rn(magic_byte<0>(low), kMagic), -row.ml[0]);
    lo[1] = __fmaf_rn(row.dl[0], __fsub_rn(magic_byte<1>(low), kMagic), -row.ml[0]);
    hi[0] = __fmaf_rn(row.dl[1], __fsub_rn(magic_byte<0>(high), kMagic), -row.ml[1]);
    hi[1] = __fmaf_rn(row.dl[1], __fsub_rn(magic_byte<1>(high), kMagic), -row.ml[1]);
  }
};

// Q6_K: ql[128], qh[64], int8 scales[16], d. Element 128h + 32p + l (l < 32) takes the low (p < 2)
// or high nibble of ql[64h + l + 32 (p & 1)], bits 2p, 2p+1 of qh[32h + l], minus 32, times
// d sc[8h + l/16 + 2p]. Sub-step 2h + pp covers p = 2pp (elements [0, 32) of the sub-step) and
// p = 2pp + 1 ([32, 64)); step s takes l = 8s + [0, 8) of both. Value (d sc) q, two fp32 products
// as the reference (the second is exact: at most 11 + 7 + 5 significant bits).
struct TileQ6_K {
  static constexpr int kElems = 256, kBytes = 210;
  static constexpr int base0(int s) { return 8 * s; }
  static constexpr int base1(int s) { return 32 + 8 * s; }
  struct Row {
    const uint8_t* ql;  // ql + 64h: p = 2pp at +l, p = 2pp + 1 at +32 + l
    const uint8_t* qh;  // qh + 32h
    int shift;          // 4 pp: the ql nibble, and the qh bits of p = 2pp
    float scale[2][2];  // [p - 2pp][l / 16]: d sc
  };
  __device__ static Row prepare(const uint8_t* big, int sub) {
    Row row;
    const int h = sub >> 1, pp = sub & 1;
    const float d = half_at_aligned(big + 208);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int8_t sc = static_cast<int8_t>(big[192 + 8 * h + j + 2 * (2 * pp + i)]);
        row.scale[i][j] = __fmul_rn(d, float(sc));
      }
    }
    row.ql = big + 64 * h;
    row.qh = big + 128 + 32 * h;
    row.shift = 4 * pp;
    return row;
  }
  __device__ static void step(const Row& row, int s, int t, float (&lo)[2], float (&hi)[2]) {
    const int l = 8 * s + 2 * t;
    const uint32_t a = u16_at(row.ql + l), b = u16_at(row.ql + 32 + l), h = u16_at(row.qh + l);
    const uint32_t qa = ((a >> row.shift) & 0x0F0Fu) | ((h >> row.shift) & 0x0303u) << 4;
    const uint32_t qb = ((b >> row.shift) & 0x0F0Fu) | ((h >> (row.shift + 2)) & 0x0303u) << 4;
    constexpr float kBias = kMagic + 32.0f;
    const float sa = row.scale[0][s / 2], sb = row.scale[1][s / 2];
    lo[0] = __fmul_rn(sa, __fsub_rn(magic_byte<0>(qa), kBias));
    lo[1] = __fmul_rn(sa, __fsub_rn(magic_byte<1>(qa), kBias));
    hi[0] = __fmul_rn(sb, __fsub_rn(magic_byte<0>(qb), kBias));
    hi[1] = __fmul_rn(sb, __fsub_rn(magic_byte<1>(qb), kBias));
  }
};

// ---- tile geometry ------------------------------------------------------------------------------

// Where x's 8-element chunk c (0..7) of a sub-step sits in shared memory: mma step s's two chunks
// (base0(s) / 8, base1(s) / 8) at positions 2s and 2s + 1, so each step's k16 is one contiguous
// 32-byte span of the row (what wgmma's K-major B descriptor reads; ldmatrix could take any).
template <typename D>
__host__ __device__ constexpr int chunk_position(int c) {
  for (int s = 0; s < 4; ++s) {
    if (D::base0(s) / 8 == c) return 2 * s;
    if (D::base1(s) / 8 == c) return 2 * s + 1;
  }
  return -1;
}

template <typename D>
constexpr bool chunks_form_a_permutation() {
  int seen = 0;
  for (int c = 0; c < 8; ++c) {
    const int p = chunk_position<D>(c);
    if (p < 0 || (seen >> p) & 1) return false;
    seen |= 1 << p;
  }
  return seen == 0xFF;
}
static_assert(chunks_form_a_permutation<TileQ8_0>() && chunks_form_a_permutation<TileQ4<false>>() &&
                  chunks_form_a_permutation<TileQ4<true>>() &&
                  chunks_form_a_permutation<TileQ4_K>() && chunks_form_a_permutation<TileQ6_K>(),
              "every mma step takes two distinct 8-element chunks of the sub-step");

// kWgmma: the warps form warpgroups that multiply with wgmma.mma_async (A = the decoded fragments
// in registers, B = the x buffer through a shared-memory descriptor) instead of mma.sync.
template <typename D, int kRows, int kWarps, int kBN, bool kWgmma>
struct Tile {
  static_assert(kRows == 8 || kRows == 16 || kRows == 32, "8, 16 or 32 weight rows per warp");
  static_assert(kBN % 16 == 0, "ldmatrix.x4 loads two n8 tiles");
  static_assert(!kWgmma || (kWarps % 4 == 0 && ((kRows == 32 && (kBN == 64 || kBN == 128)) ||
                                                (kRows == 16 && (kBN == 128 || kBN == 256)))),
                "wgmma tiles: warpgroups of two m64 tiles by n64 or n128, or one m64 tile by n128 "
                "or n256");
  // Blocks per SM the registers are budgeted for: 16x8w n128 (64 accumulators a thread) fits two,
  // so four warps a scheduler hide more of the decode's latencies.
  static constexpr int kMinBlocks = kWgmma && kRows == 16 && kBN == 128 ? 2 : 1;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kBM = kRows * kWarps;
  static constexpr int kMTiles = kRows == 32 ? 2 : 1;    // m16 tiles per warp
  static constexpr int kRowHalves = kRows == 8 ? 1 : 2;  // rows g and g + 8, or g only
  static constexpr int kNTiles = kBN / 8;
  // Sub-steps whose copies are in flight ahead of the one computed (wgmma too: its reads of a
  // sub-step's x are waited for at the end of that sub-step).
  // x ring buffers: 4, or 3 where that lets two blocks share an SM.
  static constexpr int kXStages = kMinBlocks == 2 ? 3 : kMaxXStages;
  static constexpr int kPrefetch = kXStages - 1;
  // Bytes of one row's big step; the slot holds its 16-byte aligned cover (up to 15 bytes before
  // and after), an odd number of chunks so the 8 rows of an mma tile start in 8 different
  // 4-bank groups.
  static constexpr int kStepBytes = kBigK / D::kElems * D::kBytes;
  static constexpr int kSlotChunks = ((kStepBytes + 15 + 15) / 16) | 1;
  static constexpr int kSlotBytes = 16 * kSlotChunks;
  static constexpr int kRawBytes = kBM * kSlotBytes;  // one weight ring buffer
  // cp.async copies per thread. Weights: 4 threads per row, kRowsPerPass rows per pass, each
  // thread kChunksPerThread chunks of a row; x: kXCopies rows of a sub-step, one chunk each.
  static constexpr int kRowsPerPass = kThreads / 4;
  static constexpr int kWeightPasses = kBM / kRowsPerPass;
  static constexpr int kChunksPerThread = (kSlotChunks + 3) / 4;
  static constexpr int kXCopies = kBN * 8 / kThreads;
  static_assert(kBM % kRowsPerPass == 0, "weights: whole passes");
  static_assert(kBN * 8 % kThreads == 0 && kThreads % 64 == 0, "x copies: whole passes");
  static constexpr int kXBytes = kBN * kXRowBytes;  // one x ring buffer
  // x buffers 1024-byte aligned: the 128-byte swizzle repeats every 8 rows (wgmma's descriptors
  // assume the pattern starts at such a boundary).
  static constexpr int kXOffset = (2 * kRawBytes + 1023) / 1024 * 1024;
  static constexpr int kSmem = kXOffset + kXStages * kXBytes;
  static_assert(kSmem <= 227 * 1024, "fits an H100 SM");

  // The tile row (0..kBM-1) of this thread's row g + 8 half of m16 tile mt. mma.sync: warp w owns
  // rows [kRows w, kRows (w + 1)). wgmma: warpgroup q owns 64 kMTiles rows as kMTiles m64 tiles,
  // and warp w % 4 of it rows 16 (w % 4) .. of each (wgmma's A fragment layout).
  __device__ static int local_row(int warp, int mt, int half, int g) {
    if constexpr (kWgmma)
      return 64 * kMTiles * (warp / 4) + 64 * mt + 16 * (warp % 4) + 8 * half + g;
    return warp * kRows + 16 * mt + 8 * half + g;
  }
};

// ---- wgmma (cp.async, ldmatrix, mma.sync and pack2: tile_ptx.cuh) -------------------------------

// wgmma: a warpgroup's d (64 x N, fp32) += A (64 x 16, registers: each warp's 16 rows in the
// m16n8k16 A layout) B (16 x N from shared memory, K-major: x rows). d[j][i] is the m16n8k16 C
// layout of columns 8j..8j+7 (c0..c3 in tile_ptx.cuh), so the epilogue is the same as mma.sync's.
//   b_desc: the descriptor of B (make_b_descriptor)
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4],
                                         uint64_t b_desc);

// One specialization per (T, N), written once as a macro: the asm text must be a literal, and the
// N / 2 accumulator operands "+f"(d[j][i]) come first (numbered %0 on, in the order of the register
// list), then A's four registers, B's descriptor and the scale-d predicate's value.
#define ROSE_WGMMA_D4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define ROSE_WGMMA_D32(j)                                                             \
  ROSE_WGMMA_D4(j), ROSE_WGMMA_D4(j + 1), ROSE_WGMMA_D4(j + 2), ROSE_WGMMA_D4(j + 3), \
      ROSE_WGMMA_D4(j + 4), ROSE_WGMMA_D4(j + 5), ROSE_WGMMA_D4(j + 6), ROSE_WGMMA_D4(j + 7)
#define ROSE_WGMMA_REGS_32                                                 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define ROSE_WGMMA_REGS_64                                                           \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define ROSE_WGMMA_REGS_128                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                       \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "             \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "             \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "             \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "             \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "             \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
// T, its PTX type name, N, the d register list, the operand numbers of A's registers, B's
// descriptor and the predicate's value, then the accumulator operands.
#define ROSE_WGMMA_RS(T, PTX_TYPE, N, D_REGS, A0, A1, A2, A3, DESC, PRED, ...)               \
  template <>                                                                                \
  __device__ __forceinline__ void wgmma_rs<T, N>(float(&d)[N / 8][4], const uint32_t(&a)[4], \
                                                 uint64_t b_desc) {                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #PRED                                  \
                 ", 0;\n"                                                                    \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TYPE "." PTX_TYPE     \
                 " "                                                                         \
                 "{" D_REGS "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #DESC           \
                 ", p, 1, 1, 0;\n}\n"                                                        \
                 : __VA_ARGS__                                                               \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));         \
  }

ROSE_WGMMA_RS(__nv_bfloat16, "bf16", 64, ROSE_WGMMA_REGS_32, 32, 33, 34, 35, 36, 37,
              ROSE_WGMMA_D32(0))
ROSE_WGMMA_RS(__half, "f16", 64, ROSE_WGMMA_REGS_32, 32, 33, 34, 35, 36, 37, ROSE_WGMMA_D32(0))
ROSE_WGMMA_RS(__nv_bfloat16, "bf16", 128, ROSE_WGMMA_REGS_64, 64, 65, 66, 67, 68, 69,
              ROSE_WGMMA_D32(0), ROSE_WGMMA_D32(8))
ROSE_WGMMA_RS(__half, "f16", 128, ROSE_WGMMA_REGS_64, 64, 65, 66, 67, 68, 69, ROSE_WGMMA_D32(0),
              ROSE_WGMMA_D32(8))
ROSE_WGMMA_RS(__nv_bfloat16, "bf16", 256, ROSE_WGMMA_REGS_128, 128, 129, 130, 131, 132, 133,
              ROSE_WGMMA_D32(0), ROSE_WGMMA_D32(8), ROSE_WGMMA_D32(16), ROSE_WGMMA_D32(24))
ROSE_WGMMA_RS(__half, "f16", 256, ROSE_WGMMA_REGS_128, 128, 129, 130, 131, 132, 133,
              ROSE_WGMMA_D32(0), ROSE_WGMMA_D32(8), ROSE_WGMMA_D32(16), ROSE_WGMMA_D32(24))

#undef ROSE_WGMMA_RS
#undef ROSE_WGMMA_REGS_128
#undef ROSE_WGMMA_REGS_64
#undef ROSE_WGMMA_REGS_32
#undef ROSE_WGMMA_D32
#undef ROSE_WGMMA_D4

// The descriptor of an x buffer for wgmma: K-major rows of 128 bytes (one sub-step), 16-byte
// chunks swizzled by the row within 8-row (1024-byte) groups, i.e. the 128-byte swizzle mode;
// the 8-row groups follow each other (stride 1024 bytes). Bits (PTX ISA "matrix descriptor"):
// 0-13 start address / 16, 16-29 leading offset / 16 (unused by swizzled K-major layouts), 32-45
// stride offset / 16, 62-63 swizzle mode (1: 128 bytes). Step s of the sub-step starts 32 s bytes
// into the row (its chunks' positions 2s, 2s + 1).
__device__ __forceinline__ uint64_t make_b_descriptor(uint32_t buffer_address) {
  return uint64_t((buffer_address >> 4) & 0x3FFF) | uint64_t(1) << 16 | uint64_t(1024 >> 4) << 32 |
         uint64_t(1) << 62;
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accesses of v across the wgmma waits (the wgmma asm statements
// name the accumulators, but a plain read after a wait has no dependence on the wait).
__device__ __forceinline__ void register_fence(float& v) { asm volatile("" : "+f"(v)::"memory"); }

// Makes this thread's completed cp.async writes visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- the kernel ---------------------------------------------------------------------------------

// W consecutive floats at p (16-byte aligned when W == 4) through L2 (__ldcg): other blocks wrote
// them, and a stale L1 line must not answer.
template <int W>
__device__ __forceinline__ void load_cg(const float* p, float (&v)[W]) {
  if constexpr (W == 4) {
    const float4 t = __ldcg(reinterpret_cast<const float4*>(p));
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    v[0] = __ldcg(p);
  }
}

// Split-K's sum: outputs (n0 + r, m0 + c) for r < tile_rows, c < tile_cols, each
// p0 + p1 + ... + p(splits - 1) added in that order, written by store(row, o, value).
//   partials: (splits, n, out) fp32, slice z at z * slice_elems
// The loads are what it waits on (L2 latency, at the end of the kernel when nothing else hides
// it), so each thread issues kGroups groups of W columns x up to kZ slices before adding: a first
// version that loaded and added one partial at a time made a 64 x 64 tile's sum cost ~20 us.
template <int W, int kThreads, typename Store>
__device__ __forceinline__ void add_partials(const float* partials, int64_t slice_elems, int splits,
                                             int n0, int m0, int out, int tile_rows, int tile_cols,
                                             const Store& store) {
  constexpr int kGroups = 4, kZ = 4;
  const int vec_cols = tile_cols / W, groups = tile_rows * vec_cols;
  for (int first = int(threadIdx.x); first < groups; first += kGroups * kThreads) {
    float sum[kGroups][W] = {};
    int row[kGroups], col[kGroups];
    bool live[kGroups];
#pragma unroll
    for (int u = 0; u < kGroups; ++u) {
      const int group = first + u * kThreads;
      live[u] = group < groups;
      row[u] = n0 + (live[u] ? group / vec_cols : 0);
      col[u] = m0 + W * (live[u] ? group % vec_cols : 0);
      if (live[u]) load_cg<W>(partials + int64_t(row[u]) * out + col[u], sum[u]);
    }
    for (int z = 1; z < splits; z += kZ) {
      float v[kGroups][kZ][W] = {};
#pragma unroll
      for (int u = 0; u < kGroups; ++u) {
#pragma unroll
        for (int q = 0; q < kZ; ++q) {
          if (live[u] && z + q < splits)
            load_cg<W>(partials + (z + q) * slice_elems + int64_t(row[u]) * out + col[u], v[u][q]);
        }
      }
#pragma unroll
      for (int u = 0; u < kGroups; ++u) {
#pragma unroll
        for (int q = 0; q < kZ; ++q) {
#pragma unroll
          for (int w = 0; w < W; ++w) {
            if (live[u] && z + q < splits) sum[u][w] = __fadd_rn(sum[u][w], v[u][q][w]);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kGroups; ++u) {
#pragma unroll
      for (int w = 0; w < W; ++w) {
        if (live[u]) store(row[u], col[u] + w, sum[u][w]);
      }
    }
  }
}

// x (n, in) in T, 16-byte aligned; w (out, in) as out rows of in / kElems blocks, 16-byte aligned;
// y (n, y_stride) fp32 when f32_out else T. Grid: (ceil(n / kBN), ceil(out / kBM), S): blockIdx.z
// is the k slice, big steps [z B / S, (z + 1) B / S) of the B = ceil(in / 256); the tiles that
// share a weight tile run side by side and read it from L2. With S > 1:
//   counters: (gridDim.x * gridDim.y,) int32, zero at entry and left zero: tile (x, y)'s arrivals
//   partials: (S, n, out) fp32, each slice's sums before the adds
// and the last block of a tile to arrive adds the S partials in slice order and writes y. Dynamic
// shared memory: Tile::kSmem = 2 weight buffers (kBM, kSlotBytes), then from kXOffset
// Tile::kXStages x buffers (kBN, 128 bytes).
// kPipelined (wgmma tiles only): each warpgroup decodes sub-step j + 1 while its wgmmas of j run;
// false: decode, multiply, wait (the 16x8w n128 tile, and every wgmma tile with
// ROSEINFER_GEMM_QUANT_PIPELINE=0).
template <typename D, typename T, int kRows, int kWarps, int kBN, bool kWgmma, bool kPipelined>
__global__ void __launch_bounds__(kWarps * 32, (Tile<D, kRows, kWarps, kBN, kWgmma>::kMinBlocks))
    gemm_quant_kernel(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                      bool f32_out, int32_t* counters, float* partials) {
  using S = Tile<D, kRows, kWarps, kBN, kWgmma>;
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* const raw_ring = smem;
  uint8_t* const x_ring = smem + S::kXOffset;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int n0 = int(blockIdx.x) * kBN, m0 = int(blockIdx.y) * S::kBM;
  const int64_t row_bytes = int64_t(in / D::kElems) * D::kBytes;
  const int sub_steps = (in + kSubK - 1) / kSubK;
  // This block's k slice: sub-steps [j_begin, j_end), whole big steps (the last may end past `in`
  // for a 32-element type; sub_steps bounds it). S <= B, so no slice is empty.
  constexpr int kSubPerBig = kBigK / kSubK;
  const int slice = int(blockIdx.z), splits = int(gridDim.z);
  const int bigs = (in + kBigK - 1) / kBigK;
  const int j_begin = slice * bigs / splits * kSubPerBig;
  const int j_end = std::min(sub_steps, (slice + 1) * bigs / splits * kSubPerBig);
  if constexpr (kWgmma) {
    // The descriptors' swizzle assumes 1024-byte aligned x buffers (kXOffset is a multiple).
    if (shared_address(smem) % 1024 != 0) __trap();
  }

  // The copies are issued from precomputed per-thread addresses with fully unrolled loops of
  // compile-time length: the first version recomputed 64-bit addresses and a chunk permutation
  // per copy in generic loops, and its k loop grew to ~1200 instructions (17 KB) for 8 mma, about
  // 3x slower than this (the copy code dominated the issue slots and the instruction cache).
  //
  // Weights: 4 threads per row, thread threadIdx.x copies chunks threadIdx.x % 4 + 4k of tile
  // rows threadIdx.x / 4 + p kThreads / 4 (a warp's copy covers 8 rows x 64 contiguous bytes; the
  // row pointers are a stride apart, so few registers hold them). Chunk c covers
  // [align16(step start) + 16c, +16): its bytes past the row's big step are zero-filled (never
  // decoded); rows past `out` are not copied (their garbage only reaches outputs never stored).
  const int w_row = int(threadIdx.x) / 4, w_chunk = int(threadIdx.x) % 4;
  const uint8_t* const w_rows = w + int64_t(m0 + w_row) * row_bytes;
  const auto issue_weights = [&](int big) {
    uint8_t* buffer = raw_ring + (big & 1) * S::kRawBytes + w_row * S::kSlotBytes + 16 * w_chunk;
    const int64_t step_begin = int64_t(big) * S::kStepBytes;
    const int64_t step_end = std::min<int64_t>(step_begin + S::kStepBytes, row_bytes);
#pragma unroll
    for (int p = 0; p < S::kWeightPasses; ++p) {
      if (m0 + w_row + p * S::kRowsPerPass >= out) break;
      const uint8_t* row = w_rows + int64_t(p) * S::kRowsPerPass * row_bytes;
      const uint8_t* first = reinterpret_cast<const uint8_t*>(
          reinterpret_cast<uintptr_t>(row + step_begin) & ~uintptr_t(15));
      const int64_t left = (row + step_end) - first - 16 * w_chunk;  // bytes from this chunk on
#pragma unroll
      for (int k = 0; k < S::kChunksPerThread; ++k) {
        const int c = w_chunk + 4 * k;
        if (S::kSlotChunks % 4 != 0 && c >= S::kSlotChunks) break;
        if (left - 64 * k > 0) {
          cp_async16(buffer + p * S::kRowsPerPass * S::kSlotBytes + 64 * k, first + 16 * c,
                     int(std::min<int64_t>(16, left - 64 * k)));
        }
      }
    }
  };
  // x: copy q of this thread is chunk threadIdx.x % 8 of tile row threadIdx.x / 8 + q kThreads / 8,
  // stored at position chunk_position(chunk) ^ (row % 8) (the same for every q: kThreads / 8 is a
  // multiple of 8). Columns past `in` are zero-filled (the tail steps multiply them by zero
  // weights); rows past n are not copied (garbage there only reaches outputs never stored).
  constexpr int kXRowsPerPass = S::kThreads / 8;
  const int x_chunk = int(threadIdx.x) % 8, x_row = int(threadIdx.x) / 8;
  const int x_dst = x_row * kXRowBytes + ((chunk_position<D>(x_chunk) ^ (x_row & 7)) << 4);
  const T* const x_src = x + int64_t(n0 + x_row) * in + 8 * x_chunk;
  const auto issue_x = [&](int j) {
    uint8_t* buffer = x_ring + (j % S::kXStages) * S::kXBytes + x_dst;
    const bool in_row = kSubK * j + 8 * x_chunk < in;
#pragma unroll
    for (int q = 0; q < S::kXCopies; ++q) {
      if (n0 + x_row + q * kXRowsPerPass >= n) break;
      const T* src = x_src + int64_t(q) * kXRowsPerPass * in + kSubK * j;
      cp_async16(buffer + q * kXRowsPerPass * kXRowBytes, in_row ? src : x, in_row ? 16 : 0);
    }
  };

  // The weights are constants of the run: the first big step's copy goes out before the PDL wait,
  // overlapping the previous kernel's tail; x (its output) is read only after the wait.
  issue_weights(j_begin / kSubPerBig);
  pdl_wait();
  pdl_launch_dependents();
#pragma unroll
  for (int p = 0; p < S::kPrefetch; ++p) {
    const int j = j_begin + p;
    if (j < j_end) {
      issue_x(j);
      if (p > 0 && j % kSubPerBig == 0) issue_weights(j / kSubPerBig);
    }
    cp_async_commit();  // the slice's group p (the first also holds its first big step)
  }

  // This thread's weight rows (S::local_row) and (row start) mod 16.
  int row_misalign[S::kMTiles][S::kRowHalves];
#pragma unroll
  for (int mt = 0; mt < S::kMTiles; ++mt) {
#pragma unroll
    for (int hr = 0; hr < S::kRowHalves; ++hr) {
      const int r = S::local_row(warp, mt, hr, g);
      row_misalign[mt][hr] = int((int64_t(std::min(m0 + r, out - 1)) * row_bytes) & 15);
    }
  }
  // ldmatrix addressing (mma.sync): lane l gives row (l / 8 >> 1) * 8 + l % 8 of an n16 pair's x
  // rows, at the step's position 2s (matrices 0, 2: b0) or 2s + 1 (1, 3: b1), swizzled by l % 8.
  const int ld_matrix = lane >> 3, ld_row = (ld_matrix >> 1) * 8 + (lane & 7);
  uint32_t ld_offset[4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    ld_offset[s] = uint32_t((((2 * s + (ld_matrix & 1)) ^ (lane & 7)) << 4) + ld_row * kXRowBytes);
  }

  float acc[S::kMTiles][S::kNTiles][4];
#pragma unroll
  for (int mt = 0; mt < S::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < S::kNTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    }
  }

  // The copies of sub-step `next` (x, and the weights' big step when it starts one) as the next
  // cp.async group, empty past the slice: one group per call either way.
  const auto issue_sub_step = [&](int next) {
    if (next < j_end) {
      issue_x(next);
      if (next % kSubPerBig == 0) issue_weights(next / kSubPerBig);
    }
    cp_async_commit();
  };
  // Each weight row of this thread at sub-step j, ready for D::step; and the mma steps of the
  // sub-step inside `in` (steps past it -- only in a 32-element type's last sub-step, when
  // in % 64 == 32 -- still run, with zero weights against zero-filled x, so every sub-step issues
  // the same instructions, with no branch around an mma: a wgmma under a branch is serialized by
  // ptxas).
  using Rows = typename D::Row[S::kMTiles][S::kRowHalves];
  const auto prepare_rows = [&](int j, Rows& rows) {
    const int big = j / kSubPerBig, sub = j % kSubPerBig;
    const uint8_t* weights = raw_ring + (big & 1) * S::kRawBytes;
    const int big_misalign = int((int64_t(big) * S::kStepBytes) & 15);
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt) {
#pragma unroll
      for (int hr = 0; hr < S::kRowHalves; ++hr) {
        const int r = S::local_row(warp, mt, hr, g);
        rows[mt][hr] = D::prepare(
            weights + r * S::kSlotBytes + ((row_misalign[mt][hr] + big_misalign) & 15), sub);
      }
    }
    return D::kElems == 256 ? 4 : std::min(4, (in - kSubK * j) / 16);
  };
  // The A fragments of mma step s (16 k values) of this thread's rows.
  using Fragments = uint32_t[S::kMTiles][4];
  const auto decode_step = [&](const Rows& rows, int s, int steps, Fragments& a) {
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt) {
      a[mt][0] = a[mt][1] = a[mt][2] = a[mt][3] = 0u;  // rows g + 8 of an 8-row warp: zeros
      if (D::kElems == 256 || s < steps) {
        float lo[2], hi[2];
        D::step(rows[mt][0], s, t, lo, hi);
        a[mt][0] = pack2<T>(lo[0], lo[1]);
        a[mt][2] = pack2<T>(hi[0], hi[1]);
        if constexpr (S::kRowHalves == 2) {
          D::step(rows[mt][1], s, t, lo, hi);
          a[mt][1] = pack2<T>(lo[0], lo[1]);
          a[mt][3] = pack2<T>(hi[0], hi[1]);
        }
      }
    }
  };

  if constexpr (!kWgmma) {
    for (int j = j_begin; j < j_end; ++j) {
      cp_async_wait<S::kPrefetch - 1>();  // this thread's copies of sub-step j have landed
      // Everyone's copies have landed, and the buffers refilled below are consumed.
      __syncthreads();
      issue_sub_step(j + S::kPrefetch);  // group j + kPrefetch
      Rows rows;
      const int steps = prepare_rows(j, rows);
      const uint32_t x_base = shared_address(x_ring + (j % S::kXStages) * S::kXBytes);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        Fragments a;
        decode_step(rows, s, steps, a);
#pragma unroll
        for (int np = 0; np < kBN / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4(b, x_base + ld_offset[s] + np * 16 * kXRowBytes);
#pragma unroll
          for (int mt = 0; mt < S::kMTiles; ++mt) {
            mma_16816<T>(acc[mt][2 * np], a[mt], b[0], b[1]);
            mma_16816<T>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
  } else if constexpr (!kPipelined) {
    // wgmma, in turns: a warpgroup decodes the whole sub-step, then issues its wgmmas and waits;
    // only the block's two warpgroups overlap one's decode with the other's wgmmas.
    for (int j = j_begin; j < j_end; ++j) {
      cp_async_wait<S::kPrefetch - 1>();
      fence_proxy_async();
      __syncthreads();
      issue_sub_step(j + S::kPrefetch);
      Rows rows;
      const int steps = prepare_rows(j, rows);
      Fragments a_all[4];
#pragma unroll
      for (int s = 0; s < 4; ++s) decode_step(rows, s, steps, a_all[s]);
      const uint64_t desc =
          make_b_descriptor(shared_address(x_ring + (j % S::kXStages) * S::kXBytes));
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt)
          wgmma_rs<T, kBN>(acc[mt], a_all[s][mt], desc + uint64_t(2 * s));
      }
      wgmma_commit();
      wgmma_wait<0>();
    }
  } else {
    // wgmma, software-pipelined: a warpgroup decodes sub-step j + 1 into one set of A registers
    // while its wgmmas of sub-step j read the other set, so the decode (the kernel's bound) runs
    // beside the tensor cores instead of between their turns. The two sets alternate, named
    // statically (the loop is unrolled by two) so they stay in registers.
    const auto decode_sub_step = [&](int j, Fragments(&a_all)[4]) {
      Rows rows;
      const int steps = prepare_rows(j, rows);
#pragma unroll
      for (int s = 0; s < 4; ++s) decode_step(rows, s, steps, a_all[s]);
    };
    // Iteration j: multiply sub-step j (decoded in a_now), and meanwhile wait for sub-step j + 1's
    // copies (group j + 1: groups up to j + kPrefetch - 1 are committed), refill the x buffer of
    // sub-step j - 1 (every warpgroup has waited for its wgmmas before the barrier) and decode
    // sub-step j + 1 into a_next. Past the slice's end that decode reads stale shared memory
    // whose values are never multiplied, so no branch surrounds the wgmmas.
    const auto iteration = [&](int j, Fragments(&a_now)[4], Fragments(&a_next)[4]) {
      const uint64_t desc =
          make_b_descriptor(shared_address(x_ring + (j % S::kXStages) * S::kXBytes));
      wgmma_fence();  // a_now (and, the first time, the accumulators) were written by other code
#pragma unroll
      for (int s = 0; s < 4; ++s) {
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt)
          wgmma_rs<T, kBN>(acc[mt], a_now[s][mt], desc + uint64_t(2 * s));  // + 32 s bytes
      }
      wgmma_commit();
      cp_async_wait<S::kPrefetch - 2>();  // this thread's copies of sub-step j + 1 have landed
      fence_proxy_async();                // ... and are visible to wgmma's reads
      __syncthreads();
      issue_sub_step(j + S::kPrefetch);  // into sub-step j - 1's buffers
      decode_sub_step(j + 1, a_next);
      wgmma_wait<0>();
    };
    Fragments a_even[4], a_odd[4];
    cp_async_wait<S::kPrefetch - 1>();  // sub-step j_begin's copies
    fence_proxy_async();
    __syncthreads();
    decode_sub_step(j_begin, a_even);
    int j = j_begin;
    for (; j + 1 < j_end; j += 2) {
      iteration(j, a_even, a_odd);
      iteration(j + 1, a_odd, a_even);
    }
    if (j < j_end) iteration(j, a_even, a_odd);
  }
  cp_async_wait<0>();  // only empty groups remain; nothing in flight at exit
  if constexpr (kWgmma) {
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) register_fence(acc[mt][nt][i]);
      }
    }
  }

  // acc[mt][nt][i]: tile row local_row(warp, mt, i / 2, g) = output column m0 + that, activation
  // row n0 + 8 nt + 2t + (i % 2) = output row.
  const auto store = [&](int row, int o, float value) {
    const int64_t at = int64_t(row) * y_stride + o;
    if (f32_out) {
      static_cast<float*>(y)[at] = value;
    } else {
      static_cast<T*>(y)[at] = from_float<T>(value);
    }
  };
  // fn(row, o, value) for each of this thread's accumulators inside the (n, out) output.
  const auto for_each_output = [&](auto&& fn) {
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < S::kNTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (S::kRowHalves == 1 && i >= 2) continue;
          const int o = m0 + S::local_row(warp, mt, i / 2, g);
          const int row = n0 + 8 * nt + 2 * t + (i % 2);
          if (o >= out || row >= n) continue;
          fn(row, o, acc[mt][nt][i]);
        }
      }
    }
  };
  if (splits == 1) {
    for_each_output(store);
    return;
  }

  // Split-K: this slice's sums go to its partials; the tile's last block to arrive (counted after
  // a fence, as kernels/cuda/sampling.cu's split rows) adds all S in slice order, whichever block
  // that is, so the sum's order never depends on timing or on the tile shape.
  const int64_t slice_elems = int64_t(n) * out;
  for_each_output([&](int row, int o, float value) {
    partials[slice * slice_elems + int64_t(row) * out + o] = value;
  });
  __shared__ int is_last;
  __threadfence();  // this block's partials are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t* counter = counters + blockIdx.y * gridDim.x + blockIdx.x;
    is_last = atomicAdd(counter, 1) == splits - 1;
    if (is_last) *counter = 0;  // every slice has arrived: ready for the next launch
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // The tile's outputs in row-major order (coalesced; one short loop of code, not one per
  // accumulator register): each is p0 + p1 + ... in slice order, all read back from the partials
  // (this block's own too).
  const int tile_rows = std::min(kBN, n - n0), tile_cols = std::min(int(S::kBM), out - m0);
  if (out % 4 == 0) {  // 16-byte loads: rows of the partials, m0 and tile_cols multiples of 4
    add_partials<4, S::kThreads>(partials, slice_elems, splits, n0, m0, out, tile_rows, tile_cols,
                                 store);
  } else {
    add_partials<1, S::kThreads>(partials, slice_elems, splits, n0, m0, out, tile_rows, tile_cols,
                                 store);
  }
}

// ---- host side ----------------------------------------------------------------------------------

struct TileShape {
  const char* name;
  int rows, warps, bn;  // weight rows per warp, warps, activation rows per tile
  bool wgmma;
};

// The compiled tile shapes (with_shape below instantiates them in this order). The wgmma shapes
// give the same bits as the mma.sync ones (checked by the tests: every shape, every n); they are
// used unless ROSEINFER_GEMM_QUANT_WGMMA=0.
constexpr TileShape kShapes[] = {
    {"8x4w n16", 8, 4, 16, false},          {"16x4w n32", 16, 4, 32, false},
    {"16x4w n64", 16, 4, 64, false},        {"32x4w n64", 32, 4, 64, false},
    {"32x8w n64", 32, 8, 64, false},        {"32x4w n128", 32, 4, 128, false},
    {"32x8w n128", 32, 8, 128, false},      {"wgmma 32x8w n64", 32, 8, 64, true},
    {"wgmma 32x8w n128", 32, 8, 128, true}, {"wgmma 16x8w n256", 16, 8, 256, true},
    {"wgmma 16x8w n128", 16, 8, 128, true},
};
constexpr int kNumShapes = int(sizeof(kShapes) / sizeof(kShapes[0]));
// The split workspace's counters are sized by the smallest tile (gemm_quant_split.h).
constexpr bool tiles_at_least_minimum() {
  for (const TileShape& shape : kShapes) {
    if (shape.rows * shape.warps < kGemmQuantMinTileCols || shape.bn < kGemmQuantMinTileRows)
      return false;
  }
  return true;
}
static_assert(tiles_at_least_minimum(), "every tile at least kGemmQuantMinTileCols x ...Rows");
static_assert(kGemmQuantSliceElems == kBigK, "slices are whole big steps");
constexpr int kNumMmaSyncShapes = 7;
enum Shape {  // kShapes' indices
  k8x4n16,
  k16x4n32,
  k16x4n64,
  k32x4n64,
  k32x8n64,
  k32x4n128,
  k32x8n128,  // mma.sync
  kWg64,
  kWg128,
  kWg256,
  kWg16x128  // wgmma
};

std::atomic<int> forced_tile{-1};
std::atomic<int> forced_splits{0};  // set_gemm_quant_split: 0 = the default

// KernelSwitches::gemm_quant_split_k (ROSEINFER_GEMM_QUANT_SPLIT_K): -1 the rule, else its value
// (0 and 1: no split).
int env_splits() { return kernel_switches().gemm_quant_split_k; }

// SMs of the current device, looked up once per device (the split rule's only device input).
int current_sm_count() {
  static std::mutex mutex;
  static std::map<int, int> counts;
  int device = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = counts.find(device);
  if (found != counts.end()) return found->second;
  int sms = 0;
  ROSE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  counts[device] = sms;
  return sms;
}

bool wgmma_enabled() { return kernel_switches().gemm_quant_wgmma; }
bool pipeline_enabled() { return kernel_switches().gemm_quant_pipeline; }

int available_shapes() { return wgmma_enabled() ? kNumShapes : kNumMmaSyncShapes; }

// Opts the kernel in to its dynamic shared memory (allow_dynamic_shared_memory) and checks that a
// block fits; returns its resident blocks per SM, cached per device (the graph cache runs a step
// eagerly before capturing it, so the first call for a kernel happens outside stream capture).
int prepare_kernel(const void* kernel, int threads, int smem) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, int> resident;
  int device = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = resident.find({device, kernel});
  if (found != resident.end()) return found->second;
  allow_dynamic_shared_memory(kernel, smem);
  int blocks = 0;
  ROSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  if (blocks < 1) cuda_fail("the kernel does not fit on an SM", "gemm_quant", __FILE__, __LINE__);
  resident[{device, kernel}] = blocks;
  return blocks;
}

// The tile shape for a product, from the per-shape sweeps of tests/gpu/bench_gemm_quant.cpp on the
// H100 (llama-1b / llama-8b shapes, five types, all eleven shapes timed for each n; the best shape
// depends on n and out, hardly on `in`, and on the type only above n = 256). The kernel is bound
// by the decode's issue rate, so the rules trade the decode amortized over a tile's activation
// rows (large BN) against the number of tiles that keep the SMs busy (small BM and BN). Above
// n = 256 on large matrices the 32-element types run best on 16x8w n256 (one m64 x n256 wgmma per
// warpgroup) and the K-quants, whose per-row scale decode weighs more there, on 32x8w n128.
// KernelSwitches::gemm_quant_split_tiles false (ROSEINFER_GEMM_QUANT_SPLIT_TILES=0): the tile
// choice as before split-K, whatever the slices.
bool split_tiles_enabled() { return kernel_switches().gemm_quant_split_tiles; }

int choose_tile(bool k_quant, int n, int out, int splits) {
  const int forced = forced_tile.load(std::memory_order_relaxed);
  if (forced >= 0 && forced < kNumShapes) return forced;
  // A split product has slices x its output tiles to spread over the SMs, so from 17 rows it can
  // afford larger activation tiles, which decode each weight for more rows: with out x slices
  // >= 8192 (at least 128 tiles of 64 columns, about one per SM), 16x4w n32 up to 32 rows and
  // the wgmma 16x8w n128 up to 64. Chosen from the tile sweep of results/2026-11-24-splitk
  // (explore1) and checked in final/ against this switch off, Q4_K at n = 32 / 64, us: llama-8b
  // down 58.9 / 74.0 against 117.1 / 110.4, llama-1b down 24.6 / 47.5 against 32.7 / 60.2,
  // llama-8b qkv 31.2 / 44.1 against 31.1 / 49.2; llama-8b o 22.8 / 44.8 against 34.7 / 33.7
  // (worse at 64, where the row rule sends o to the decoded copy anyway). llama-1b qkv and o
  // (out x slices 6144 and 4096) keep the small tiles, which won there.
  if (splits > 1 && split_tiles_enabled() && int64_t(out) * splits >= 8192) {
    if (n > 16 && n <= 32) return k16x4n32;
    if (n > 32 && n <= 64) return wgmma_enabled() ? kWg16x128 : k32x4n64;
  }
  const auto large = [&]() -> Shape {  // n > 256 and out > 4096, or n > 512
    const int n256_tiles = ((out + 127) / 128) * ((n + 255) / 256);
    if (k_quant) return kWg128;
    return n256_tiles >= 100 ? kWg256 : n <= 512 ? kWg128 : kWg16x128;
  };
  Shape shape;
  if (n <= 16) {
    shape = out <= 6144 ? k8x4n16 : k16x4n32;
  } else if (n <= 32) {
    shape = out <= 4096 ? k8x4n16 : out <= 16384 ? k16x4n32 : k32x4n64;
  } else if (n <= 64) {
    shape = out <= 2048    ? k8x4n16
            : out <= 4096  ? k16x4n32
            : out <= 6144  ? k16x4n64
            : out <= 16384 ? k32x4n64
                           : kWg64;
  } else if (n <= 128) {
    shape = out <= 2048    ? k16x4n32
            : out <= 4096  ? k16x4n64
            : out <= 6144  ? k32x4n64
            : out <= 16384 ? kWg16x128
                           : kWg128;
  } else if (n <= 256) {
    shape = out <= 2048 ? k16x4n64 : out <= 4096 ? k32x4n64 : out <= 6144 ? kWg16x128 : kWg128;
    // The 32-element types' wide products from 129 rows: one m64 x n256 tile per warpgroup, since
    // the software pipeline (Q8_0 gate|up at 256 rows, us: llama-1b 41.6 against 60.0 on 32x8w
    // n128, llama-8b 149 against 220; results/2026-12-03-wgmma-pipeline/call1).
    if (pipeline_enabled() && !k_quant && n > 128 && out > 6144 &&
        ((out + 127) / 128) * ((n + 255) / 256) >= 100)
      shape = kWg256;
  } else if (n <= 512 && out <= 4096) {
    shape = kWg16x128;
  } else {
    shape = large();
  }
  if (!wgmma_enabled()) {
    if (shape == kWg64) shape = k32x8n64;
    if (shape == kWg128 || shape == kWg256 || shape == kWg16x128) shape = k32x8n128;
  }
  return shape;
}

struct LaunchArgs {
  const void* x;  // (n, in) dtype
  const uint8_t* w;
  void* y;  // (n, y_stride)
  int n, in, out, y_stride;
  bool f32_out;
  int splits;
  int32_t* counters;  // (tiles,) with splits > 1, else null
  float* partials;    // (splits, n, out) with splits > 1, else null
  cudaStream_t stream;
};

template <typename D, typename T, int kRows, int kWarps, int kBN, bool kWgmma>
void launch_tile(const LaunchArgs& a) {
  using S = Tile<D, kRows, kWarps, kBN, kWgmma>;
  // The software pipeline on the wgmma tiles of one block an SM: faster in 358 of 360 products
  // timed (5 types, llama-1b / llama-8b, 64-256 rows); the 16x8w n128 tile, two blocks an SM under
  // a 128-register cap (it spills the second set of A registers), was slower in 43 of 120, up to
  // 21% (results/2026-12-03-wgmma-pipeline/call2), and keeps the loop before.
  constexpr bool kPipelined = kWgmma && S::kMinBlocks == 1;
  auto* kernel = gemm_quant_kernel<D, T, kRows, kWarps, kBN, kWgmma, kPipelined>;
  if constexpr (kPipelined) {
    if (!kernel_switches().gemm_quant_pipeline)
      kernel = gemm_quant_kernel<D, T, kRows, kWarps, kBN, kWgmma, false>;
  }
  prepare_kernel(reinterpret_cast<const void*>(kernel), S::kThreads, S::kSmem);
  const dim3 grid(unsigned((a.n + kBN - 1) / kBN), unsigned((a.out + S::kBM - 1) / S::kBM),
                  unsigned(a.splits));
  launch_kernel(kernel, grid, dim3(S::kThreads), size_t(S::kSmem), a.stream,
                static_cast<const T*>(a.x), a.w, a.y, a.n, a.in, a.out, a.y_stride, a.f32_out,
                a.counters, a.partials);
}

// Calls fn.template operator()<kRows, kWarps, kBN, kWgmma>() for shape `tile` (kShapes' order).
template <typename Fn>
auto with_shape(int tile, Fn&& fn) {
  switch (tile) {
    case 0:
      return fn.template operator()<8, 4, 16, false>();
    case 1:
      return fn.template operator()<16, 4, 32, false>();
    case 2:
      return fn.template operator()<16, 4, 64, false>();
    case 3:
      return fn.template operator()<32, 4, 64, false>();
    case 4:
      return fn.template operator()<32, 8, 64, false>();
    case 5:
      return fn.template operator()<32, 4, 128, false>();
    case 6:
      return fn.template operator()<32, 8, 128, false>();
    case 7:
      return fn.template operator()<32, 8, 64, true>();
    case 8:
      return fn.template operator()<32, 8, 128, true>();
    case 9:
      return fn.template operator()<16, 8, 256, true>();
    default:
      return fn.template operator()<16, 8, 128, true>();
  }
}

template <typename D, typename T>
struct Launcher {
  const LaunchArgs& a;
  template <int kRows, int kWarps, int kBN, bool kWgmma>
  void operator()() const {
    launch_tile<D, T, kRows, kWarps, kBN, kWgmma>(a);
  }
};

template <typename D, typename T>
void launch_typed(const LaunchArgs& a) {
  with_shape(choose_tile(D::kElems == 256, a.n, a.out, a.splits), Launcher<D, T>{a});
}

template <typename D>
void launch_type(const LaunchArgs& a, DType dtype) {
  if (dtype == DType::kBF16) {
    launch_typed<D, __nv_bfloat16>(a);
  } else {
    launch_typed<D, __half>(a);
  }
}

int block_elems(uint32_t ggml_type) {
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

}  // namespace

bool gemm_quant_supported(uint32_t ggml_type, int in) {
  const int elems = block_elems(ggml_type);
  return elems > 0 && in > 0 && in % elems == 0;
}

void launch_gemm_quant(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n, int in,
                       int out, bool f32_out, DType dtype, void* workspace, int64_t workspace_bytes,
                       cudaStream_t stream, int y_stride) {
  if (y_stride == 0) y_stride = out;
  if (!gemm_quant_supported(ggml_type, in) || n < 1 || out < 1 || y_stride < out) {
    cuda_fail("unsupported type or shape (in not a multiple of the block size, n or out < 1)",
              "launch_gemm_quant", __FILE__, __LINE__);
  }
  if (misaligned16(x) || misaligned16(w)) {
    cuda_fail("misaligned x or weight pointer (16 bytes needed)", "launch_gemm_quant", __FILE__,
              __LINE__);
  }
  const int splits = gemm_quant_splits(ggml_type, in, out);
  // Rows per launch: all n, or with a split as many as the workspace's partials hold (a multiple
  // of 16, or n).
  int rows = n;
  if (splits > 1) {
    if (workspace == nullptr || misaligned16(workspace)) {
      cuda_fail("split-K needs a 16-byte aligned workspace", "launch_gemm_quant", __FILE__,
                __LINE__);
    }
    const auto fits = [&](int r) {
      return gemm_quant_workspace_fits(workspace_bytes, splits, r, out);
    };
    if (!fits(n)) {
      int lo = 0, hi = n / kGemmQuantMinTileRows;  // multiples of 16 rows: lo fits, hi not
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        (fits(mid * kGemmQuantMinTileRows) ? lo : hi) = mid;
      }
      rows = lo * kGemmQuantMinTileRows;
      if (rows == 0 || !fits(rows)) {
        cuda_fail("the split-K workspace holds fewer than 16 rows (gemm_quant_workspace_bytes)",
                  "launch_gemm_quant", __FILE__, __LINE__);
      }
    }
  }
  auto* const counters = static_cast<int32_t*>(workspace);
  auto* const partials = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) +
                                                  gemm_quant_counter_bytes(workspace_bytes));
  const int64_t x_row_bytes = int64_t(in) * dtype_size(dtype);
  const int64_t y_row_bytes = int64_t(y_stride) * (f32_out ? 4 : dtype_size(dtype));
  for (int r0 = 0; r0 < n; r0 += rows) {
    const LaunchArgs args{static_cast<const uint8_t*>(x) + r0 * x_row_bytes,
                          w,
                          static_cast<uint8_t*>(y) + r0 * y_row_bytes,
                          std::min(rows, n - r0),
                          in,
                          out,
                          y_stride,
                          f32_out,
                          splits,
                          splits > 1 ? counters : nullptr,
                          splits > 1 ? partials : nullptr,
                          stream};
    switch (static_cast<GgmlType>(ggml_type)) {
      case GgmlType::kQ8_0:
        launch_type<TileQ8_0>(args, dtype);
        break;
      case GgmlType::kQ4_0:
        launch_type<TileQ4<false>>(args, dtype);
        break;
      case GgmlType::kQ4_1:
        launch_type<TileQ4<true>>(args, dtype);
        break;
      case GgmlType::kQ4_K:
        launch_type<TileQ4_K>(args, dtype);
        break;
      default:
        launch_type<TileQ6_K>(args, dtype);
        break;
    }
  }
}

// The rule takes no type: one rule served the five types in the slice sweep (the type changes the
// decode's cost per element, not how few tiles a narrow matrix has).
int gemm_quant_splits(uint32_t, int in, int out) {
  const int bigs = (in + kBigK - 1) / kBigK;
  int splits = forced_splits.load(std::memory_order_relaxed);
  if (splits < 1) splits = env_splits();
  if (splits < 0) splits = gemm_quant_split_k(in, out, current_sm_count());
  return std::clamp(splits, 1, std::max(1, bigs));
}

void set_gemm_quant_split(int splits) {
  forced_splits.store(std::max(0, splits), std::memory_order_relaxed);
}

bool gemm_quant_split_k_disabled() { return env_splits() == 0 || env_splits() == 1; }

int gemm_quant_tile_count() { return available_shapes(); }

void set_gemm_quant_tile(int tile) { forced_tile.store(tile, std::memory_order_relaxed); }

int gemm_quant_tile_forced() { return forced_tile.load(std::memory_order_relaxed); }

const char* gemm_quant_tile_name(int tile) {
  return tile >= 0 && tile < kNumShapes ? kShapes[tile].name : "chosen";
}

int gemm_quant_chosen_tile(uint32_t ggml_type, int n, int in, int out) {
  const int forced = forced_tile.exchange(-1);
  const int tile =
      choose_tile(block_elems(ggml_type) == 256, n, out, gemm_quant_splits(ggml_type, in, out));
  forced_tile.store(forced);
  return tile;
}

}  // namespace rose
