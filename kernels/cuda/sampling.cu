#include "kernels/common/sampling_rule.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sampling.cuh"

namespace rose {
namespace {

constexpr int kThreads = 1024;

// Order-preserving map of a float to uint32: a < b  <=>  key(a) < key(b) (for non-NaN values).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t bits = __float_as_uint(f);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(int32_t* sampled, const float* logits, const SampleRowParams* params, int vocab) {
  pdl_wait();
  pdl_launch_dependents();
  __shared__ float scratch[32];
  __shared__ int best_index;
  __shared__ int pick;
  __shared__ int last_kept;
  __shared__ float warp_total[32];
  __shared__ int non_finite;
  const int row_id = blockIdx.x;
  const SampleRowParams prm = params[row_id];
  if (!prm.do_sample) {
    if (threadIdx.x == 0) sampled[row_id] = -1;
    return;
  }
  const float* row = logits + int64_t(row_id) * vocab;

  // Greedy: the maximum, lowest id on ties. Also the max of the scaled logits for the softmax.
  float vmax = -INFINITY;
  int imax = vocab;
  bool own_non_finite = false;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    own_non_finite |= !isfinite(v);
    if (v > vmax) {  // ascending i per thread: strict > keeps the lowest id
      vmax = v;
      imax = i;
    }
  }
  const float row_max = block_max(vmax, scratch);
  if (threadIdx.x == 0) {
    best_index = vocab;
    non_finite = 0;
  }
  __syncthreads();
  if (vmax == row_max) atomicMin(&best_index, imax);
  if (own_non_finite) non_finite = 1;
  __syncthreads();
  // The per-sequence flag travels in the id (kSampledNonFinite) with the one copy of the ids.
  if (non_finite) {
    if (threadIdx.x == 0) sampled[row_id] = kSampledNonFinite;
    return;
  }
  if (prm.temperature <= 0.0f) {
    if (threadIdx.x == 0) sampled[row_id] = best_index < vocab ? best_index : 0;
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
    sampled[row_id] = pick < vocab ? pick : (last_kept >= 0 ? last_kept : best_index);
  }
}

}  // namespace

void launch_sample(int32_t* sampled, const float* logits, const SampleRowParams* params,
                   int num_rows, int vocab, cudaStream_t stream) {
  if (num_rows <= 0) return;
  launch_kernel(sample_kernel, num_rows, kThreads, 0, stream, sampled, logits, params, vocab);
  ROSE_CUDA_CHECK_LAUNCH();
}

}  // namespace rose
