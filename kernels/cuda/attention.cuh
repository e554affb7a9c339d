#pragma once
// Paged attention over the KV cache for a flat batch of query tokens (prefill chunks over a cached
// prefix, decode tokens, or both mixed). Query token i of sequence s sits at position
// context_lens[s] - (query_start[s+1] - i) and attends causally to keys 0..its position, read
// through the sequence's block table. One thread block handles one (query token, KV head, split):
// the query heads of a GQA group are packed so each K/V row is loaded once for the whole group.
// With num_splits > 1 the key range is split flash-decoding style and a reduce kernel merges the
// partial results by their log-sum-exp (or, given merge_counters, the last split block to finish
// does, which saves a launch per layer in small decode steps).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/attention_split.h"  // attention_num_splits, attention_merge_counters
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/rope_kv.cuh"

namespace rose {

struct AttentionArgs {
  const void* q = nullptr;                // (num_tokens, q_stride) head h at columns h*head_dim
  int q_stride = 0;                       // elements between query rows
  const void* k_cache = nullptr;          // (num_blocks, block_size, num_kv_heads, head_dim)
  const void* v_cache = nullptr;          // (num_blocks, block_size, num_kv_heads, head_dim)
  const int32_t* block_tables = nullptr;  // (num_seqs, *block_table_stride)
  const int32_t* block_table_stride = nullptr;  // device scalar (so CUDA graphs stay valid)
  const int32_t* query_start = nullptr;         // (num_seqs + 1,)
  const int32_t* context_lens = nullptr;        // (num_seqs,)
  const int32_t* token_seq = nullptr;           // (num_tokens,) sequence of each query token
  void* out = nullptr;                          // (num_tokens, num_heads * head_dim)
  float* partial_out = nullptr;  // (num_tokens, num_heads, prefix_splits + num_splits, head_dim)
  float* partial_lse = nullptr;  // (num_tokens, num_heads, prefix_splits + num_splits) log2 domain
  // (num_tokens, num_kv_heads * ceil(group / 8)) zeroed once; with it the last split block of each
  // query row merges the partials itself (no merge kernel) and leaves its counter at zero again.
  int32_t* merge_counters = nullptr;
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 8, 16, 32, 64 or 128
  int block_size = 16;
  int num_splits = 1;  // > 1 needs partial_out and partial_lse
  // Batch-invariant schedule when > 0 (a multiple of 32): split s of every query row covers keys
  // [s * split_keys, (s + 1) * split_keys), aligned to absolute position 0, so a row's reduction
  // order depends on its own key count only, never on the batch. num_splits is then the grid's
  // split dimension, sized for the longest context (splits past a row's keys exit at once), and
  // partial_out/partial_lse/merge_counters need rows for at most rows_per_launch query rows: the
  // launcher runs the batch in launches of that many rows.
  int split_keys = 0;
  int rows_per_launch = 0;  // invariant mode: query rows per launch (bounds the partials' size)
  int token_offset = 0;     // set by the launcher: first query row of this launch
  // Shared-prefix decode (off when shared_keys is nullptr): keys [0, *shared_keys) of every row
  // whose sequence has shares_prefix set are the same physical blocks, those of sequence 0's
  // table, and *shared_keys is below each such row's key count. A first launch attends up to 8
  // query vectors of several rows per block to them (each K/V tile loaded once, not once per row)
  // into partial slots 0..prefix_splits-1; the rows kernel covers the rest of each row's keys and
  // merges both. partial_out/partial_lse then hold prefix_splits + num_splits slots per (row,
  // head). Needs merge_counters, head_dim 64 or 128, a GQA group below 8 and no split_keys
  // (attention_shared_prefix_supported).
  const int32_t* shared_keys = nullptr;    // device scalar, 0 leaves the prefix launch idle
  const int32_t* shares_prefix = nullptr;  // (num_seqs,) 1 for the rows that share it
  int prefix_splits = 0;
  // Small-batch decode (head_dim 64 or 128, no split_keys, no shared_keys): each (row, KV head)
  // runs as one cluster of thread blocks (cluster_splits) that split its keys and merge through
  // distributed shared memory, with the keys of earlier steps loaded before the PDL wait. It needs
  // neither partial buffers, merge counters nor num_splits. Its bits differ from the split-KV
  // kernel's.
  bool cluster_decode = false;
  // The blocks each cluster of the tensor-core cluster kernel splits a row's keys over: 8 or 16
  // (CudaBackend picks by the step's longest row and its clusters, cluster_attention_splits in
  // workspace_plan.h); a shape whose merge does not fit 16 runs 8.
  // KernelSwitches::cluster_attention_splits, when set, overrides it.
  int cluster_splits = 8;
  // With cluster_decode, when every row is its sequence's one decode row: this step's qkv bias,
  // RoPE and K/V cache write are done here instead of by launch_rope_kv_write (one launch fewer
  // per layer). `q` is then the raw qkv output and `rope` says how to finish it (its qkv, k_cache,
  // v_cache and counts are those of this launch); the new key's K/V are used from registers and
  // written to the cache for later steps. The rounding is rope_kv.cu's: q, k and v are rounded
  // to the dtype after the bias and the rotation.
  bool fuse_rope = false;
  RopeKvArgs rope;
  float scale = 0.0f;  // softmax scale, usually 1/sqrt(head_dim)
  DType dtype = DType::kBF16;
  // The cluster decode attention (tensor-core form) loads a row's K/V with an L2 evict_first
  // policy (StreamHint) when num_keys * num_tokens exceeds this: a step's reads of the cache
  // outgrow the L2 (CudaBackend sets it from the L2's size and the model's KV bytes a key), so
  // they would only push out the activations the next kernels read; below it the cache can stay
  // in the L2 from one step to the next. 0: never (plain loads).
  int64_t kv_evict_first_keys = 0;
  // Measurement only (CudaBackend's ROSEINFER_CUDA_ATTENTION_PROBE; outputs wrong, step time
  // real): 1 the cluster kernel returns right after its PDL wait, 2 it skips the blocks' merge
  // through distributed shared memory (and writes no output).
  int probe = 0;
};

void launch_paged_attention(const AttentionArgs& args, cudaStream_t stream);
// Whether the cluster decode launch runs the tensor-core kernel (the default) or the scalar one
// (KernelSwitches::cluster_attention_mma; tests compare both in one process).
bool cluster_attention_uses_tensor_cores();
bool attention_supports_head_dim(int head_dim);

}  // namespace rose
