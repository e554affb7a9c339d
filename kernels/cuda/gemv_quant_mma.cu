// Quantized GEMV on int8 tensor cores (gemv_quant_mma.cuh), in two kernels:
//
// 1. quantize_x_fragments_kernel: x (n, in) to int8 per 32-element sub-block by quantize_int8.cuh's
//    rule (amax, s = min(127 / amax, FLT_MAX), q = rint(x s) clamped to +-127, d = amax / 127),
//    written once into a global scratch in the order the mma reads it: for column tile nt (rows
//    8 nt .. 8 nt + 7, padded with zeros) and sub-block S, the 32 lanes' B fragments back to back,
//    so a warp loads a fragment with one coalesced 8-byte load per lane; and (d, d sum q) per row
//    and sub-block, the tile's 8 rows side by side (a thread's two columns are one 16-byte load).
//    Every thread block of the product then reads x from L2 instead of quantizing it again (the
//    dp4a GEMV quantizes x once per thread block).
//
// 2. gemv_mma_kernel: a thread block owns one tile of 16 weight rows; its kWarps warps take
//    the row's blocks in turn (warp w: groups w, w + kWarps, ... of F::kGroup blocks), so even a
//    2048-row matrix spreads over every SM. The formats (below) say how a block type's quants
//    and scales are read. Described for Q4_K: per block and sub-block s a warp runs one
//    m16n8k32 per (weight tile, column tile): A is the 16 rows' 32 nibbles of s (thread (g, t) =
//    (lane / 4, lane % 4) holds bytes 8t..8t+7 of the sub-block's 32 qs bytes of rows g and
//    g + 8: one 8-byte load per row and 64-element chunk, masked and shifted), B the column
//    tile's fragment. The s32 dot products are exact; each then enters its fp32 accumulator as
//      acc = fma(scale dx, float(dot), acc); acc = fma(min, dx sum, acc)
//    with scale = d sc_s and min = -dmin m_s the weight row's factors for sub-block s (exact
//    products: an fp16 times a 6-bit integer), computed once per row and sub-block and shared by
//    every column tile, and (dx, dx sum) x's. Four instructions an output and sub-block besides
//    the mma (a product, a conversion, two fmas; about eight before 1a9fbfa, which made 24 and 32
//    rows 9-10% faster and 5-16 rows on llama-1b 2-3% slower, results/2026-11-30-mma-fold):
//    counted, the fold rather than the mma is most of the instructions from 16 rows on (not
//    profiled). The warps' accumulators are added in warp
//    order through shared memory. Every operation on an output depends only on its weight row, its
//    x row and `in`: a row's bits do not depend on n.
//
// A warp's x for its next sub-block is loaded while it computes one, so the L2 trip for x does not
// stand between sub-blocks (part of 1a9fbfa; not measured apart from the fold). Its weights come
// one group ahead in registers, or (Q4_K at 25-32 rows) through a ring of shared-memory stages
// filled by cp.async three groups ahead.
//
// Fragment layouts (PTX ISA, mma.m16n8k32 .s8): A reg 0 / 1 / 2 / 3 = row g / g+8 / g / g+8, k
// 4t..4t+3 / 4t..4t+3 / 16+4t.. / 16+4t..; B reg 0 / 1 = column g, k 4t.. / 16+4t..; C element
// 0 / 1 / 2 / 3 = (row g, column 2t) / (g, 2t+1) / (g+8, 2t) / (g+8, 2t+1). A dot product is the
// same in any order of k applied to both operands, so mma position 4t + j holds element 8t + j
// and 16 + 4t + j element 8t + 4 + j: a thread's A and B words are 8 contiguous bytes.
#include <algorithm>
#include <type_traits>
#include <utility>

#include "kernels/common/ggml_type.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemv_quant_mma.cuh"
#include "kernels/cuda/ggml_block.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/quantize_int8.cuh"
#include "kernels/cuda/tile_ptx.cuh"

namespace rose {
namespace {

constexpr int kWarps = 8;  // a thread block's warps, each a k-slice of its weight tiles
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;  // weight rows of one mma tile
constexpr int kColumns = 8;    // activation rows of one mma column tile
constexpr int kQuantizeThreads = 256;
constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

struct alignas(8) XSums {  // one sub-block of one x row: x ~ d q
  float d;
  float dsum;  // d times the sum of q (rounded once), the min terms' factor
};

static_assert(sizeof(XSums) == 8, "gemv_quant_mma_scratch_bytes counts 8 bytes a pair");

// grid (gemv_quant_mma_padded_rows(n) * in / 8 / kQuantizeThreads rounded up), block
// kQuantizeThreads; each thread quantizes 8 elements, four threads a sub-block. x (n, in);
// fragments, sums: the scratch (sums: (padded rows / 8, in / 32, 8) XSums, a column tile's rows
// side by side).
template <typename T>
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_x_fragments_kernel(const T* x, int n, int in, uint2* fragments, XSums* sums) {
  pdl_wait();  // x comes from the previous kernel, which may also have read the scratch
  pdl_launch_dependents();
  const int sub_blocks = in / 32;
  const int64_t group = int64_t(blockIdx.x) * kQuantizeThreads + threadIdx.x;  // 8 elements
  const int64_t groups = int64_t(gemv_quant_mma_padded_rows(n)) * in / 8;
  if (group >= groups) return;  // whole warps: groups is a multiple of 32 (rows of 8, in / 8 of 4)
  const int row = int(group / (in / 8));
  const int col = int(group % (in / 8)) * 8;
  const uint4 raw = row < n ? *reinterpret_cast<const uint4*>(x + int64_t(row) * in + col)
                            : make_uint4(0, 0, 0, 0);  // padding rows: zeros
  const Int8Eight q = quantize_eight<T>(raw);
  // Elements 8t..8t+7 of the sub-block are lane (row % 8) * 4 + t's fragment (the k order above).
  const int sub = col / 32, t = col % 32 / 8;
  const int64_t tile = int64_t(row / kColumns) * sub_blocks + sub;
  fragments[tile * 32 + (row % kColumns) * 4 + t] = make_uint2(q.words[0], q.words[1]);
  if (threadIdx.x % 4 == 0)
    sums[tile * kColumns + row % kColumns] = XSums{q.d, __fmul_rn(q.d, float(q.sum))};
}

__device__ __forceinline__ void mma_s8(const uint32_t (&a)[4], const uint2& b, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %10, %10, %10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y), "r"(0));
}

// A weight row's factors for one sub-block: the sub-block adds scale dx dot + min dx sum to each
// output (min: only where F::kHasMin).
struct RowFactors {
  float scale, min;
};

// Formats: one ggml block type as the kernel reads it. kElems / kBytes: a block's elements and
// bytes; kGroup: the blocks a warp loads per step (about 2 KB for 16 rows either way); Regs: one
// block of one weight row as a thread holds it; load(block, t); words(regs, s, t): the thread's A
// words for 32-element sub-block s of the block, elements 8t..8t+7 as s8 (the k order above);
// factors(regs, s): the row's RowFactors for s; kHasMin: whether the min term exists.
// kStoredHalves 2 (Q6_K): the kernel's block is half a stored block (kElems, kBytes are the
// half's), and load(stored block, h, t) takes half h. kScaleHalves 2 (Q6_K): a sub-block has one
// scale for elements 0-15 and one for 16-31, so it runs as two mmas, each with the other half's A
// words zeroed, and factors(regs, s, j) gives half j's.

// Q4_K: d, dmin, scales[12], qs[128]; sub-block s is the low (even s) or high nibbles of qs bytes
// 32 (s / 2) .. +31; w = d scale_s q - dmin min_s.
struct Q4KFormat {
  static constexpr int kElems = 256, kBytes = 144, kGroup = 1;
  static constexpr int kStoredHalves = 1, kScaleHalves = 1;
  static constexpr bool kHasMin = true;
  struct Regs {
    uint4 head;   // d, dmin (fp16), then the 12 bytes of packed scales and mins
    uint2 qs[4];  // [c]: bytes 32c + 8t .. 32c + 8t + 7 of qs
  };
  __device__ __forceinline__ static Regs load(const uint8_t* block, int t) {  // 16-byte aligned
    Regs k;
    k.head = __ldg(reinterpret_cast<const uint4*>(block));
#pragma unroll
    for (int c = 0; c < 4; ++c)
      k.qs[c] = __ldg(reinterpret_cast<const uint2*>(block + 16 + 32 * c + 8 * t));
    return k;
  }
  // What sub-blocks 2c and 2c + 1 read of a staged copy of the block (shared memory, 16-byte
  // aligned): the head and qs[c] (the other chunks zero), loaded as they are needed so that a
  // thread does not hold the whole block.
  __device__ __forceinline__ static Regs load_staged(const uint8_t* block, int t, int c) {
    Regs k{};
    k.head = *reinterpret_cast<const uint4*>(block);
    k.qs[c] = *reinterpret_cast<const uint2*>(block + 16 + 32 * c + 8 * t);
    return k;
  }
  __device__ __forceinline__ static uint2 words(const Regs& k, int s, int) {
    const uint32_t shift = 4u * uint32_t(s % 2);
    return make_uint2((k.qs[s / 2].x >> shift) & kLowNibbles,
                      (k.qs[s / 2].y >> shift) & kLowNibbles);
  }
  __device__ __forceinline__ static RowFactors factors(const Regs& k, int s) {
    uint32_t scales, mins;
    q4k_scale_min_pair(k.head, s / 2, &scales, &mins);
    const int scale = int((scales >> (8 * (s % 2))) & 0xFFu),
              min = int((mins >> (8 * (s % 2))) & 0xFFu);
    // fp16 d (11 significant bits) times a 6-bit integer: exact in fp32.
    return RowFactors{__fmul_rn(half_bits_to_float(k.head.x), float(scale)),
                      -__fmul_rn(half_bits_to_float(k.head.x >> 16), float(min))};
  }
};

// Eight bytes at an even address as two words, by 2-byte loads (Q8_0's and Q4_0's blocks are 34
// and 18 bytes: their fields are only 2-byte aligned).
__device__ __forceinline__ uint2 eight_bytes_at_even(const uint8_t* p) {
  const unsigned short* h = reinterpret_cast<const unsigned short*>(p);
  return make_uint2(uint32_t(__ldg(h)) | uint32_t(__ldg(h + 1)) << 16,
                    uint32_t(__ldg(h + 2)) | uint32_t(__ldg(h + 3)) << 16);
}

// Q8_0: d, int8 qs[32]; w = d q.
struct Q8_0Format {
  static constexpr int kElems = 32, kBytes = 34, kGroup = 4;
  static constexpr int kStoredHalves = 1, kScaleHalves = 1;
  static constexpr bool kHasMin = false;
  struct Regs {
    uint32_t d;  // bits 0-15: fp16
    uint2 q;     // qs bytes 8t .. 8t + 7
  };
  __device__ __forceinline__ static Regs load(const uint8_t* block, int t) {
    return Regs{__ldg(reinterpret_cast<const unsigned short*>(block)),
                eight_bytes_at_even(block + 2 + 8 * t)};
  }
  __device__ __forceinline__ static uint2 words(const Regs& k, int, int) { return k.q; }
  __device__ __forceinline__ static RowFactors factors(const Regs& k, int) {
    return RowFactors{half_bits_to_float(k.d), 0.0f};
  }
};

// Q4_0 / Q4_1: d, [m], qs[16]; element j < 16 the low nibble of qs[j], j + 16 its high nibble, so
// elements 8t..8t+7 are the low (t < 2) or high nibbles of qs bytes 8 (t % 2) .. +7;
// w = d (q - 8) (Q4_0: the A operand holds q - 8 as s8, so the dot product is exact and there is
// no min term) or d q + m (Q4_1).
template <bool kHasMinValue>
struct Q4Format {
  static constexpr int kElems = 32, kBytes = kHasMinValue ? 20 : 18, kGroup = 4;
  static constexpr int kStoredHalves = 1, kScaleHalves = 1;
  static constexpr bool kHasMin = kHasMinValue;
  struct Regs {
    uint32_t dm;  // d (bits 0-15), m (16-31, Q4_1), fp16
    uint2 q;      // qs bytes 8 (t % 2) .. +7
  };
  __device__ __forceinline__ static Regs load(const uint8_t* block, int t) {
    if constexpr (kHasMin) {  // 20-byte blocks: every field 4-byte aligned (not 8)
      const uint32_t* words = reinterpret_cast<const uint32_t*>(block + 4 + 8 * (t % 2));
      return Regs{__ldg(reinterpret_cast<const uint32_t*>(block)),
                  make_uint2(__ldg(words), __ldg(words + 1))};
    } else {
      return Regs{__ldg(reinterpret_cast<const unsigned short*>(block)),
                  eight_bytes_at_even(block + 2 + 8 * (t % 2))};
    }
  }
  // Four nibbles q (0..15) a word as bytes, or (Q4_0) as the s8 bytes q - 8: q + 0x78 stays below
  // 0x100 (no carry into the next byte), and flipping its top bit gives q - 8 in two's complement.
  __device__ __forceinline__ static uint32_t signed_or_plain(uint32_t nibbles) {
    if constexpr (kHasMin) return nibbles;
    return (nibbles + 0x78787878u) ^ 0x80808080u;
  }
  __device__ __forceinline__ static uint2 words(const Regs& k, int, int t) {
    const uint32_t shift = 4u * uint32_t(t / 2);
    return make_uint2(signed_or_plain((k.q.x >> shift) & kLowNibbles),
                      signed_or_plain((k.q.y >> shift) & kLowNibbles));
  }
  __device__ __forceinline__ static RowFactors factors(const Regs& k, int) {
    return RowFactors{half_bits_to_float(k.dm), kHasMin ? half_bits_to_float(k.dm >> 16) : 0.0f};
  }
};

// Q6_K: ql[128], qh[64], int8 scales[16], d (fp16), 210-byte blocks (so a block starts on a word
// or 2 bytes past one). Element 128h + 32p + l (l < 32) is the low (p < 2) or high nibble of
// ql[64h + 32 (p & 1) + l], with bits 2p, 2p + 1 of qh[32h + l] as bits 4-5, minus 32, times d
// scales[8h + 2p + l / 16]. The kernel's block is half h of a stored block (128 elements, its
// sub-block p the stored block's 4h + p), so a thread holds half a block's bytes (13 words a row,
// Q4_K's whole block takes 12). A thread's 8 bytes of a field lie at a 2-byte aligned address;
// they are loaded as the words from the one at or before it (the third only when 2 bytes past a
// word, then still inside the block) and realigned by a funnel shift where they are used, so the
// next group's loads stay in flight. w = d sc q with q - 32 in -32..31, entering the mma as s8.
struct Q6KFormat {
  static constexpr int kElems = 128, kBytes = 105, kGroup = 1;  // half a 210-byte block
  static constexpr int kStoredHalves = 2, kScaleHalves = 2;
  static constexpr bool kHasMin = false;
  struct Span {  // 8 bytes as loaded: words from the one at or before them
    uint32_t w[3];
  };
  struct Regs {
    Span ql[2];        // ql[64h + 32c + 8t .. + 7], c = 0, 1
    Span qh;           // qh[32h + 8t .. + 7]
    Span scales;       // scales[8h .. 8h + 7]
    uint32_t d_shift;  // bits 0-15: d (fp16); 16+: 0 or 16, the shift that realigns the spans
  };
  __device__ __forceinline__ static Span load_span(const uint8_t* p, int misalign) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(p - misalign);
    return Span{{__ldg(w), __ldg(w + 1), misalign != 0 ? __ldg(w + 2) : 0u}};
  }
  __device__ __forceinline__ static uint2 realign(const Span& span, uint32_t shift) {
    return make_uint2(__funnelshift_r(span.w[0], span.w[1], shift),
                      __funnelshift_r(span.w[1], span.w[2], shift));
  }
  // Half h of the stored block at `block` (2-byte aligned); every field's offset is a multiple of
  // 8, so all share the block's misalignment mod 4.
  __device__ __forceinline__ static Regs load(const uint8_t* block, int h, int t) {
    const int misalign = int(reinterpret_cast<uintptr_t>(block) & 2);
    Regs k;
#pragma unroll
    for (int c = 0; c < 2; ++c) k.ql[c] = load_span(block + 64 * h + 32 * c + 8 * t, misalign);
    k.qh = load_span(block + 128 + 32 * h + 8 * t, misalign);
    k.scales = load_span(block + 192 + 8 * h, misalign);
    k.d_shift = uint32_t(__ldg(reinterpret_cast<const unsigned short*>(block + 208))) |
                uint32_t(8 * misalign) << 16;
    return k;
  }
  // Four q in 0..63 as the s8 bytes q - 32: r = q ^ 32 is q - 32 for q >= 32 and q + 32 (bit 5
  // set) below, where q - 32 = r - 64 = r | 0xC0; 0x20 * 6 = 0xC0, no carry between bytes.
  __device__ __forceinline__ static uint32_t minus_32(uint32_t q) {
    const uint32_t r = q ^ 0x20202020u;
    return r | (r & 0x20202020u) * 6u;
  }
  __device__ __forceinline__ static uint2 words(const Regs& k, int p, int) {
    const uint32_t shift = k.d_shift >> 16;
    const uint2 low = realign(k.ql[p & 1], shift), high = realign(k.qh, shift);
    const uint32_t nibble = 4u * uint32_t(p >> 1), bits = 2u * uint32_t(p);
    const auto q = [&](uint32_t l, uint32_t h) {
      return minus_32(((l >> nibble) & kLowNibbles) | ((h >> bits) & 0x03030303u) << 4);
    };
    return make_uint2(q(low.x, high.x), q(low.y, high.y));
  }
  // Half j of sub-block p: d scales[8h + 2p + j], exact (an fp16 times an int8).
  __device__ __forceinline__ static RowFactors factors(const Regs& k, int p, int j) {
    const uint2 scales = realign(k.scales, k.d_shift >> 16);
    const int index = 2 * p + j;
    const uint32_t word = index < 4 ? scales.x : scales.y;
    const int scale = int(static_cast<int8_t>((word >> (8 * (index % 4))) & 0xFFu));
    return RowFactors{__fmul_rn(half_bits_to_float(k.d_shift), float(scale)), 0.0f};
  }
};

// The kernel's block `block` of a weight row starting at row_w, as F loads it.
template <typename F>
__device__ __forceinline__ typename F::Regs load_block(const uint8_t* row_w, int block, int t) {
  if constexpr (F::kStoredHalves == 2) {
    return F::load(row_w + int64_t(block / 2) * (2 * F::kBytes), block % 2, t);
  } else {
    return F::load(row_w + int64_t(block) * F::kBytes, t);
  }
}

// Sub-block s's factors of a row (half j of it where F::kScaleHalves is 2).
template <typename F>
__device__ __forceinline__ RowFactors row_factors(const typename F::Regs& k, int s, int j) {
  if constexpr (F::kScaleHalves == 2) {
    return F::factors(k, s, j);
  } else {
    return F::factors(k, s);
  }
}

// One sub-block of x as a thread multiplies it: per column tile its B fragment and its columns 2t
// and 2t + 1's (d, d sum).
template <int kNTiles>
struct XStep {
  uint2 frag[kNTiles];
  float4 sums[kNTiles];  // (d, dsum) of column 2t, then of 2t + 1
};

// Weights staged through shared memory (Q4_K at four column tiles; launch_tiles says why only
// there): each warp keeps a ring of kStages copies of its groups, filled by 16-byte cp.async
// kStages - 1 groups ahead of the one it computes. A group in flight then holds no registers (the
// register path keeps one group ahead in a second Step, and ncu found its warps waiting on those
// loads with the SM's DRAM bandwidth mostly idle: results/2026-11-30-mma-mlp/4_stalls). A stage
// holds the tile's 16 rows of one group, each row at a pitch of kStageRowPitch bytes: 160 (not 144)
// puts the 8-byte reads of a quarter warp's lanes (rows g, bytes 8t of a chunk) in distinct banks.
constexpr int kStages = 4;
constexpr int kStageRowPitch = 160;
constexpr int kStageBytes = kTileRows * kStageRowPitch;
constexpr int kStagedSmemBytes = kWarps * kStages * kStageBytes;  // 80 KiB a block

template <typename F>
constexpr bool kStageable = std::is_same_v<F, Q4KFormat>;

// grid (ceil(out / 16),), block kThreads. x_fragments / x_sums: the scratch (above);
// w (out, in) blocks of F, rows back to back; y (n, y_stride) in T, or fp32 when kF32Out.
// kNTiles: column tiles (n <= 8 kNTiles). Warp w takes the row's groups of F::kGroup blocks w,
// w + kWarps, ..., loading the next group while it computes one (kStaged: kStages - 1 groups ahead
// into shared memory, kStagedSmemBytes of dynamic shared memory). kMinBlocks 2 caps a thread at
// 128 registers so an SM holds two blocks: 16 warps' loads in flight (launch_tiles says where).
template <typename F, typename T, bool kF32Out, int kNTiles, int kMinBlocks, bool kStaged>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    gemv_mma_kernel(const uint2* x_fragments, const XSums* x_sums, const uint8_t* w, void* y, int n,
                    int in, int out, int y_stride) {
  constexpr int kSubs = F::kElems / 32;
  using Step = typename F::Regs[2][F::kGroup];  // [row g, g + 8][block]
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int blocks_per_row = in / F::kElems, sub_blocks = in / 32;
  const int groups = (blocks_per_row + F::kGroup - 1) / F::kGroup;
  const int64_t row_bytes = int64_t(blocks_per_row) * F::kBytes;
  const int first_row = int(blockIdx.x) * kTileRows;
  const auto load = [&](int group, Step& regs) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // Rows past `out` read the last row (never stored).
      const int row = min(out - 1, first_row + g + 8 * r);
      const uint8_t* row_w = w + int64_t(row) * row_bytes;
#pragma unroll
      for (int b = 0; b < F::kGroup; ++b) {
        const int block = group * F::kGroup + b;
        if (block < blocks_per_row) regs[r][b] = load_block<F>(row_w, block, t);
      }
    }
  };
  const float4* sums4 = reinterpret_cast<const float4*>(x_sums);
  const auto load_x = [&](int sub, XStep<kNTiles>& x) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int64_t tile = int64_t(nt) * sub_blocks + sub;
      x.frag[nt] = __ldg(x_fragments + tile * 32 + lane);
      x.sums[nt] = __ldg(sums4 + tile * (kColumns / 2) + t);
    }
  };
  // The sub-block after `sub` in this warp's order (-1: none): the next in its group, else the
  // first of its next group.
  const auto next_sub = [&](int sub, int group) {
    const int group_end = min((group + 1) * F::kGroup, blocks_per_row) * kSubs;
    if (sub + 1 < group_end) return sub + 1;
    return group + kWarps < groups ? (group + kWarps) * F::kGroup * kSubs : -1;
  };
  XStep<kNTiles> x_now;
  float acc[kNTiles][4] = {};
  // One group's mmas and folds into acc; x_now holds its first sub-block's x on entry and the
  // next group's on return. regs(r, b, s): block b's F::Regs for weight row g + 8 r (enough of
  // them for sub-block s).
  const auto compute = [&](const auto& regs, int group) {
#pragma unroll
    for (int b = 0; b < F::kGroup; ++b) {
      const int block = group * F::kGroup + b;
      if (block >= blocks_per_row) break;  // the same for the whole warp
#pragma unroll
      for (int s = 0; s < kSubs; ++s) {
        const int sub = block * kSubs + s;
        XStep<kNTiles> x_next;
        const int following = next_sub(sub, group);
        if (following >= 0) load_x(following, x_next);
        const typename F::Regs row0 = regs(0, b, s), row1 = regs(1, b, s);
        const uint2 low = F::words(row0, s, t), high = F::words(row1, s, t);
#pragma unroll
        for (int j = 0; j < F::kScaleHalves; ++j) {
          // With two scale halves, mma j takes only threads t / 2 == j's elements (8t..8t+7).
          const bool mine = F::kScaleHalves == 1 || t / 2 == j;
          const uint32_t a[4] = {mine ? low.x : 0u, mine ? high.x : 0u, mine ? low.y : 0u,
                                 mine ? high.y : 0u};
          const RowFactors factors[2] = {row_factors<F>(row0, s, j), row_factors<F>(row1, s, j)};
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
            int dot[4];
            mma_s8(a, x_now.frag[nt], dot);
            const float4 xs = x_now.sums[nt];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const RowFactors f = factors[e / 2];
              const float dx = e % 2 == 0 ? xs.x : xs.z;
              float v = __fmaf_rn(__fmul_rn(f.scale, dx), float(dot[e]), acc[nt][e]);
              if constexpr (F::kHasMin) v = __fmaf_rn(f.min, e % 2 == 0 ? xs.y : xs.w, v);
              acc[nt][e] = v;
            }
          }
        }
        x_now = x_next;
      }
    }
  };

  if constexpr (kStaged) {
    static_assert(
        kStageable<F> && F::kGroup * F::kBytes % 16 == 0 && F::kGroup * F::kBytes <= kStageRowPitch,
        "a staged group row is whole 16-byte pieces within the pitch");
    constexpr int kPieces = F::kGroup * F::kBytes / 16;
    extern __shared__ __align__(16) uint8_t stage_memory[];
    uint8_t* ring = stage_memory + warp * kStages * kStageBytes;
    const int warp_groups = warp < groups ? (groups - 1 - warp) / kWarps + 1 : 0;
    // A stage is kTileRows x kPieces 16-byte pieces; lane L copies pieces L, L + 32, ... in row
    // order, so one warp instruction covers whole rows' 144 contiguous bytes (copying a row by
    // lane pairs, 32 bytes a row an instruction, requested the 32-byte sectors that odd groups'
    // rows straddle twice from L2). Offsets from the tile's first row, the same for every group.
    constexpr int kStagePieces = kTileRows * kPieces;
    constexpr int kLanePieces = (kStagePieces + 31) / 32;
    const uint8_t* tile_w = w + int64_t(first_row) * row_bytes;
    int src_offset[kLanePieces], dst_offset[kLanePieces];
#pragma unroll
    for (int j = 0; j < kLanePieces; ++j) {
      const int piece = lane + 32 * j, row = piece / kPieces, at = 16 * (piece % kPieces);
      // Rows past `out` copy the last row (never stored).
      src_offset[j] = int((min(out - 1, first_row + row) - first_row) * row_bytes) + at;
      dst_offset[j] = row * kStageRowPitch + at;
    }
    // The warp's i-th group into stage i % kStages, then a commit (empty past the last group, so
    // every thread commits one group per call and the waits below count the same).
    const auto stage = [&](int i) {
      if (i < warp_groups) {
        const uint8_t* src = tile_w + int64_t(warp + i * kWarps) * (F::kGroup * F::kBytes);
        uint8_t* dst = ring + (i % kStages) * kStageBytes;
#pragma unroll
        for (int j = 0; j < kLanePieces; ++j) {
          if (kStagePieces % 32 == 0 || j + 1 < kLanePieces || lane + 32 * j < kStagePieces)
            cp_async16(dst + dst_offset[j], src + src_offset[j], 16);
        }
      }
      cp_async_commit();
    };
    // The weights are constants of the run: the first groups' copies go out before the wait.
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) stage(i);
    pdl_wait();
    pdl_launch_dependents();
    if (warp < groups) load_x(warp * F::kGroup * kSubs, x_now);
#pragma unroll 1
    for (int i = 0; i < warp_groups; ++i) {
      stage(i + kStages - 1);
      cp_async_wait<kStages - 1>();  // this thread's copies of group i are done
      __syncwarp();                  // and every lane's are visible
      const uint8_t* slot = ring + (i % kStages) * kStageBytes;
      compute(
          [&](int r, int b, int s) {
            return F::load_staged(slot + (g + 8 * r) * kStageRowPitch + b * F::kBytes, t, s / 2);
          },
          warp + i * kWarps);
      __syncwarp();  // every lane has read stage i % kStages before the next call refills it
    }
    cp_async_wait<0>();  // nothing outstanding at exit (only empty groups remain by now)
  } else {
    // The weights are constants of the run: the first group's loads go out before the wait.
    Step current;
    if (warp < groups) load(warp, current);
    pdl_wait();
    pdl_launch_dependents();
    if (warp < groups) load_x(warp * F::kGroup * kSubs, x_now);
    for (int group = warp; group < groups; group += kWarps) {
      Step next;
      if (group + kWarps < groups) load(group + kWarps, next);
      compute([&](int r, int b, int) { return current[r][b]; }, group);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int b = 0; b < F::kGroup; ++b) current[r][b] = next[r][b];
      }
    }
  }

  // The warps' partial sums, added in warp order.
  constexpr int kValues = kNTiles * 4;  // per lane
  __shared__ float partial[kWarps][kValues][32];
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][nt * 4 + e][lane] = acc[nt][e];
  }
  __syncthreads();
  for (int v = int(threadIdx.x); v < kValues * 32; v += kThreads) {
    const int value = v / 32, owner = v % 32;  // owner: the lane that held it
    float total = partial[0][value][owner];
    for (int w2 = 1; w2 < kWarps; ++w2) total = __fadd_rn(total, partial[w2][value][owner]);
    const int nt = value / 4, e = value % 4;
    const int row = first_row + owner / 4 + 8 * (e / 2);
    const int column = nt * kColumns + 2 * (owner % 4) + e % 2;
    if (row >= out || column >= n) continue;
    const int64_t at = int64_t(column) * y_stride + row;
    if constexpr (kF32Out) {
      static_cast<float*>(y)[at] = total;
    } else {
      static_cast<T*>(y)[at] = from_float<T>(total);
    }
  }
}

// Four column tiles (25-32 rows) at two blocks an SM from this many rows of W (192 tiles of 16
// rows, more than the H100's or H200's 132 SMs); one to three at any size.
constexpr int kFourTilesTwoBlocksMinOut = 3072;

// KernelSwitches::gemv_quant_mma_staged false (ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED=0): Q4_K's
// four column tiles on the register path (comparisons, tests).
bool staged_enabled() { return kernel_switches().gemv_quant_mma_staged; }

// Launches a staged kernel with its kStagedSmemBytes of dynamic shared memory.
template <typename... Params, typename... Args>
void launch_staged(void (*kernel)(Params...), dim3 grid, cudaStream_t stream, Args&&... args) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), kStagedSmemBytes);
  launch_kernel(kernel, grid, dim3(kThreads), size_t(kStagedSmemBytes), stream,
                std::forward<Args>(args)...);
}

template <typename F, typename T, bool kF32Out, int kNTiles>
void launch_tiles(const T* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                  void* x_scratch, cudaStream_t stream) {
  auto* fragments = static_cast<uint2*>(x_scratch);
  auto* sums = reinterpret_cast<XSums*>(static_cast<char*>(x_scratch) +
                                        gemv_quant_mma_fragment_bytes(n, in));
  const int64_t groups = int64_t(gemv_quant_mma_padded_rows(n)) * in / 8;
  launch_kernel(quantize_x_fragments_kernel<T>,
                dim3(unsigned((groups + kQuantizeThreads - 1) / kQuantizeThreads)),
                dim3(kQuantizeThreads), 0, stream, x, n, in, fragments, sums);
  ROSE_CUDA_CHECK_LAUNCH();
  // Two blocks an SM cap a thread at 128 registers (-Xptxas -v): one and two column tiles fit that
  // without spilling for every format, three for all but Q4_1 (16 bytes spilled), four take up to
  // 168 and spill 24-148 bytes by format. Measured on Q4_K (H200): four column tiles capped at 128
  // made llama-8b 5-7% faster at 24 and 32 rows (24 rows then ran four) and llama-1b's 2,048-row
  // matrices slower (128 tiles: no more blocks than SMs, so the cap only adds spills;
  // results/2026-11-30-mma-fold), and llama-1b's qkv (3,072 rows) faster, 9.67 -> 7.88 us at 24
  // rows (results/2026-11-30-mma-mlp). One and two column tiles at two blocks an SM beat two weight
  // tiles a block (the previous layout of gate|up and lm_head: x read once per 32 rows, one block
  // an SM) on every shape measured: llama-8b gate|up 44.4 -> 40.3 us at 8 rows, lm_head 176 ->
  // 153 (same results).
  const uint2* xf = fragments;
  const dim3 grid(unsigned((out + kTileRows - 1) / kTileRows));
  // Q4_K at four column tiles (25-32 rows) stages its weights through shared memory: llama-8b
  // decode at 32 rows 7.94 -> 7.45 ms a step, llama-1b 1.87 -> 1.82, every llama-8b product faster
  // (gate|up 83.8 -> 77.0 us). At one to three column tiles the stages lost (8 rows: llama-8b
  // 3.78 -> 4.03 ms a step; 24 rows: 3.6% on both models), where a group's few mmas leave the
  // copies' overhead uncovered (results/2026-11-30-mma-staged).
  if constexpr (kStageable<F> && kNTiles == 4) {
    if (staged_enabled()) {
      if (out >= kFourTilesTwoBlocksMinOut) {
        launch_staged(gemv_mma_kernel<F, T, kF32Out, kNTiles, 2, true>, grid, stream, xf, sums, w,
                      y, n, in, out, y_stride);
      } else {
        launch_staged(gemv_mma_kernel<F, T, kF32Out, kNTiles, 1, true>, grid, stream, xf, sums, w,
                      y, n, in, out, y_stride);
      }
      ROSE_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  if (kNTiles <= 3 || out >= kFourTilesTwoBlocksMinOut) {
    launch_kernel(gemv_mma_kernel<F, T, kF32Out, kNTiles, 2, false>, grid, dim3(kThreads), 0,
                  stream, xf, sums, w, y, n, in, out, y_stride);
  } else if constexpr (kNTiles == 4) {
    launch_kernel(gemv_mma_kernel<F, T, kF32Out, kNTiles, 1, false>, grid, dim3(kThreads), 0,
                  stream, xf, sums, w, y, n, in, out, y_stride);
  }
  ROSE_CUDA_CHECK_LAUNCH();
}

template <typename F, typename T, bool kF32Out>
void launch_rows(const void* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                 void* x_scratch, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  if (n <= 8)
    return launch_tiles<F, T, kF32Out, 1>(xt, w, y, n, in, out, y_stride, x_scratch, stream);
  if (n <= 16)
    return launch_tiles<F, T, kF32Out, 2>(xt, w, y, n, in, out, y_stride, x_scratch, stream);
  // 17-24 rows: three column tiles, not four with the fourth all padding (a quarter of the mma
  // and of the fp32 fold).
  if (n <= 24)
    return launch_tiles<F, T, kF32Out, 3>(xt, w, y, n, in, out, y_stride, x_scratch, stream);
  launch_tiles<F, T, kF32Out, 4>(xt, w, y, n, in, out, y_stride, x_scratch, stream);
}

template <typename F>
void launch_format(const void* x, const uint8_t* w, void* y, int n, int in, int out, int y_stride,
                   bool f32_out, DType dtype, void* x_scratch, cudaStream_t stream) {
  if (dtype == DType::kBF16) {
    if (f32_out)
      return launch_rows<F, __nv_bfloat16, true>(x, w, y, n, in, out, y_stride, x_scratch, stream);
    return launch_rows<F, __nv_bfloat16, false>(x, w, y, n, in, out, y_stride, x_scratch, stream);
  }
  if (f32_out)
    return launch_rows<F, __half, true>(x, w, y, n, in, out, y_stride, x_scratch, stream);
  launch_rows<F, __half, false>(x, w, y, n, in, out, y_stride, x_scratch, stream);
}

int block_elems(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return 256;  // a stored block (Q6_K's kernel blocks are halves of one)
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return 32;
    default:
      return 0;
  }
}

}  // namespace

bool gemv_quant_mma_supported(uint32_t ggml_type, int n, int in) {
  const int elems = block_elems(ggml_type);
  return elems > 0 && n >= 1 && n <= kGemvQuantMmaMaxRows && in > 0 && in % elems == 0;
}

void launch_gemv_quant_mma(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n,
                           int in, int out, bool f32_out, DType dtype, void* x_scratch,
                           cudaStream_t stream, int y_stride) {
  if (!gemv_quant_mma_supported(ggml_type, n, in) || out < 1) {
    cuda_fail(
        "unsupported type or shape (Q4_K, Q6_K, Q8_0, Q4_0 or Q4_1; 1 <= n <= 32; in a "
        "multiple of the block size)",
        "launch_gemv_quant_mma", __FILE__, __LINE__);
  }
  if (misaligned16(x) || misaligned16(w) || misaligned16(x_scratch)) {
    cuda_fail("misaligned x, weights or scratch (16 bytes needed)", "launch_gemv_quant_mma",
              __FILE__, __LINE__);
  }
  if (y_stride == 0) y_stride = out;
  if (y_stride < out) cuda_fail("y_stride < out", "launch_gemv_quant_mma", __FILE__, __LINE__);
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ4_K:
      return launch_format<Q4KFormat>(x, w, y, n, in, out, y_stride, f32_out, dtype, x_scratch,
                                      stream);
    case GgmlType::kQ6_K:
      return launch_format<Q6KFormat>(x, w, y, n, in, out, y_stride, f32_out, dtype, x_scratch,
                                      stream);
    case GgmlType::kQ8_0:
      return launch_format<Q8_0Format>(x, w, y, n, in, out, y_stride, f32_out, dtype, x_scratch,
                                       stream);
    case GgmlType::kQ4_0:
      return launch_format<Q4Format<false>>(x, w, y, n, in, out, y_stride, f32_out, dtype,
                                            x_scratch, stream);
    default:
      return launch_format<Q4Format<true>>(x, w, y, n, in, out, y_stride, f32_out, dtype, x_scratch,
                                           stream);
  }
}

}  // namespace rose
