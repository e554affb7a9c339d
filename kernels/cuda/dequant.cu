// Device decoders for the ggml block types. Every fp32 operation is an explicitly rounded intrinsic
// (__fmul_rn, __fadd_rn, __fsub_rn): nvcc would otherwise contract a multiply and an add into one
// fma, which rounds once where the reference (built for x86-64 without FMA) rounds twice, and the
// results must match the reference (engine/model/quant.cpp) bit for bit.
//
// Two kinds of kernel:
//  - the generic kernel, one thread per output element re-reading its block's scales, for every
//    type: plainly correct, and what the other types use (load time is dominated by the file read);
//  - the staged kernels for Q8_0, Q4_0, Q4_1, Q4_K and Q6_K, which CudaBackend::dequantize also
//    runs on every forward step that multiplies a kept matrix by more rows than the quantized GEMV
//    takes. There the decode is pure memory traffic (read the blocks, write bf16), so each block
//    of 256 threads copies a chunk of blocks into shared memory with the widest copies the
//    source's alignment allows (cp.async, double buffered), then each thread turns 8-element
//    groups of it into one 16-byte store: scales decoded once per group, no 64-bit division per
//    element.
// Both compute each element with the reference's operations in its order, so they agree bit for
// bit; the staged kernels only replace int-to-float conversions by exact bit tricks.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/common/ggml_type.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/ggml_block.cuh"
#include "kernels/cuda/launch.cuh"

namespace rose {
namespace {

constexpr int kThreads = 256;

// Blocks are byte-packed (22-, 34-, 110-byte blocks...), so multi-byte fields are read bytewise
// (half_at in ggml_block.cuh).
__device__ __forceinline__ uint32_t u32_at(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

struct F32 {
  static constexpr int kElems = 1, kBytes = 4;
  __device__ static float at(const uint8_t* b, int) { return __uint_as_float(u32_at(b)); }
};
struct F16 {
  static constexpr int kElems = 1, kBytes = 2;
  __device__ static float at(const uint8_t* b, int) { return half_at(b); }
};
struct BF16 {
  static constexpr int kElems = 1, kBytes = 2;
  __device__ static float at(const uint8_t* b, int) {
    return __uint_as_float((uint32_t(b[0]) | uint32_t(b[1]) << 8) << 16);
  }
};

// Q4_0 / Q4_1: d, [m], qs[16]; byte j holds element j (low nibble) and j + 16 (high nibble).
template <bool kHasMin>
struct Q4 {
  static constexpr int kElems = 32, kBytes = kHasMin ? 20 : 18;
  __device__ static float at(const uint8_t* b, int e) {
    const float d = half_at(b);
    const float m = kHasMin ? half_at(b + 2) : 0.0f;  // the reference adds +0.0f too (signed zeros)
    const uint8_t byte = b[(kHasMin ? 4 : 2) + (e & 15)];
    const int q = e < 16 ? byte & 0x0F : byte >> 4;
    return __fadd_rn(__fmul_rn(d, float(q - (kHasMin ? 0 : 8))), m);
  }
};

// Q5_0 / Q5_1: as Q4 plus u32 qh whose bit e is element e's fifth bit.
template <bool kHasMin>
struct Q5 {
  static constexpr int kElems = 32, kBytes = kHasMin ? 24 : 22;
  __device__ static float at(const uint8_t* b, int e) {
    const float d = half_at(b);
    const float m = kHasMin ? half_at(b + 2) : 0.0f;
    const uint8_t* p = b + (kHasMin ? 4 : 2);
    const uint32_t qh = u32_at(p);
    const uint8_t byte = p[4 + (e & 15)];
    const int q = (e < 16 ? byte & 0x0F : byte >> 4) | int((qh >> e) & 1u) << 4;
    return __fadd_rn(__fmul_rn(d, float(q - (kHasMin ? 0 : 16))), m);
  }
};

struct Q8_0 {
  static constexpr int kElems = 32, kBytes = 34;
  __device__ static float at(const uint8_t* b, int e) {
    return __fmul_rn(half_at(b), float(static_cast<int8_t>(b[2 + e])));
  }
};

// The K-quants' 256 elements: two halves of 128, each four 32-element runs (`quarter`) that read
// the same 32 bytes of qs at shifts 0, 2, 4, 6; 16-element groups take one scale each (group e/16).

// Q2_K: scales[16] (scale low nibble, min high nibble), qs[64], d, dmin.
struct Q2_K {
  static constexpr int kElems = 256, kBytes = 84;
  __device__ static float at(const uint8_t* b, int e) {
    const int half = e / 128, quarter = (e % 128) / 32, i = e % 32;
    const uint8_t sc = b[e / 16];
    const float scale = __fmul_rn(half_at(b + 80), float(sc & 0x0F));
    const float min = __fmul_rn(half_at(b + 82), float(sc >> 4));
    const int q = (b[16 + 32 * half + i] >> (2 * quarter)) & 3;
    return __fsub_rn(__fmul_rn(scale, float(q)), min);
  }
};

// Q3_K: hmask[32], qs[64], scales[12] (sixteen 6-bit values), d. A clear hmask bit (bit 4*half +
// quarter of hmask[i]) subtracts 4.
struct Q3_K {
  static constexpr int kElems = 256, kBytes = 110;
  __device__ static float at(const uint8_t* b, int e) {
    const int half = e / 128, quarter = (e % 128) / 32, i = e % 32, group = e / 16;
    const uint8_t* packed = b + 96;
    const int low = group < 8 ? packed[group] & 0x0F : packed[group - 8] >> 4;
    const int high = (packed[8 + group % 4] >> (2 * (group / 4))) & 3;
    const int scale = (low | high << 4) - 32;
    const int mask_bit = 4 * half + quarter;
    const int q =
        ((b[32 + 32 * half + i] >> (2 * quarter)) & 3) - (((b[i] >> mask_bit) & 1) ? 0 : 4);
    return __fmul_rn(__fmul_rn(half_at(b + 108), float(scale)), float(q));
  }
};

// Q4_K / Q5_K: d, dmin, scales[12] (eight 6-bit scale/min pairs), [qh[32]], qs[128]. Sub-block
// s = e/32 reads chunk s/2's 32 bytes of qs, low nibbles for even s; Q5_K's fifth bit is bit s
// of qh[e % 32].
template <bool kFiveBit>
struct Q45_K {
  static constexpr int kElems = 256, kBytes = kFiveBit ? 176 : 144;
  __device__ static float at(const uint8_t* b, int e) {
    const int sub = e / 32, l = e % 32;
    const uint8_t* packed = b + 4;
    int scale, min;
    k4_scale_min(sub, packed, &scale, &min);
    const uint8_t byte = b[(kFiveBit ? 48 : 16) + 32 * (sub / 2) + l];
    int q = sub % 2 ? byte >> 4 : byte & 0x0F;
    if (kFiveBit && ((b[16 + l] >> sub) & 1)) q += 16;
    const float dl = __fmul_rn(half_at(b), float(scale));
    const float ml = __fmul_rn(half_at(b + 2), float(min));
    return __fsub_rn(__fmul_rn(dl, float(q)), ml);
  }
};

// Q6_K: ql[128], qh[64], int8 scales[16], d. In each half, run `quarter` takes ql[l + 32*(quarter
// & 1)]'s low (quarter < 2) or high nibble, qh[l] bits 2*quarter.., and scale l/16 + 2*quarter.
struct Q6_K {
  static constexpr int kElems = 256, kBytes = 210;
  __device__ static float at(const uint8_t* b, int e) {
    const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const uint8_t ql = b[64 * half + l + 32 * (quarter & 1)];
    const uint8_t qh = b[128 + 32 * half + l];
    const int nibble = quarter < 2 ? ql & 0x0F : ql >> 4;
    const int q = (nibble | ((qh >> (2 * quarter)) & 3) << 4) - 32;
    const int8_t sc = static_cast<int8_t>(b[192 + 8 * half + l / 16 + 2 * quarter]);
    return __fmul_rn(__fmul_rn(half_at(b + 208), float(sc)), float(q));
  }
};

// The llama q/k un-permutation (unpermuted_row in engine/model/weights.h): stored row
// h*hd + 2j + i belongs at h*hd + i*hd/2 + j.
__device__ __forceinline__ int64_t unpermuted_row(int64_t row, int64_t rows, int heads) {
  if (heads <= 0) return row;
  const int64_t head_dim = rows / heads, within = row % head_dim;
  return row - within + (within % 2) * (head_dim / 2) + within / 2;
}

// dst (part_rows, cols): rows unpermuted_row(row_begin + r) for r < num_rows.
// src (num_rows * cols / D::kElems, D::kBytes): the blocks of those stored rows, back to back
// (cols is a whole number of blocks, so element i of the run is element i % kElems of block
// i / kElems).
template <typename D, typename T>
__global__ void dequantize_rows_kernel(T* dst, const uint8_t* src, int64_t row_begin,
                                       int64_t num_rows, int64_t part_rows, int64_t cols,
                                       int unpermute_heads) {
  // At step time dst is the scratch the previous step's GEMM read, and at load time src may have
  // just been written: nothing is touched before the predecessor is done.
  pdl_wait();
  pdl_launch_dependents();
  const int64_t n = num_rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float value = D::at(src + (i / D::kElems) * D::kBytes, int(i % D::kElems));
    const int64_t row = unpermuted_row(row_begin + i / cols, part_rows, unpermute_heads);
    dst[row * cols + i % cols] = from_float<T>(value);
  }
}

template <typename D>
void launch_decoder(void* dst, DType dtype, const uint8_t* src, int64_t row_begin, int64_t num_rows,
                    int64_t part_rows, int64_t cols, int unpermute_heads, cudaStream_t stream) {
  const int64_t n = num_rows * cols;
  const int grid = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536));
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(dequantize_rows_kernel<D, T>, grid, kThreads, 0, stream, static_cast<T*>(dst),
                  src, row_begin, num_rows, part_rows, cols, unpermute_heads);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

using Launcher = void (*)(void*, DType, const uint8_t*, int64_t, int64_t, int64_t, int64_t, int,
                          cudaStream_t);

Launcher launcher_for(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kF32:
      return launch_decoder<F32>;
    case GgmlType::kF16:
      return launch_decoder<F16>;
    case GgmlType::kBF16:
      return launch_decoder<BF16>;
    case GgmlType::kQ4_0:
      return launch_decoder<Q4<false>>;
    case GgmlType::kQ4_1:
      return launch_decoder<Q4<true>>;
    case GgmlType::kQ5_0:
      return launch_decoder<Q5<false>>;
    case GgmlType::kQ5_1:
      return launch_decoder<Q5<true>>;
    case GgmlType::kQ8_0:
      return launch_decoder<Q8_0>;
    case GgmlType::kQ2_K:
      return launch_decoder<Q2_K>;
    case GgmlType::kQ3_K:
      return launch_decoder<Q3_K>;
    case GgmlType::kQ4_K:
      return launch_decoder<Q45_K<false>>;
    case GgmlType::kQ5_K:
      return launch_decoder<Q45_K<true>>;
    case GgmlType::kQ6_K:
      return launch_decoder<Q6_K>;
    default:
      return nullptr;
  }
}

// ---- Staged decoders (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) ---------------------------------------------
// A thread decodes one 8-element group (a quarter of a 32-element block or sub-block) per step;
// the 32 lanes of a warp take 32 consecutive groups, so each warp-wide store writes 512 contiguous
// bytes. A chunk is kChunkGroups groups of whole blocks (8192 elements): its block bytes are a
// multiple of 16 for all five types, so every chunk starts at the source's alignment mod 16.

constexpr int kStagedThreads = 256;
constexpr int kStagedBlocksPerSm = 5;
constexpr int kGroupsPerThread = 4;  // groups one thread decodes per chunk
constexpr int kChunkGroups = kStagedThreads * kGroupsPerThread;
// Bytes past a chunk's blocks that stage8() may read (and ignore): it reads whole aligned words.
constexpr int kStagePad = 16;

// 2^23 + (byte k of w), exactly: the bits 0x4B0000bb are that float. Subtracting 2^23 + bias then
// gives float(byte - bias) exactly (an integer below 2^23), the value the reference converts, with
// one PRMT and one FADD instead of an I2F (a quarter-rate conversion) per element.
template <int k>
__device__ __forceinline__ float biased_byte(uint32_t w) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 + k));
}

// Elements 4i..4i+3 of `out`: (bytes of w) - bias as floats, each passed through `f`.
template <int kBias, typename F>
__device__ __forceinline__ void unpack4(uint32_t w, float* out, F f) {
  constexpr float kMagic = 8388608.0f + float(kBias);
  out[0] = f(__fsub_rn(biased_byte<0>(w), kMagic));
  out[1] = f(__fsub_rn(biased_byte<1>(w), kMagic));
  out[2] = f(__fsub_rn(biased_byte<2>(w), kMagic));
  out[3] = f(__fsub_rn(biased_byte<3>(w), kMagic));
}

// Readers of the staged chunk `s` (shared memory, 16-byte aligned) at byte offset `off`.
__device__ __forceinline__ float stage_half(const uint8_t* s, int off) {  // off even
  return __half2float(__ushort_as_half(reinterpret_cast<const unsigned short*>(s)[off >> 1]));
}
// Eight bytes at an even offset, little endian: three aligned words funnel-shifted by 0 or 16 bits
// (one path for every lane, where per-lane alignment branches would diverge).
__device__ __forceinline__ uint2 stage8(const uint8_t* s, int off) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(s) + (off >> 2);
  const uint32_t shift = uint32_t(off & 2) * 8;
  const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
  return make_uint2(__funnelshift_r(w0, w1, shift), __funnelshift_r(w1, w2, shift));
}

// Each Staged* decoder: kElems, kBytes of its block, and decode(s, off, group, v) writing elements
// 8 * group .. 8 * group + 7 of the block at byte `off` of the chunk to v, each with the generic
// decoder's operations (above) in its order.

// Q8_0: d, int8 qs[32]. Flipping the sign bits makes q the byte q + 128.
struct StagedQ8_0 {
  static constexpr int kElems = 32, kBytes = 34;
  __device__ static void decode(const uint8_t* s, int off, int group, float (&v)[8]) {
    const float d = stage_half(s, off);
    const uint2 q = stage8(s, off + 2 + 8 * group);
    const auto scale = [d](float x) { return __fmul_rn(d, x); };
    unpack4<128>(q.x ^ 0x80808080u, v, scale);
    unpack4<128>(q.y ^ 0x80808080u, v + 4, scale);
  }
};

// Q4_0 / Q4_1: group g takes bytes 8 * (g & 1).. of qs, low nibbles for g < 2.
template <bool kHasMin>
struct StagedQ4 {
  static constexpr int kElems = 32, kBytes = kHasMin ? 20 : 18;
  __device__ static void decode(const uint8_t* s, int off, int group, float (&v)[8]) {
    const float d = stage_half(s, off);
    const float m = kHasMin ? stage_half(s, off + 2) : 0.0f;  // +0.0f as the reference adds
    uint2 q;
    if (kHasMin) {  // 20-byte blocks: qs is 4-byte aligned
      const uint32_t* w = reinterpret_cast<const uint32_t*>(s + off + 4 + 8 * (group & 1));
      q = make_uint2(w[0], w[1]);
    } else {
      q = stage8(s, off + 2 + 8 * (group & 1));
    }
    const int shift = 4 * (group >> 1);
    const auto f = [d, m](float x) { return __fadd_rn(__fmul_rn(d, x), m); };
    unpack4<kHasMin ? 0 : 8>((q.x >> shift) & 0x0F0F0F0Fu, v, f);
    unpack4<kHasMin ? 0 : 8>((q.y >> shift) & 0x0F0F0F0Fu, v + 4, f);
  }
};

// Q4_K: d, dmin, scales[12], qs[128]; group g is in sub-block g / 4 (144-byte blocks stay 16-byte
// aligned in the chunk, so its 8 bytes of qs are one 8-byte load).
struct StagedQ4_K {
  static constexpr int kElems = 256, kBytes = 144;
  __device__ static void decode(const uint8_t* s, int off, int group, float (&v)[8]) {
    const int sub = group >> 2;
    int scale, min;
    k4_scale_min(sub, s + off + 4, &scale, &min);
    const float dl = __fmul_rn(stage_half(s, off), float(scale));
    const float ml = __fmul_rn(stage_half(s, off + 2), float(min));
    const uint2 q =
        *reinterpret_cast<const uint2*>(s + off + 16 + 32 * (sub >> 1) + 8 * (group & 3));
    const int shift = 4 * (sub & 1);
    const auto f = [dl, ml](float x) { return __fsub_rn(__fmul_rn(dl, x), ml); };
    unpack4<0>((q.x >> shift) & 0x0F0F0F0Fu, v, f);
    unpack4<0>((q.y >> shift) & 0x0F0F0F0Fu, v + 4, f);
  }
};

// Q6_K: ql[128], qh[64], int8 scales[16], d. Group g: half g / 16, quarter (g / 4) % 4, l from
// 8 * (g % 4); its 8 elements share one scale (l / 16 is the same for all).
struct StagedQ6_K {
  static constexpr int kElems = 256, kBytes = 210;
  __device__ static void decode(const uint8_t* s, int off, int group, float (&v)[8]) {
    const int half = group >> 4, quarter = (group >> 2) & 3, l = 8 * (group & 3);
    const int8_t sc = static_cast<int8_t>(s[off + 192 + 8 * half + l / 16 + 2 * quarter]);
    const float scale = __fmul_rn(stage_half(s, off + 208), float(sc));
    const uint2 ql = stage8(s, off + 64 * half + 32 * (quarter & 1) + l);
    const uint2 qh = stage8(s, off + 128 + 32 * half + l);
    const int low_shift = 4 * (quarter >> 1), high_shift = 2 * quarter;
    const auto q = [&](uint32_t low, uint32_t high) {
      return ((low >> low_shift) & 0x0F0F0F0Fu) | ((high >> high_shift) & 0x03030303u) << 4;
    };
    const auto f = [scale](float x) { return __fmul_rn(scale, x); };
    unpack4<32>(q(ql.x, qh.x), v, f);
    unpack4<32>(q(ql.y, qh.y), v + 4, f);
  }
};

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One unit of kWidth bytes global -> shared, both kWidth-aligned: cp.async for 4, 8 and 16 bytes
// (no trip through registers, and the copy runs while the thread decodes the previous chunk),
// a plain load and store below.
template <int kWidth>
__device__ __forceinline__ void copy_unit(uint8_t* s, const uint8_t* g) {
  if constexpr (kWidth == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(s)), "l"(g)
                 : "memory");
  } else if constexpr (kWidth >= 4) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(shared_address(s)), "l"(g),
                 "n"(kWidth)
                 : "memory");
  } else if constexpr (kWidth == 2) {
    *reinterpret_cast<unsigned short*>(s) = *reinterpret_cast<const unsigned short*>(g);
  } else {
    *s = *g;
  }
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most one committed group (the chunk after the current one) is still in flight.
__device__ __forceinline__ void cp_async_wait_all_but_one() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

// s[0, bytes) = g[0, bytes), g aligned to kWidth; the last chunk's tail (< kWidth bytes) bytewise.
template <int kWidth>
__device__ __forceinline__ void stage_width(uint8_t* s, const uint8_t* g, int bytes) {
  const int units = bytes / kWidth;
  for (int i = threadIdx.x; i < units; i += kStagedThreads)
    copy_unit<kWidth>(s + i * kWidth, g + i * kWidth);
  for (int i = units * kWidth + int(threadIdx.x); i < bytes; i += kStagedThreads) s[i] = g[i];
}

// The widest copy that g's alignment allows (the same for every chunk of a launch: no divergence).
__device__ __forceinline__ void stage_chunk(uint8_t* s, const uint8_t* g, int bytes) {
  const int align = int(reinterpret_cast<uintptr_t>(g) & 15);
  if (align == 0) {
    stage_width<16>(s, g, bytes);
  } else if (align % 8 == 0) {
    stage_width<8>(s, g, bytes);
  } else if (align % 4 == 0) {
    stage_width<4>(s, g, bytes);
  } else if (align % 2 == 0) {
    stage_width<2>(s, g, bytes);
  } else {
    stage_width<1>(s, g, bytes);
  }
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // a in the low half, as in memory
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

struct StagedArgs {
  void* dst;              // (part_rows, cols) in T, 16-byte aligned: the part's first canonical row
  const uint8_t* src;     // (total_blocks, kBytes) blocks of stored rows row_begin.., back to back
  int64_t total_blocks;   // num_rows * cols / kElems
  int64_t num_chunks;     // ceil(total_blocks / chunk blocks)
  int64_t first_element;  // row_begin * cols: where stored row row_begin starts when head_dim == 0
  int row_begin, cols;    // cols: a multiple of kElems
  int head_dim;           // 0: rows in place; else part_rows / unpermute_heads (even)
};

// The first output element of the group at element `local_element` of a chunk that starts at
// stored row a.row_begin + chunk_row, column chunk_col, when rows are un-permuted.
template <typename T>
__device__ __forceinline__ T* group_output(const StagedArgs& a, int64_t chunk_row, int chunk_col,
                                           int local_element) {
  T* dst = static_cast<T*>(a.dst);
  // Un-permuted rows: whole rows move, so only the row of each group is remapped; 32-bit math
  // (row and col < 2^31) with one division per group, never per element.
  const unsigned cols = unsigned(a.cols), head_dim = unsigned(a.head_dim);
  const unsigned within_chunk = unsigned(chunk_col + local_element);  // < cols + 8192
  const unsigned r = within_chunk / cols, col = within_chunk - r * cols;
  const unsigned row = unsigned(a.row_begin + chunk_row) + r, within = row % head_dim;
  const unsigned out_row = row - within + (within & 1) * (head_dim >> 1) + (within >> 1);
  return dst + int64_t(out_row) * a.cols + col;
}

// At least kStagedBlocksPerSm resident blocks: caps registers at 48 (no spills; 64 unbounded, which
// leaves the K-quants at 4 blocks), so more chunks are in flight per SM.
template <typename F, typename T>
__global__ void __launch_bounds__(kStagedThreads, kStagedBlocksPerSm)
    dequantize_staged_kernel(StagedArgs a) {
  constexpr int kGroupsPerBlock = F::kElems / 8;
  constexpr int kChunkBlocks = kChunkGroups / kGroupsPerBlock;
  constexpr int kChunkBytes = kChunkBlocks * F::kBytes;
  static_assert(kChunkBytes % 16 == 0, "chunks must keep the source's alignment");
  // Two chunks: one being decoded, the next one landing.
  __shared__ __align__(16) uint8_t stage[2][kChunkBytes + kStagePad];
  const auto chunk_bytes = [&](int64_t chunk) {
    return int(std::min<int64_t>(kChunkBlocks, a.total_blocks - chunk * kChunkBlocks)) * F::kBytes;
  };
  int64_t chunk = blockIdx.x;
  // The blocks are constant weights at step time (at load time they come from a memcpy, which
  // PDL never overlaps: only a preceding kernel can still run), so the first chunk is fetched
  // before the wait, overlapping the previous kernel's tail. The destination (at step time the
  // scratch the previous GEMM read) is written only after the wait.
  if (chunk < a.num_chunks) stage_chunk(stage[0], a.src + chunk * kChunkBytes, chunk_bytes(chunk));
  cp_async_commit();
  pdl_wait();
  pdl_launch_dependents();
  const int64_t total_groups = a.total_blocks * kGroupsPerBlock;
  for (int buf = 0; chunk < a.num_chunks; chunk += gridDim.x, buf ^= 1) {
    const int64_t next = chunk + gridDim.x;
    if (next < a.num_chunks)
      stage_chunk(stage[buf ^ 1], a.src + next * kChunkBytes, chunk_bytes(next));
    cp_async_commit();  // possibly empty: the wait below always leaves exactly the newest pending
    cp_async_wait_all_but_one();
    __syncthreads();  // every thread's copies of this chunk have landed
    const uint8_t* s = stage[buf];
    const int64_t first_group = chunk * kChunkGroups;
    const int groups = int(std::min<int64_t>(kChunkGroups, total_groups - first_group));
    int64_t chunk_row = 0;
    int chunk_col = 0;
    if (a.head_dim) {  // once per chunk: the row and column the chunk starts at
      chunk_row = first_group * 8 / a.cols;
      chunk_col = int(first_group * 8 - chunk_row * a.cols);
    }
#pragma unroll
    for (int j = 0; j < kGroupsPerThread; ++j) {
      const int group = j * kStagedThreads + int(threadIdx.x);
      if (group >= groups) break;
      float v[8];
      F::decode(s, group / kGroupsPerBlock * F::kBytes, group % kGroupsPerBlock, v);
      T* out = a.head_dim ? group_output<T>(a, chunk_row, chunk_col, 8 * group)
                          : static_cast<T*>(a.dst) + a.first_element + (first_group + group) * 8;
      *reinterpret_cast<uint4*>(out) = make_uint4(pack2<T>(v[0], v[1]), pack2<T>(v[2], v[3]),
                                                  pack2<T>(v[4], v[5]), pack2<T>(v[6], v[7]));
    }
    __syncthreads();  // the chunk is consumed before the next iteration stages into this buffer
  }
}

// Streaming multiprocessors of the current device (cached per device: asked once, not per launch).
int sm_count() {
  static std::atomic<int> counts[64];
  int device = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  int n = device < 64 ? counts[device].load(std::memory_order_relaxed) : 0;
  if (n == 0) {
    ROSE_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    if (device < 64) counts[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

template <typename F, typename T>
void launch_staged_typed(const StagedArgs& args, cudaStream_t stream) {
  auto* kernel = dequantize_staged_kernel<F, T>;
  // Resident blocks per SM (registers, shared memory): the grid fills the GPU exactly once and
  // loops over the chunks, so every resident block keeps a chunk in flight while it decodes one.
  static const int per_sm = [kernel] {
    int n = 0;
    ROSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kStagedThreads, 0));
    return std::max(n, 1);
  }();
  const int64_t grid = std::min<int64_t>(args.num_chunks, int64_t(per_sm) * sm_count());
  launch_kernel(kernel, dim3(unsigned(grid)), dim3(kStagedThreads), 0, stream, args);
  ROSE_CUDA_CHECK_LAUNCH();
}

template <typename F>
bool launch_staged(void* dst, DType dtype, const uint8_t* src, int64_t row_begin, int64_t num_rows,
                   int64_t part_rows, int64_t cols, int unpermute_heads, cudaStream_t stream) {
  constexpr int64_t kIntMax = 0x7fffffff;
  // 16-byte stores need a 16-byte aligned destination (a row is a multiple of 64 bytes); the
  // row arithmetic is 32-bit. Anything else takes the generic kernel, which gives the same bits.
  if (misaligned16(dst) || cols % F::kElems != 0 || part_rows > kIntMax ||
      cols > kIntMax - kChunkGroups * 8) {
    return false;
  }
  constexpr int64_t kChunkBlocks = kChunkGroups / (F::kElems / 8);
  StagedArgs args;
  args.dst = dst;
  args.src = src;
  args.total_blocks = num_rows * (cols / F::kElems);
  args.num_chunks = (args.total_blocks + kChunkBlocks - 1) / kChunkBlocks;
  args.first_element = row_begin * cols;
  args.row_begin = int(row_begin);
  args.cols = int(cols);
  args.head_dim = unpermute_heads > 0 ? int(part_rows / unpermute_heads) : 0;
  dispatch_dtype(
      dtype, [&](auto tag) { launch_staged_typed<F, typename decltype(tag)::type>(args, stream); });
  return true;
}

using StagedLauncher = bool (*)(void*, DType, const uint8_t*, int64_t, int64_t, int64_t, int64_t,
                                int, cudaStream_t);

StagedLauncher staged_launcher_for(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0:
      return launch_staged<StagedQ8_0>;
    case GgmlType::kQ4_0:
      return launch_staged<StagedQ4<false>>;
    case GgmlType::kQ4_1:
      return launch_staged<StagedQ4<true>>;
    case GgmlType::kQ4_K:
      return launch_staged<StagedQ4_K>;
    case GgmlType::kQ6_K:
      return launch_staged<StagedQ6_K>;
    default:
      return nullptr;
  }
}

Launcher checked_launcher(uint32_t ggml_type) {
  const Launcher launch = launcher_for(ggml_type);
  if (!launch)
    cuda_fail("no device decoder for this ggml type", "launch_dequantize_rows", __FILE__, __LINE__);
  return launch;
}

}  // namespace

bool device_dequant_supported(uint32_t ggml_type) { return launcher_for(ggml_type) != nullptr; }

void launch_dequantize_rows(void* dst, DType dtype, const uint8_t* src, uint32_t ggml_type,
                            int64_t row_begin, int64_t num_rows, int64_t part_rows, int64_t cols,
                            int unpermute_heads, cudaStream_t stream) {
  const Launcher launch = checked_launcher(ggml_type);
  if (num_rows <= 0 || cols <= 0) return;
  const StagedLauncher staged = staged_launcher_for(ggml_type);
  if (staged &&
      staged(dst, dtype, src, row_begin, num_rows, part_rows, cols, unpermute_heads, stream)) {
    return;
  }
  launch(dst, dtype, src, row_begin, num_rows, part_rows, cols, unpermute_heads, stream);
}

void launch_dequantize_rows_generic(void* dst, DType dtype, const uint8_t* src, uint32_t ggml_type,
                                    int64_t row_begin, int64_t num_rows, int64_t part_rows,
                                    int64_t cols, int unpermute_heads, cudaStream_t stream) {
  const Launcher launch = checked_launcher(ggml_type);
  if (num_rows <= 0 || cols <= 0) return;
  launch(dst, dtype, src, row_begin, num_rows, part_rows, cols, unpermute_heads, stream);
}

}  // namespace rose
