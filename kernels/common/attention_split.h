#pragma once
// The paged-attention grid's host-side arithmetic (how many thread blocks per query row, how many
// key splits): shared by the kernel (kernels/cuda/attention.cu) and the CUDA backend's workspace
// plan, which sizes the partials and merge counters without CUDA. Plain C++17: nvcc includes it.
#include <cstdint>

namespace rose {

// Query heads one attention thread block handles: a GQA group larger than this is spread over
// several blocks (chunks) per KV head.
constexpr int kAttentionMaxGroup = 8;

// Thread blocks per (query row, KV head): the group's chunks of at most kAttentionMaxGroup heads.
inline int attention_group_chunks(int num_kv_heads, int num_heads) {
  const int group = num_heads / num_kv_heads;
  return (group + kAttentionMaxGroup - 1) / kAttentionMaxGroup;
}

// Entries merge_counters needs for num_tokens query rows: one per (row, KV head, chunk).
inline int64_t attention_merge_counters(int num_tokens, int num_kv_heads, int num_heads) {
  return int64_t(num_tokens) * num_kv_heads * attention_group_chunks(num_kv_heads, num_heads);
}

// How many key splits to use for a batch of num_tokens query rows: enough thread blocks to fill
// the GPU (target_blocks), at most max_splits. Depends only on the shape, so a CUDA graph captured
// for a batch size stays valid.
inline int attention_num_splits(int num_tokens, int num_kv_heads, int num_heads, int target_blocks,
                                int max_splits) {
  const int blocks = num_tokens * num_kv_heads * attention_group_chunks(num_kv_heads, num_heads);
  int splits = blocks > 0 ? target_blocks / blocks : 1;
  if (splits < 1) splits = 1;
  if (splits > max_splits) splits = max_splits;
  return splits;
}

// Shared-prefix decode (kernels/cuda/attention.cuh, shared_keys): query rows one thread block of
// the prefix launch takes, so that rows x the group (rounded up to 1, 2 or 4 heads) fill
// kAttentionMaxGroup query vectors that share each K/V load. A group of 8 or more fills a block
// alone: nothing to share, the path is off (0).
inline int attention_prefix_rows_per_block(int num_kv_heads, int num_heads) {
  const int group = num_heads / num_kv_heads;
  if (group >= kAttentionMaxGroup) return 0;
  int width = 1;
  while (width < group) width *= 2;
  return kAttentionMaxGroup / width;
}

inline bool attention_shared_prefix_supported(int num_kv_heads, int num_heads, int head_dim) {
  return attention_prefix_rows_per_block(num_kv_heads, num_heads) > 0 &&
         (head_dim == 64 || head_dim == 128);
}

// Splits of the prefix launch for num_tokens decode rows: enough blocks to fill the GPU, as
// attention_num_splits. Its partial slots come before the key splits' (prefix_splits + num_splits
// per query row and head).
inline int attention_prefix_splits(int num_tokens, int num_kv_heads, int num_heads,
                                   int target_blocks, int max_splits) {
  const int rows = attention_prefix_rows_per_block(num_kv_heads, num_heads);
  if (rows == 0) return 0;
  const int blocks = (num_tokens + rows - 1) / rows * num_kv_heads;
  int splits = blocks > 0 ? target_blocks / blocks : 1;
  if (splits < 1) splits = 1;
  if (splits > max_splits) splits = max_splits;
  return splits;
}

}  // namespace rose
