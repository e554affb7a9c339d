#pragma once
// The reference ops: plain fp32 loops over host arrays, one function per op family. The CPU backend
// runs a model with them, and every CUDA kernel is tested against them on random inputs, so they
// favour clarity over speed (linear is the exception: it is blocked and threaded because it is most
// of the CPU backend's time).
//
// Conventions: row-major arrays; shapes in the comments; `n` rows are tokens of the flat batch.
// Preconditions (ids in range, sizes consistent) are the caller's job: the backend validates the
// step plan before calling any of these.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/common/sampling_rule.h"

namespace rose::cpu {

// A fixed set of worker threads for splitting a loop into contiguous ranges. The calling thread
// takes the first range itself, so a pool of size 1 runs everything inline.
class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // num_threads <= 0: std::thread::hardware_concurrency()
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint ranges covering [0, count) whose bounds are multiples of
  // `grain` (except the last end), and returns when all are done. Not reentrant.
  void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* task_ = nullptr;
  std::vector<int64_t> range_begin_;  // (num_threads + 1,) range i is [begin[i], begin[i+1])
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

// Runs fn over [0, count) on `pool` when given, inline otherwise.
void parallel_for(ThreadPool* pool, int64_t count, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

// out[i] = tok_emb[token_ids[i]] (+ pos_emb[positions[i]] when pos_emb is given: GPT-2).
void embedding(const int32_t* token_ids,  // (n,)
               const int32_t* positions,  // (n,) only read when pos_emb != nullptr
               const float* tok_emb,      // (vocab, hidden)
               const float* pos_emb,      // (max_positions, hidden) or nullptr
               int n, int hidden,
               float* out);  // (n, hidden)

// residual += x (skipped when x is nullptr); out = LayerNorm(residual) * weight + bias, with the
// biased variance, as torch.nn.LayerNorm.
void add_layernorm(float* residual,      // (n, hidden) updated in place
                   const float* x,       // (n, hidden) or nullptr
                   const float* weight,  // (hidden,)
                   const float* bias,    // (hidden,)
                   float eps, int n, int hidden,
                   float* out);  // (n, hidden)

// residual += x (skipped when x is nullptr); out = residual / sqrt(mean(residual^2) + eps) *
// weight.
void add_rmsnorm(float* residual,      // (n, hidden) updated in place
                 const float* x,       // (n, hidden) or nullptr
                 const float* weight,  // (hidden,)
                 float eps, int n, int hidden,
                 float* out);  // (n, hidden)

// y = x W^T + b. Each output element is reduced over `in` in an order that depends only on `in`
// (not on n, the blocking or the threads), so a row gives bit-identical results in any batch.
void linear(const float* x,       // (n, in)
            const float* weight,  // (out, in)
            const float* bias,    // (out,) or nullptr
            int n, int in, int out,
            float* y,  // (n, out)
            ThreadPool* pool = nullptr);

// For each token: rotate its q heads and k heads in place with rotate-half (NeoX) RoPE at
// positions[i] (skipped when inv_freq is nullptr: GPT-2), then write its k and v into the paged
// cache at slot_mapping[i] (slot -1 writes nothing). qkv rows are q | k | v, as the fused qkv
// linear produces them. Slot s lives at block s / block_size, offset s % block_size.
void rope_and_write_kv(float* qkv,                   // (n, (num_heads + 2 num_kv_heads) head_dim)
                       const int32_t* positions,     // (n,)
                       const int32_t* slot_mapping,  // (n,)
                       const float* inv_freq,        // (head_dim / 2,) or nullptr
                       int n, int num_heads, int num_kv_heads, int head_dim, int block_size,
                       float* k_cache,   // (num_blocks, block_size, num_kv_heads, head_dim)
                       float* v_cache);  // (num_blocks, block_size, num_kv_heads, head_dim)

// Causal attention over the paged cache for a flat batch of sequences. Sequence s owns query rows
// query_start[s] .. query_start[s+1]-1; they are its newest tokens, so row j of n_s sits at
// position p = context_lens[s] - n_s + j and attends to positions 0..p, read through block table
// row s. Query head h reads kv head h / (num_heads / num_kv_heads). Softmax in fp32 (online,
// max-subtracted), scaled by `scale` (1/sqrt(head_dim)). q rows may be strided (the q part of the
// qkv rows).
void paged_attention(const float* q,  // (num_tokens, q_row_stride), head h at columns h*head_dim
                     int64_t q_row_stride,
                     const float* k_cache,  // (num_blocks, block_size, num_kv_heads, head_dim)
                     const float* v_cache,  // (num_blocks, block_size, num_kv_heads, head_dim)
                     const int32_t* query_start,   // (num_seqs + 1,)
                     const int32_t* context_lens,  // (num_seqs,)
                     const int32_t* block_tables,  // (num_seqs, block_table_stride)
                     int block_table_stride, int num_seqs, int num_heads, int num_kv_heads,
                     int head_dim, int block_size, float scale,
                     float* out,  // (num_tokens, num_heads * head_dim)
                     ThreadPool* pool = nullptr);

// x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in place (GPT-2's "gelu_new").
void gelu_tanh(float* x, int64_t count);  // (count,)

// out[i, j] = silu(gate[i, j]) * up[i, j] where each input row is gate | up.
void silu_and_mul(const float* gate_up,  // (n, 2 * inner)
                  int n, int inner,
                  float* out);  // (n, inner)

// Picks one token from one row of logits by the rule in kernels/common/sampling_rule.h, with the
// uniform sampling_uniform(params.seed, token_index). Sums of probabilities are taken in double.
int32_t sample_token(const float* logits,  // (vocab,)
                     int vocab, const SamplingParams& params, uint64_t token_index,
                     float* scratch);  // (2 * vocab,) workspace
// The greedy rule alone: the argmax, the lowest id on ties.
int32_t argmax(const float* logits, int vocab);  // logits (vocab,)

}  // namespace rose::cpu
