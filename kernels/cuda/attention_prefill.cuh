#pragma once
// Tensor-core (mma.sync m16n8k16) flash attention over the paged KV cache for steps with prefill.
//
// Same contract as launch_paged_attention (AttentionArgs; query token i of sequence s sits at
// position context_lens[s] - (query_start[s+1] - i) and attends causally to keys 0..position, read
// through block table row s; the step's own K/V are already in the cache). One thread block of 4
// warps computes a tile of 64 query rows of one sequence for one query head, walking the keys in
// tiles of 64 (gathered through the block table with cp.async, double buffered) with an online
// softmax in the log2 domain; each warp owns 16 query rows. Decode rows (query length 1) are a tile
// with one live row: correct, if wasteful, so the kernel serves mixed steps too. Pure-decode steps
// keep the split-KV kernel (attention.cuh), which fills the GPU better there, except under
// --batch-invariant: a row's keys are walked in 64-key tiles from position 0 and its scores,
// maxima and sums never mix with other rows', so this kernel gives a position the same bits in a
// prefill chunk as in a decode step, and then runs every step (a decode graph is one shape:
// max_query_len 1).
//
// Needs no partial_out, partial_lse, merge_counters or num_splits; token_seq is not read.
#include <cuda_runtime_api.h>

#include "kernels/cuda/attention.cuh"

namespace rose {

// head_dim 64 or 128, num_heads a multiple of num_kv_heads, block_size >= 1 (keys are gathered
// one row at a time through the block table, so any block size works).
bool prefill_attention_supported(const AttentionArgs& args);

// num_seqs: rows of query_start minus one; max_query_len: the step's longest query chunk (the
// grid has num_seqs * ceil(max_query_len / 64) * num_heads blocks; those past a sequence's chunk
// exit at once). The grid depends on the step's shape: eager steps, or decode graphs
// (max_query_len 1) under --batch-invariant.
void launch_prefill_attention(const AttentionArgs& args, int num_seqs, int max_query_len,
                              cudaStream_t stream);

}  // namespace rose
