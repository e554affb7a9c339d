// Timing driver for one layer's prefill attention, the split-KV CUDA-core kernel
// (launch_paged_attention) against the tensor-core one (launch_prefill_attention), on llama-1b
// shapes (32 query heads, 8 KV heads, head_dim 64, bf16, block size 16, shuffled blocks): B = 256
// prompts of 512 tokens in one step (the grid benchmark's prefill) and 16 prompts of 4096. Prints
// microseconds per call and achieved TFLOP/s (causal: 4 * head_dim * heads FLOP per (query, key)
// pair it attends to). Also compares the two outputs (max abs difference), so a broken kernel shows
// here too. A timing driver, not a test: built as gpu_bench_prefill_attention, not run by ctest.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/fill.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using namespace rose::gputest;

namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 64, kBlockSize = 16;

template <typename Launch>
double time_us(Launch launch, int reps) {
  for (int i = 0; i < 2; ++i) launch();  // warm up (kernel load, smem opt-in)
  cudaEvent_t start, stop;
  ROSE_CUDA_CHECK(cudaEventCreate(&start));
  ROSE_CUDA_CHECK(cudaEventCreate(&stop));
  ROSE_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) launch();
  ROSE_CUDA_CHECK(cudaEventRecord(stop));
  ROSE_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  ROSE_CUDA_CHECK(cudaEventDestroy(start));
  ROSE_CUDA_CHECK(cudaEventDestroy(stop));
  return 1000.0 * ms / reps;
}

void bench(int num_seqs, int prompt_len) {
  const int n = num_seqs * prompt_len;
  const int q_dim = kHeads * kHeadDim, kv_dim = kKvHeads * kHeadDim;
  const int q_stride = q_dim + 2 * kv_dim;  // the backend's qkv rows
  const int blocks_per_seq = (prompt_len + kBlockSize - 1) / kBlockSize;
  const int num_blocks = num_seqs * blocks_per_seq;
  std::mt19937 rng(7);
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> query_start(num_seqs + 1), context_lens(num_seqs, prompt_len), token_seq(n);
  for (int s = 0; s <= num_seqs; ++s) query_start[s] = s * prompt_len;
  for (int i = 0; i < n; ++i) token_seq[i] = i / prompt_len;

  DeviceArray<uint16_t> d_q(size_t(n) * q_stride), d_k(size_t(num_blocks) * kBlockSize * kv_dim),
      d_v(d_k.size()), d_out_old(size_t(n) * q_dim), d_out_new(size_t(n) * q_dim);
  launch_fill_uniform(d_q.get(), DType::kBF16, int64_t(d_q.size()), 1, 2.0f, nullptr);
  launch_fill_uniform(d_k.get(), DType::kBF16, int64_t(d_k.size()), 2, 2.0f, nullptr);
  launch_fill_uniform(d_v.get(), DType::kBF16, int64_t(d_v.size()), 3, 1.0f, nullptr);
  DeviceArray<int32_t> d_tables(ids), d_stride(std::vector<int32_t>{blocks_per_seq}),
      d_qs(query_start), d_ctx(context_lens), d_seq(token_seq);

  int device = 0, sms = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  ROSE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int splits = attention_num_splits(n, kKvHeads, kHeads, 4 * sms, 32);  // as the backend
  DeviceArray<float> d_part(size_t(n) * kHeads * splits * kHeadDim),
      d_lse(size_t(n) * kHeads * splits);
  DeviceArray<int32_t> d_counters(
      std::vector<int32_t>(size_t(attention_merge_counters(n, kKvHeads, kHeads)), 0));

  AttentionArgs args;
  args.q = d_q.get();
  args.q_stride = q_stride;
  args.k_cache = d_k.get();
  args.v_cache = d_v.get();
  args.block_tables = d_tables.get();
  args.block_table_stride = d_stride.get();
  args.query_start = d_qs.get();
  args.context_lens = d_ctx.get();
  args.token_seq = d_seq.get();
  args.partial_out = d_part.get();
  args.partial_lse = d_lse.get();
  args.merge_counters = d_counters.get();
  args.num_tokens = n;
  args.num_heads = kHeads;
  args.num_kv_heads = kKvHeads;
  args.head_dim = kHeadDim;
  args.block_size = kBlockSize;
  args.num_splits = splits;
  args.scale = 1.0f / std::sqrt(float(kHeadDim));
  args.dtype = DType::kBF16;

  AttentionArgs old_args = args, new_args = args;
  old_args.out = d_out_old.get();
  new_args.out = d_out_new.get();
  const int reps = num_seqs * prompt_len >= 65536 ? 10 : 20;
  const double old_us = time_us([&] { launch_paged_attention(old_args, nullptr); }, reps);
  const double new_us =
      time_us([&] { launch_prefill_attention(new_args, num_seqs, prompt_len, nullptr); }, reps);
  ROSE_CUDA_CHECK(cudaGetLastError());

  // Causal pairs: each query at position p sees p + 1 keys.
  const double pairs = double(num_seqs) * prompt_len * (prompt_len + 1) / 2.0;
  const double flop = 4.0 * kHeadDim * kHeads * pairs;
  const std::vector<float> a = to_f32(d_out_old.download()), b = to_f32(d_out_new.download());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  std::printf(
      "llama-1b attention, %d seqs x %d tokens (%d splits for the old kernel):\n"
      "  old split-KV   %10.1f us  %7.1f TFLOP/s\n"
      "  tensor-core    %10.1f us  %7.1f TFLOP/s  (%.2fx)  max |old - new| %.3g\n",
      num_seqs, prompt_len, splits, old_us, flop / old_us / 1e6, new_us, flop / new_us / 1e6,
      old_us / new_us, worst);
  CHECK(worst < 2e-2);  // NaN fails too
}

}  // namespace

TEST_CASE("bench: prefill attention, old split-KV kernel vs tensor cores") {
  bench(256, 512);
  bench(16, 4096);
}
