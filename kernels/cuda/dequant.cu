// Device decoders for the ggml block types, one per type family, each giving element `e` of one
// block. They follow the block layouts of the CPU reference (engine/model/quant.cpp) element by
// element. Every fp32 operation is an explicitly rounded intrinsic (__fmul_rn, __fadd_rn,
// __fsub_rn): nvcc would otherwise contract a multiply and an add into one fma, which rounds once
// where the reference (built for x86-64 without FMA) rounds twice, and the results must match the
// reference bit for bit. Load time is dominated by reading the file, so the kernel favours being
// plainly correct: one thread per output element, re-reading its block's scales through the cache.
#include <algorithm>

#include "kernels/common/ggml_type.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/ggml_block.cuh"

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
    dequantize_rows_kernel<D><<<grid, kThreads, 0, stream>>>(
        static_cast<T*>(dst), src, row_begin, num_rows, part_rows, cols, unpermute_heads);
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

}  // namespace

bool device_dequant_supported(uint32_t ggml_type) { return launcher_for(ggml_type) != nullptr; }

void launch_dequantize_rows(void* dst, DType dtype, const uint8_t* src, uint32_t ggml_type,
                            int64_t row_begin, int64_t num_rows, int64_t part_rows, int64_t cols,
                            int unpermute_heads, cudaStream_t stream) {
  const Launcher launch = launcher_for(ggml_type);
  if (!launch)
    cuda_fail("no device decoder for this ggml type", "launch_dequantize_rows", __FILE__, __LINE__);
  if (num_rows <= 0 || cols <= 0) return;
  launch(dst, dtype, src, row_begin, num_rows, part_rows, cols, unpermute_heads, stream);
}

}  // namespace rose
