#include "kernels/common/error.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/gemv_mma.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tile_ptx.cuh"

namespace rose {
namespace {

constexpr int kWarps = 8;  // a block's warps split `in`: step s (32 elements) goes to warp s % 8
constexpr int kThreads = kWarps * 32;
constexpr int kStep = 32;  // elements of a weight row a warp step covers (16 bytes a lane)

// Row tiles (16 features each) a block: each x word loaded feeds that many tiles' mmas, so more
// of them cut the x reads (from L2) per weight byte; fewer give more blocks. The kernel switch
// ROSEINFER_CUDA_GEMV_MMA_ROW_TILES=1|2|4 fixes it; unset, one: on an H200 one tile a block made
// gpt2's and SmolLM2-135M's decode steps 5-12% shorter than two at 5-32 rows, and four was
// slower still per product (results/2026-12-02-gemv-mma/3_final).
int row_tiles_for() {
  const int fixed = kernel_switches().gemv_mma_row_tiles;
  return fixed > 0 ? fixed : 1;
}

// The mma's k index is a label: any order of the 16 elements works as long as A and B use the
// same one. Lane (g = lane / 4, t = lane % 4) loads elements 8t..8t+7 of a 32-element step as one
// 16-byte word (4 registers of 2) of weight rows g and g+8 and of input row g of each column tile;
// the fragment's k pairs (2t, 2t+1) and (2t+8, 2t+9) of the first mma are registers 0 and 1, of
// the second mma registers 2 and 3. So each lane's bytes go to the tensor core as loaded.
struct Words {
  uint32_t r[4];
};

__device__ __forceinline__ Words load_words(const void* p) {
  const uint4 v = *static_cast<const uint4*>(p);
  return Words{{v.x, v.y, v.z, v.w}};
}

// Weights are read once: no L1 allocation (they would evict x, which every block reads).
__device__ __forceinline__ Words load_weight_words(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return Words{{v.x, v.y, v.z, v.w}};
}

// One block: kRowTiles x 16 weight rows (features) by kColTiles x 8 input rows, over all of `in`.
// Warp w takes the 32-element steps w, w + 8, ..., kUnroll steps' loads in flight at once; the
// 8 warps' accumulators then meet in shared memory, added in warp order.
//   x: (n, in) T; w: (out, in) T; y: (n, out) T, or fp32 when kF32Out.
template <typename T, int kRowTiles, int kColTiles, int kUnroll, bool kF32Out>
__global__ void __launch_bounds__(kThreads)
    gemv_mma_kernel(const T* __restrict__ x, const T* __restrict__ w, void* __restrict__ y, int n,
                    int in, int out) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int feature0 = int(blockIdx.x) * 16 * kRowTiles;
  const int steps = in / kStep;
  // Rows past the end read the last row (their outputs are not stored): no branch in the loop.
  const T* wrow[kRowTiles][2];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = min(feature0 + rt * 16 + half * 8 + g, out - 1);
      wrow[rt][half] = w + int64_t(row) * in + 8 * t;
    }
  }
  const T* xrow[kColTiles];
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) xrow[c] = x + int64_t(min(c * 8 + g, n - 1)) * in + 8 * t;

  float acc[kRowTiles][kColTiles][4] = {};
  Words wv[kUnroll][kRowTiles][2];
  const auto load_weights = [&](int first) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = first + u * kWarps;
      if (s < steps) {
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            wv[u][rt][half] = load_weight_words(wrow[rt][half] + int64_t(s) * kStep);
          }
        }
      }
    }
  };
  // The weights are constants of the run (the header's contract): the first group is loaded before
  // the PDL wait, while the previous kernel (which writes x) finishes.
  load_weights(warp);
  pdl_wait();
  for (int first = warp; first < steps; first += kWarps * kUnroll) {
    if (first != warp) load_weights(first);
    Words xv[kUnroll][kColTiles];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = first + u * kWarps;
      if (s < steps) {
#pragma unroll
        for (int c = 0; c < kColTiles; ++c) xv[u][c] = load_words(xrow[c] + int64_t(s) * kStep);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (first + u * kWarps >= steps) break;
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
        const Words& lo = wv[u][rt][0];  // rows g
        const Words& hi = wv[u][rt][1];  // rows g + 8
        const uint32_t a0[4] = {lo.r[0], hi.r[0], lo.r[1], hi.r[1]};
        const uint32_t a1[4] = {lo.r[2], hi.r[2], lo.r[3], hi.r[3]};
#pragma unroll
        for (int c = 0; c < kColTiles; ++c) {
          mma_16816<T>(acc[rt][c], a0, xv[u][c].r[0], xv[u][c].r[1]);
          mma_16816<T>(acc[rt][c], a1, xv[u][c].r[2], xv[u][c].r[3]);
        }
      }
    }
  }
  pdl_launch_dependents();

  // block_sum: (kOutputs,) fp32 at ((rt * kColTiles + c) * 4 + j) * 32 + lane, the block's
  // warps added in warp order, one warp at a time (a (kWarps, kOutputs) staging for one pass
  // would take up to 64 KiB).
  constexpr int kOutputs = kRowTiles * kColTiles * 4 * 32;
  __shared__ float block_sum[kOutputs];
  for (int v = 0; v < kWarps; ++v) {
    if (warp == v) {
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
        for (int c = 0; c < kColTiles; ++c) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            float& sum = block_sum[((rt * kColTiles + c) * 4 + j) * 32 + lane];
            sum = v == 0 ? acc[rt][c][j] : sum + acc[rt][c][j];
          }
        }
      }
    }
    __syncthreads();
  }
  for (int i = int(threadIdx.x); i < kOutputs; i += kThreads) {
    // C fragment: c_j = C[g + 8 (j / 2)][2t + j % 2] of lane l = (g, t).
    const int l = i % 32, j = (i / 32) % 4, c = (i / 128) % kColTiles, rt = i / (128 * kColTiles);
    const int feature = feature0 + rt * 16 + l / 4 + 8 * (j / 2);
    const int row = c * 8 + 2 * (l % 4) + j % 2;
    if (feature < out && row < n) {
      const int64_t at = int64_t(row) * out + feature;
      if constexpr (kF32Out) {
        static_cast<float*>(y)[at] = block_sum[i];
      } else {
        static_cast<T*>(y)[at] = from_float<T>(block_sum[i]);
      }
    }
  }
}

template <typename T, int kRowTiles, int kColTiles, bool kF32Out>
void launch_tiles(const void* x, const void* w, void* y, int n, int in, int out,
                  cudaStream_t stream) {
  // Four steps in flight a warp (4 KB of weights at one row tile); at three or four column tiles
  // two, and fewer at more row tiles, so the weight and x words (kUnroll x (8 kRowTiles + 4
  // kColTiles) registers) and the accumulators (16 kRowTiles kColTiles) stay within ~128.
  constexpr int kSteps = kColTiles <= 2 ? 4 : 2;
  constexpr int kUnroll = kSteps / kRowTiles > 0 ? kSteps / kRowTiles : 1;
  const int per_block = 16 * kRowTiles;
  launch_kernel(gemv_mma_kernel<T, kRowTiles, kColTiles, kUnroll, kF32Out>,
                dim3(unsigned((out + per_block - 1) / per_block)), dim3(kThreads), 0, stream,
                static_cast<const T*>(x), static_cast<const T*>(w), y, n, in, out);
}

template <typename T, int kRowTiles, bool kF32Out>
void launch_rows(const void* x, const void* w, void* y, int n, int in, int out,
                 cudaStream_t stream) {
  switch ((n + 7) / 8) {
    case 1:
      return launch_tiles<T, kRowTiles, 1, kF32Out>(x, w, y, n, in, out, stream);
    case 2:
      return launch_tiles<T, kRowTiles, 2, kF32Out>(x, w, y, n, in, out, stream);
    case 3:
      return launch_tiles<T, kRowTiles, 3, kF32Out>(x, w, y, n, in, out, stream);
    default:
      return launch_tiles<T, kRowTiles, 4, kF32Out>(x, w, y, n, in, out, stream);
  }
}

template <typename T, bool kF32Out>
void launch_typed(const void* x, const void* w, void* y, int n, int in, int out,
                  cudaStream_t stream) {
  switch (row_tiles_for()) {
    case 1:
      return launch_rows<T, 1, kF32Out>(x, w, y, n, in, out, stream);
    case 2:
      return launch_rows<T, 2, kF32Out>(x, w, y, n, in, out, stream);
    default:
      return launch_rows<T, 4, kF32Out>(x, w, y, n, in, out, stream);
  }
}

}  // namespace

void launch_gemv_mma(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                     DType dtype, cudaStream_t stream) {
  ROSE_ASSERT(gemv_mma_supported(n, in) && out > 0);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    f32_out ? launch_typed<T, true>(x, w, y, n, in, out, stream)
            : launch_typed<T, false>(x, w, y, n, in, out, stream);
  });
}

}  // namespace rose
