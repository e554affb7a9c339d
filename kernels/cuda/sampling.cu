#include <algorithm>

#include "kernels/common/sampling_rule.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sampling.cuh"
#include "kernels/cuda/trace_probe.cuh"

namespace rose {
namespace {

constexpr int kThreads = 1024;

// Order-preserving map of a float to uint32: a < b  <=>  key(a) < key(b) (for non-NaN values).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// One (max, index) result of a split's slice; index -1: the slice held a NaN or an infinity.
struct alignas(8) SplitPartial {  // one 8-byte load
  float max;
  int index;
};
static_assert(sizeof(SplitPartial) == 8, "sample_scratch_bytes counts 8 bytes per partial");

// Few rows: at least this many vocabulary entries per split, and about this many blocks in all.
constexpr int kMinPerSplit = 2048;
constexpr int kTargetBlocks = 128;

// grid (rows, splits); split_scratch: (rows, kSampleRecordBytes) (sampling_rule.h). Every split's
// block finds the maximum of its slice of the row (lowest id on ties) and whether the slice holds a
// non-finite value; with several splits, the last block of a row to arrive (a counter, reset by
// that block) combines them and alone goes on to the sampling rule. The result does not depend on
// the split count: a maximum and the lowest id reaching it are the same whatever the slices.
__device__ __forceinline__ void store_sampled(const SampleTargets& targets, int out_base, int row,
                                              int32_t id) {
  targets.ids[out_base + row] = id;
  if (targets.device_ids) targets.device_ids[row] = id;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(SampleTargets targets, const float* logits, const SampleRowParams* params,
                  int vocab, uint8_t* split_scratch) {
  trace_probe::Stamps stamps;  // probe builds only (trace_probe.cuh): the step's end
  stamps.start();
  // The step's metadata (the slot offset) was copied in before its first kernel.
  const int out_base = targets.slot_offset ? *targets.slot_offset : 0;
  pdl_wait();
  pdl_launch_dependents();
  stamps.wait_done();
  stamps.finish(-3, vocab);
  __shared__ float scratch[32];
  __shared__ int best_index;
  __shared__ int pick;
  __shared__ int last_kept;
  __shared__ float warp_total[32];
  __shared__ int non_finite;
  __shared__ float shared_max;
  __shared__ int is_last;
  const int row_id = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const SampleRowParams prm = params[row_id];
  if (!prm.do_sample) {
    if (threadIdx.x == 0 && split == 0) store_sampled(targets, out_base, row_id, -1);
    return;
  }
  const float* row = logits + int64_t(row_id) * vocab;

  // Greedy: the maximum, lowest id on ties. Also the max of the scaled logits for the softmax.
  const int per_split = (vocab + splits - 1) / splits;
  const int slice_begin = min(vocab, split * per_split);
  const int slice_end = min(vocab, slice_begin + per_split);
  float vmax = -INFINITY;
  int imax = vocab;
  bool own_non_finite = false;
  for (int i = slice_begin + int(threadIdx.x); i < slice_end; i += kThreads) {
    const float v = row[i];
    own_non_finite |= !isfinite(v);
    if (v > vmax) {  // ascending i per thread: strict > keeps the lowest id
      vmax = v;
      imax = i;
    }
  }
  float row_max = block_max(vmax, scratch);
  if (threadIdx.x == 0) {
    best_index = vocab;
    non_finite = 0;
  }
  __syncthreads();
  if (vmax == row_max) atomicMin(&best_index, imax);
  if (own_non_finite) non_finite = 1;
  __syncthreads();
  if (splits > 1) {
    uint8_t* record = split_scratch + int64_t(row_id) * kSampleRecordBytes;
    int32_t* counter = reinterpret_cast<int32_t*>(record);
    SplitPartial* row_partials = reinterpret_cast<SplitPartial*>(record + 8);
    if (threadIdx.x == 0) {
      row_partials[split] = SplitPartial{row_max, non_finite ? -1 : best_index};
      __threadfence();  // the partial is visible before the arrival is counted
      is_last = atomicAdd(counter, 1) == splits - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    if (threadIdx.x < 32) {  // warp 0 combines the splits' partials
      float m = -INFINITY;
      int index = vocab;
      bool bad = false;
      if (int(threadIdx.x) < splits) {
        const float2 raw = __ldcg(reinterpret_cast<const float2*>(row_partials) + threadIdx.x);
        m = raw.x;
        index = __float_as_int(raw.y);
        bad = index < 0;
      }
      const float combined = warp_max(m);
      int lowest = !bad && m == combined ? index : vocab;
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        lowest = min(lowest, __shfl_xor_sync(0xffffffffu, lowest, offset));
      }
      bad = __any_sync(0xffffffffu, bad);
      if (threadIdx.x == 0) {
        shared_max = combined;
        best_index = lowest;
        non_finite = bad ? 1 : 0;
        *counter = 0;  // ready for the next launch
      }
    }
    __syncthreads();
    row_max = shared_max;
  }
  // The per-sequence flag travels in the id (kSampledNonFinite) with the one copy of the ids.
  if (non_finite) {
    if (threadIdx.x == 0) store_sampled(targets, out_base, row_id, kSampledNonFinite);
    return;
  }
  if (prm.temperature <= 0.0f) {
    if (threadIdx.x == 0) {
      store_sampled(targets, out_base, row_id, best_index < vocab ? best_index : 0);
    }
    return;
  }

  const float temperature = prm.temperature;
  auto scaled = [&](int i) { return row[i] / temperature; };
  const float scaled_max = row_max / temperature;

  // top-k: the largest key K with count(key(l) >= K) >= k is the k-th largest value.
  uint32_t k_key = 0;
  if (prm.top_k > 0 && prm.top_k < vocab) {
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = k_key | (1u << bit);
      float count = 0.0f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) count += order_key(scaled(i)) >= cand;
      if (block_sum(count, scratch) >= static_cast<float>(prm.top_k)) k_key = cand;
    }
  }
  auto weight_if_kept = [&](int i, uint32_t min_key) {
    const float l = scaled(i);
    return order_key(l) >= min_key ? expf(l - scaled_max) : 0.0f;
  };
  float z = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) z += weight_if_kept(i, k_key);
  z = block_sum(z, scratch);

  // top-p: the largest key P with sum(p over key(l) >= P) >= top_p (p monotone in l).
  uint32_t min_key = k_key;
  if (prm.top_p < 1.0f) {
    const float target = prm.top_p * z;
    uint32_t p_key = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = p_key | (1u << bit);
      const uint32_t threshold = cand > k_key ? cand : k_key;
      float mass = 0.0f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) mass += weight_if_kept(i, threshold);
      if (block_sum(mass, scratch) >= target) p_key = cand;
    }
    if (p_key > min_key) min_key = p_key;
  }

  // Ordered scan: each thread owns a contiguous chunk of ids.
  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, threadIdx.x * chunk), end = min(vocab, begin + chunk);
  float own = 0.0f;
  int own_last = -1;
  for (int i = begin; i < end; ++i) {
    const float w = weight_if_kept(i, min_key);
    own += w;
    if (w > 0.0f || order_key(scaled(i)) >= min_key) own_last = i;
  }
  if (threadIdx.x == 0) {
    pick = vocab;
    last_kept = -1;
  }
  // Exclusive prefix of the chunk sums in thread order: warp scans, then a scan of warp totals.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float inclusive = own;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += y;
  }
  if (lane == 31) warp_total[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    float t = warp_total[lane];
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const float y = __shfl_up_sync(0xffffffffu, t, offset);
      if (lane >= offset) t += y;
    }
    warp_total[lane] = t;
  }
  __syncthreads();
  const float total = warp_total[31];
  const float prefix = inclusive - own + (warp > 0 ? warp_total[warp - 1] : 0.0f);
  const float target = sampling_uniform(prm.seed, prm.sample_index) * total;
  if (own_last >= 0) atomicMax(&last_kept, own_last);
  float running = prefix;
  if (running + own > target) {
    for (int i = begin; i < end; ++i) {
      running += weight_if_kept(i, min_key);
      if (running > target && order_key(scaled(i)) >= min_key) {
        atomicMin(&pick, i);
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    store_sampled(targets, out_base, row_id,
                  pick < vocab ? pick : (last_kept >= 0 ? last_kept : best_index));
  }
}

}  // namespace

int sample_splits(int num_rows, int vocab) {
  const int by_rows = std::max(1, kTargetBlocks / std::max(1, num_rows));
  const int by_vocab = std::max(1, vocab / kMinPerSplit);
  return std::min({kSampleMaxSplits, by_rows, by_vocab});
}

void launch_sample(const SampleTargets& targets, const float* logits, const SampleRowParams* params,
                   int num_rows, int vocab, void* scratch, cudaStream_t stream) {
  if (num_rows <= 0) return;
  const dim3 grid(unsigned(num_rows), unsigned(sample_splits(num_rows, vocab)));
  launch_kernel(sample_kernel, grid, dim3(kThreads), 0, stream, targets, logits, params, vocab,
                static_cast<uint8_t*>(scratch));
  ROSE_CUDA_CHECK_LAUNCH();
}

void launch_sample(int32_t* sampled, const float* logits, const SampleRowParams* params,
                   int num_rows, int vocab, void* scratch, cudaStream_t stream) {
  launch_sample(SampleTargets{sampled, nullptr, nullptr}, logits, params, num_rows, vocab, scratch,
                stream);
}

bool trace_probe::dump_sampling(std::FILE* f, std::string* error) {
  return trace_probe::write_ring(f, "sample", error);
}

}  // namespace rose
