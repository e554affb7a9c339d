#include <algorithm>
#include <map>
#include <mutex>

#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm_row.cuh"

namespace rose {
namespace {

constexpr int kWarps = 4;
constexpr int kChunk = 32 * 8;  // elements a warp covers with one 16-byte load per lane

// kStorePush: kStore that also stores each output into the peers (GemvFusion::push). An epilogue
// of its own, so the kernels without it stay as they were: a runtime push branch in every kernel
// raised the one-wave kernel's registers (56 -> 70 at one row, 85 -> 153 at four) and cost
// llama-1b's batch-1 step 7% and gpt2's 5-16% on one H200 (results/2026-11-29-tp-low-latency).
enum class Epilogue { kStore, kStoreF32, kGeluBias, kSiluMul, kStorePush };

// Lane 0's store of feature o's sums (acc: the warp sums of each weight row and input row) through
// epilogue E: y (n, out) in T or fp32, or added to the fp32 residual stream; with push, a stored
// row's output also goes to the peers' staging with the row's epoch (push_epochs).
//
// push_epochs: under kStorePush, each row's epoch for the push (peer_push_epoch), read by the
// block's first threads and shared before the block lets its dependents launch: every thread of
// the block calls it, right before pdl_launch_dependents.
template <Epilogue E, int kRows>
__device__ __forceinline__ void push_epochs(const PeerPush& push, int n, uint32_t (&epoch)[kRows]) {
  if constexpr (E == Epilogue::kStorePush) {  // nothing at all in the other kernels
    __shared__ uint32_t shared[kRows];
    if (int(threadIdx.x) < kRows && int(threadIdx.x) < n) {
      shared[threadIdx.x] = peer_push_epoch(push, int(threadIdx.x));
    }
    __syncthreads();
#pragma unroll
    for (int row = 0; row < kRows; ++row) epoch[row] = shared[row];
  }
}

template <typename T, Epilogue E, int kRows, int kWeightRows>
__device__ __forceinline__ void store_feature(const float (&acc)[kWeightRows][kRows], int n,
                                              int out, int o, const T* bias, void* y,
                                              bool residual_add, const PeerPush& push,
                                              const uint32_t (&epoch)[kRows]) {
#pragma unroll
  for (int row = 0; row < kRows; ++row) {
    if (row < n) {
      const int64_t at = int64_t(row) * out + o;
      if constexpr (E == Epilogue::kStoreF32) {
        static_cast<float*>(y)[at] = acc[0][row];
      } else if constexpr (E == Epilogue::kStore) {
        const T value = from_float<T>(acc[0][row]);
        if (residual_add) {  // y is the fp32 residual stream (gemv_fusion.cuh)
          float* residual = static_cast<float*>(y);
          residual[at] = residual[at] + to_float(value);  // launch_add_norm's residual + delta
        } else {
          static_cast<T*>(y)[at] = value;
        }
      } else if constexpr (E == Epilogue::kStorePush) {
        const T value = from_float<T>(acc[0][row]);
        static_cast<T*>(y)[at] = value;
        unsigned short bits;
        memcpy(&bits, &value, 2);
        peer_push_store(push, epoch[row], row, o, bits);
      } else if constexpr (E == Epilogue::kGeluBias) {
        float v = acc[0][row];
        if (bias) v += to_float(bias[o]);
        static_cast<T*>(y)[at] = from_float<T>(gelu_tanh(v));
      } else {
        const float g = acc[0][row];
        static_cast<T*>(y)[at] = from_float<T>(silu(g) * acc[kWeightRows - 1][row]);
      }
    }
  }
}

// acc[r][row] += the 8 products of weight row r's chunk wf[r] with x row `row` at elements
// at .. at + 7, for the rows r < n (x (n, in), every row reused from L1).
template <typename T, int kRows, int kWeightRows>
__device__ __forceinline__ void fold_chunk(const T* x, int n, int in, int at,
                                           const float (&wf)[kWeightRows][8],
                                           float (&acc)[kWeightRows][kRows]) {
#pragma unroll
  for (int row = 0; row < kRows; ++row) {
    if (row < n) {
      float xv[8];
      load_as_float<T, 8>(x + int64_t(row) * in + at, xv);
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][row] += wf[r][e] * xv[e];
      }
    }
  }
}

// Each lane's sums into the feature's: the warp's (a fixed xor tree), then, with kSplit warps a
// feature, the warps' in order through `partial` (kWarps, kWeightRows, kRows), after which the
// feature's first warp (part 0) holds them. Every thread of the block must call it (a barrier).
template <int kSplit, int kRows, int kWeightRows>
__device__ __forceinline__ void sum_feature(float (&acc)[kWeightRows][kRows],
                                            float (&partial)[kWarps][kWeightRows][kRows], int warp,
                                            int lane, int part) {
#pragma unroll
  for (int row = 0; row < kRows; ++row) {
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) acc[r][row] = warp_sum(acc[r][row]);
  }
  if constexpr (kSplit > 1) {
    if (lane == 0) {
#pragma unroll
      for (int row = 0; row < kRows; ++row) {
#pragma unroll
        for (int r = 0; r < kWeightRows; ++r) partial[warp][r][row] = acc[r][row];
      }
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int row = 0; row < kRows; ++row) {
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < kSplit; ++s) total += partial[warp + s][r][row];
        acc[r][row] = total;
      }
    }
  }
}

// Feature group `group` of a product: kWarps / kSplit output features o, each shared by kSplit
// warps that take every kSplit-th 512-byte chunk of its dot product, with kWeightRows weight rows
// per feature (2 for gate | up). Splitting puts more warps, hence more 16-byte loads, in flight
// when `out` is small (o/down projections: 2048 features = 15 warps per SM unsplit;
// docs/gpu-notes.md run 11). With kPre > 0 and use_pre, each lane's first kPre chunks of each
// weight row come from `pre` (loaded earlier, in the order loaded here) instead of memory. The
// feature's first lane stores it (store_feature). Every thread of the block calls this (a
// barrier when kSplit > 1).
template <typename T, Epilogue E, int kSplit, int kRows, int kPre, int kWeightRows>
__device__ __forceinline__ void product_group(const T* x, const T* w, const T* bias, void* y, int n,
                                              int in, int out, bool residual_add, int group,
                                              const uint4 (&pre)[kWeightRows][kPre > 0 ? kPre : 1],
                                              bool use_pre,
                                              float (&partial)[kWarps][kWeightRows][kRows],
                                              const PeerPush& push,
                                              const uint32_t (&epoch)[kRows]) {
  constexpr int kStride = kChunk * kSplit;  // elements between one lane's chunks
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int local = warp / kSplit, part = warp % kSplit;
  const int o = group * (kWarps / kSplit) + local;
  const bool active = o < out;  // no early exit: the block meets at a barrier below
  const T* w_row[kWeightRows];
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) w_row[r] = w + (int64_t(o) + int64_t(r) * out) * in;
  float acc[kWeightRows][kRows] = {};
  int c = (part * 32 + lane) * 8;
  if constexpr (kPre > 0) {
    if (use_pre) {
#pragma unroll
      for (int i = 0; i < kPre; ++i, c += kStride) {
        if (active && c < in) {
          float wf[kWeightRows][8];
#pragma unroll
          for (int r = 0; r < kWeightRows; ++r)
            load_as_float<T, 8>(reinterpret_cast<const T*>(&pre[r][i]), wf[r]);
          fold_chunk<T, kRows, kWeightRows>(x, n, in, c, wf, acc);
        }
      }
    }
  }
  // Measured (docs/gpu-notes.md, run 4): issuing 8 weight loads before any use was slower than
  // this plain loop, which the compiler unrolls and pipelines itself.
#pragma unroll 4
  for (; active && c < in; c += kStride) {
    float wf[kWeightRows][8];
#pragma unroll
    for (int r = 0; r < kWeightRows; ++r) load_as_float<T, 8>(w_row[r] + c, wf[r]);
    fold_chunk<T, kRows, kWeightRows>(x, n, in, c, wf, acc);
  }
  sum_feature<kSplit, kRows, kWeightRows>(acc, partial, warp, lane, part);
  if (part == 0 && active && lane == 0) {
    store_feature<T, E, kRows, kWeightRows>(acc, n, out, o, bias, y, residual_add, push, epoch);
  }
}

// Asks L2 for the first `bytes` of each weight row of feature group `group` (the chunks
// product_group reads first), before the PDL wait: weights are constants of the run, so a block
// resident while the previous kernel still runs gets its first loads under way. It pays at TP=1 as
// at TP=2 (prefetch_bytes()), so what it hides is each block's start, not only an exchange.
template <typename T, int kSplit, int kWeightRows>
__device__ __forceinline__ void prefetch_group_l2(const T* w, int in, int out, int group,
                                                  int bytes) {
  constexpr int kFeatures = kWarps / kSplit, kLine = 128;
  const int row_bytes = in * int(sizeof(T));
  const int lines = (std::min(bytes, row_bytes) + kLine - 1) / kLine;  // a row's
  for (int i = int(threadIdx.x); i < kFeatures * kWeightRows * lines; i += int(blockDim.x)) {
    const int line = i % lines, feature = i / lines % kFeatures, r = i / lines / kFeatures;
    const int o = group * kFeatures + feature;
    if (o >= out) continue;
    const char* p = reinterpret_cast<const char*>(w + (int64_t(o) + int64_t(r) * out) * in);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + int64_t(line) * kLine));
  }
}

// One block per feature group (product_group), after the PDL wait and an L2 prefetch of the
// group's first weight bytes (prefetch_group_l2, prefetch_bytes()). residual_add: y is the fp32
// residual stream, and each output, rounded to T, is added to it (gemv_fusion.cuh). kRows (1, 2 or
// 4) is the most input rows the kernel is compiled for (n <= kRows): a batch-1 kernel keeps one
// accumulator per weight row instead of four, so it needs fewer registers and more blocks fit on
// an SM (results/2026-11-24-gemv-rows). A row's sum is the same sequence of operations for every
// kRows and n, so row r of y does not depend on the other rows.
template <typename T, Epilogue E, int kSplit, int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* x, const T* w, const T* bias, void* y, int n, int in, int out,
                bool residual_add, int prefetch_bytes, PeerPush push) {
  constexpr int kWeightRows = E == Epilogue::kSiluMul ? 2 : 1;
  if (prefetch_bytes > 0) {
    prefetch_group_l2<T, kSplit, kWeightRows>(w, in, out, int(blockIdx.x), prefetch_bytes);
  }
  pdl_wait();
  uint32_t epoch[kRows] = {};
  push_epochs<E>(push, n, epoch);
  pdl_launch_dependents();
  __shared__ float partial[kWarps][kWeightRows][kRows];
  const uint4 none[kWeightRows][1] = {};
  product_group<T, E, kSplit, kRows, 0>(x, w, bias, y, n, in, out, residual_add, int(blockIdx.x),
                                        none, false, partial, push, epoch);
}

// The rows (n, in) RMSNorm(fusion.norm_residual) * fusion.norm_weight in T, launch_add_norm's
// bits, written into the block's dynamic shared memory (n * in elements of T); returns them. Every
// thread of the block must call it (barriers).
template <typename T, int kRows>
__device__ const T* normalize_rows(const GemvFusion& fusion, int n, int in) {
  extern __shared__ __align__(16) uint8_t normalized_smem[];
  __shared__ float scratch[kRows * kNormWarps];
  __shared__ float inv[kRows];
  rms_inverse_rows(fusion.norm_residual, n, in, fusion.norm_eps, scratch, inv);
  T* rows = reinterpret_cast<T*>(normalized_smem);
  for (int at = 8 * int(threadIdx.x); at < n * in; at += 8 * int(blockDim.x)) {
    *reinterpret_cast<uint4*>(rows + at) = normalized_words<T>(fusion, at, in, inv);
  }
  __syncthreads();
  return rows;
}

// The same products in one resident wave (the small products, wave_for): the grid holds only as
// many blocks as are resident at once, each takes feature groups blockIdx.x, + gridDim.x, ..., and
// its first group's first kPreChunks chunks of each weight row are loaded before the PDL wait, so
// they stream while the previous kernel finishes. Every feature's sum is the same sequence of
// operations as in gemv_kernel (product_group: the same chunks in the same order), so the bits
// match. With a norm input (fusion.norm_residual) each block first writes x, the normalized rows,
// into its shared memory (n, in), launch_add_norm's bits (norm_row.cuh): a block of the one wave
// does this once for all its groups, where gemv_kernel would repeat it in every one of its ~2,000
// blocks.
constexpr int kPreChunks = 2;

// The fewest blocks of gemv_wave_kernel an SM must hold, which caps its registers: the batch-1
// SiLU-gated kernel needs 72-78 registers uncapped, so only 7 blocks (28 warps) fit an SM; 8
// blocks cap it at 64, and 32 warps stream instead (SmolLM2-135M's shape, batch-1 decode on the
// H200: +2.0% against the previous build in one call, +4.9% on another machine;
// results/2026-11-29-fixed-costs). Not at split 4, where 64 registers spill; the other epilogues
// need 55-59 at one row and stay uncapped, as do the 2- and 4-row kernels.
template <Epilogue E, int kSplit, int kRows>
constexpr int wave_min_blocks() {
  return E == Epilogue::kSiluMul && kSplit <= 2 && kRows == 1 ? 8 : 1;
}

template <typename T, Epilogue E, int kSplit, int kRows>
__global__ void __launch_bounds__(kWarps * 32, wave_min_blocks<E, kSplit, kRows>())
    gemv_wave_kernel(const T* x, const T* w, const T* bias, void* y, int n, int in, int out,
                     GemvFusion fusion) {
  constexpr int kWeightRows = E == Epilogue::kSiluMul ? 2 : 1;
  constexpr int kFeaturesPerBlock = kWarps / kSplit;
  __shared__ float partial[kWarps][kWeightRows][kRows];
  // The first group's first chunks, as product_group takes them: weights are constants of the
  // run, safe to load before the wait.
  uint4 pre[kWeightRows][kPreChunks];
  {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int o = int(blockIdx.x) * kFeaturesPerBlock + warp / kSplit;
#pragma unroll
    for (int i = 0; i < kPreChunks; ++i) {
      const int c = ((warp % kSplit) * 32 + lane) * 8 + i * kChunk * kSplit;
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        pre[r][i] =
            o < out && c < in
                ? *reinterpret_cast<const uint4*>(w + (int64_t(o) + int64_t(r) * out) * in + c)
                : make_uint4(0, 0, 0, 0);
      }
    }
  }
  pdl_wait();
  uint32_t epoch[kRows] = {};
  push_epochs<E>(fusion.push, n, epoch);
  pdl_launch_dependents();
  if (fusion.norm_residual) x = normalize_rows<T, kRows>(fusion, n, in);
  const int groups = (out + kFeaturesPerBlock - 1) / kFeaturesPerBlock;
  for (int group = int(blockIdx.x); group < groups; group += int(gridDim.x)) {
    product_group<T, E, kSplit, kRows, kPreChunks>(x, w, bias, y, n, in, out, fusion.residual_add,
                                                   group, pre, group == int(blockIdx.x), partial,
                                                   fusion.push, epoch);
    if constexpr (kSplit > 1) __syncthreads();  // partial read before the next group writes it
  }
}

// Which products take gemv_wave_kernel: by default those whose rows the chunks it loads before the
// wait cover whole (in <= kPreChunks * kChunk * split), so a block holds all its first group's
// weights before it waits. Batch-1 decode on the H200: SmolLM2-135M's shape +8% (its four layer
// products qualify), llama-1b +2.3% (qkv and o), gpt2 0.4-2% slower (qkv, o and up). Taken for
// all matrices it cost llama-1b 6% and llama-8b 8% (its registers, 44-71 against 24-32 at one row,
// leave fewer warps streaming), and rows only partly preloaded (matrices up to 16 MiB) gained
// nothing measurable (results/2026-11-29-b1-overlap). KernelSwitches::gemv_wave 0: never, 1:
// always (comparisons, tests).
bool wave_for(int in, int split) {
  const int mode = kernel_switches().gemv_wave;
  if (mode >= 0) return mode == 1;
  return in <= kPreChunks * kChunk * split;
}

// The blocks of gemv_wave_kernel<T, E, kSplit, kRows> resident at once on the first device that
// asks (every GPU of a process is of one kind on our machines; on another kind the grid-stride
// loop still covers every group, with a grid sized for the first).
// smem: the launch's dynamic shared memory (a norm input's rows), a function of the model, so
// each kernel sees one or two sizes.
template <typename T, Epilogue E, int kSplit, int kRows>
int wave_capacity(size_t smem) {
  static std::mutex mutex;
  static std::map<size_t, int> capacity;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = capacity.find(smem);
  if (found != capacity.end()) return found->second;
  int device = 0, sms = 0, per_sm = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  ROSE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ROSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, gemv_wave_kernel<T, E, kSplit, kRows>, kWarps * 32, smem));
  return capacity[smem] = std::max(1, sms * per_sm);
}

// groups feature groups on the one-wave kernel compiled for kRows rows: a grid of one resident
// wave in which every block takes the same number of groups.
template <typename T, Epilogue E, int kSplit, int kRows>
void launch_wave(const T* x, const T* w, const T* bias, void* y, int n, int in, int out, int groups,
                 const GemvFusion& fusion, cudaStream_t stream) {
  const size_t smem = fusion.norm_residual ? size_t(n) * in * sizeof(T) : 0;
  const int capacity = wave_capacity<T, E, kSplit, kRows>(smem);
  const int per_block = (groups + capacity - 1) / capacity;
  launch_kernel(gemv_wave_kernel<T, E, kSplit, kRows>, (groups + per_block - 1) / per_block,
                kWarps * 32, smem, stream, x, w, bias, y, n, in, out, fusion);
}

// KernelSwitches::gemv_max_split 1 (ROSEINFER_CUDA_GEMV_SPLIT=1) forces one warp per feature (the
// layout before run 11), for before/after comparisons with one binary.
int max_split() { return kernel_switches().gemv_max_split; }

// KernelSwitches::gemv_rows_specialized false (ROSEINFER_CUDA_GEMV_ROWS=4) runs every n on the
// kernel compiled for 4 rows (the one kernel before the batch-1 and batch-2 ones).
bool rows_specialized() { return kernel_switches().gemv_rows_specialized; }

// gemv_kernel's L2 prefetch of each weight row's first bytes before the PDL wait
// (prefetch_group_l2). 768 bytes measured best of 256-4,096 on llama-8b at batch 1, two H200s:
// TP=1 -1.1%, TP=2 -1.6% (1,024 close behind, 2,048 no gain, 4,096 +5-9%: the prefetches crowd out
// the demand loads); results/2026-11-29-tp-prefetch. KernelSwitches::gemv_prefetch_bytes
// (ROSEINFER_CUDA_GEMV_PREFETCH=bytes) sets it, 0 turns it off.
int prefetch_bytes() { return kernel_switches().gemv_prefetch_bytes; }

template <typename T, Epilogue E, int kSplit>
void launch_rows(const T* x, const T* w, const T* bias, void* y, int n, int in, int out,
                 const GemvFusion& fusion, cudaStream_t stream) {
  const int blocks = (out + kWarps / kSplit - 1) / (kWarps / kSplit);
  if (wave_for(in, kSplit)) {  // always with a norm input (launch_dtype checks it)
    if (n == 1 && rows_specialized()) {
      launch_wave<T, E, kSplit, 1>(x, w, bias, y, n, in, out, blocks, fusion, stream);
    } else if (n == 2 && rows_specialized()) {
      launch_wave<T, E, kSplit, 2>(x, w, bias, y, n, in, out, blocks, fusion, stream);
    } else {
      launch_wave<T, E, kSplit, kGemvMaxRows>(x, w, bias, y, n, in, out, blocks, fusion, stream);
    }
    return;
  }
  auto* kernel = gemv_kernel<T, E, kSplit, kGemvMaxRows>;
  if (n == 1 && rows_specialized()) kernel = gemv_kernel<T, E, kSplit, 1>;
  if (n == 2 && rows_specialized()) kernel = gemv_kernel<T, E, kSplit, 2>;
  launch_kernel(kernel, blocks, kWarps * 32, 0, stream, x, w, bias, y, n, in, out,
                fusion.residual_add, prefetch_bytes(), fusion.push);
}

// The warps a feature's dot product is split over (gemv_split, capped by the switch below).
int split_for(int in, int out) { return std::min(gemv_split(in, out), max_split()); }

template <typename T, Epilogue E>
void launch_typed(const void* x, const void* w, const void* bias, void* y, int n, int in, int out,
                  const GemvFusion& fusion, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(w);
  const T* bt = static_cast<const T*>(bias);
  const int split = split_for(in, out);
  if (split == 4) {
    launch_rows<T, E, 4>(xt, wt, bt, y, n, in, out, fusion, stream);
  } else if (split == 2) {
    launch_rows<T, E, 2>(xt, wt, bt, y, n, in, out, fusion, stream);
  } else {
    launch_rows<T, E, 1>(xt, wt, bt, y, n, in, out, fusion, stream);
  }
}

template <Epilogue E>
void launch_dtype(const void* x, const void* w, const void* bias, void* y, int n, int in, int out,
                  const GemvFusion& fusion, DType dtype, cudaStream_t stream) {
  if (!gemv_supported(n, in)) {
    cuda_fail("unsupported shape (n > 4 or in not a multiple of 8)", "launch_gemv", __FILE__,
              __LINE__);
  }
  if (fusion.norm_residual) {
    if ((E != Epilogue::kStore && E != Epilogue::kSiluMul) || fusion.residual_add ||
        !gemv_norm_input_supported(n, in, out)) {
      cuda_fail(
          "a norm input needs a plain or SiLU-gated product on the one-wave kernel (see "
          "gemv.cuh)",
          "launch_gemv", __FILE__, __LINE__);
    }
    if (misaligned16(fusion.norm_residual) || misaligned16(fusion.norm_weight)) {
      cuda_fail("misaligned norm residual or weight (16 bytes needed)", "launch_gemv", __FILE__,
                __LINE__);
    }
  }
  if (fusion.residual_add && E != Epilogue::kStore) {
    cuda_fail("the residual add follows the plain product only", "launch_gemv", __FILE__, __LINE__);
  }
  if ((E == Epilogue::kStorePush) != (fusion.push.size > 1) ||
      (E == Epilogue::kStorePush && (fusion.residual_add || fusion.norm_residual))) {
    cuda_fail("a peer push follows the plain product stored in the dtype only", "launch_gemv",
              __FILE__, __LINE__);
  }
  dispatch_dtype(dtype, [&](auto tag) {
    launch_typed<typename decltype(tag)::type, E>(x, w, bias, y, n, in, out, fusion, stream);
  });
}

}  // namespace

bool gemv_norm_input_supported(int n, int in, int out) {
  return gemv_supported(n, in) && wave_for(in, split_for(in, out)) &&
         int64_t(n) * in * 2 <= kGemvNormInputMaxBytes;
}

void launch_gemv(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                 DType dtype, cudaStream_t stream, const GemvFusion& fusion) {
  if (f32_out) {
    launch_dtype<Epilogue::kStoreF32>(x, w, nullptr, y, n, in, out, fusion, dtype, stream);
  } else if (fusion.push.size > 1) {
    launch_dtype<Epilogue::kStorePush>(x, w, nullptr, y, n, in, out, fusion, dtype, stream);
  } else {
    launch_dtype<Epilogue::kStore>(x, w, nullptr, y, n, in, out, fusion, dtype, stream);
  }
}

void launch_gemv_act(const void* x, const void* w, const void* bias, void* y, int n, int in,
                     int out, GemvActivation act, DType dtype, cudaStream_t stream,
                     const GemvFusion& fusion) {
  if (act == GemvActivation::kGeluTanhBias) {
    launch_dtype<Epilogue::kGeluBias>(x, w, bias, y, n, in, out, fusion, dtype, stream);
  } else {
    launch_dtype<Epilogue::kSiluMul>(x, w, nullptr, y, n, in, out, fusion, dtype, stream);
  }
}

}  // namespace rose
