#pragma once
// The CUDA backend's workspace sizes as a pure function of the model and the budgets: plain C++
// (no CUDA), built into every configuration so CPU-only CI tests it
// (tests/test_workspace_plan.cpp). The backend allocates exactly these bytes; the shapes here are
// the buffers' shapes there.
#include <cstdint>
#include <span>

#include "engine/model/config.h"
#include "kernels/common/attention_split.h"

namespace rose {

// Attention key splits at most, for any batch (the split-KV grid's third dimension).
constexpr int kMaxAttentionSplits = 32;
// Pure-decode steps of up to cluster_attention_max_rows(config, max_context) rows run the cluster
// decode attention (attention.cuh, cluster_decode). Measured on the H100: the scalar kernel
// (results/2026-11-24-b1-latency/) saved 3-6 us a layer at batch 1, gpt2 gained 10-12% at batch
// 2-4 and llama-1b 8% at 2, nothing at 4; at 8 it was 2-5% slower, at 16 (8 blocks per row and KV
// head: 1,024 blocks for llama) 8-16%. The tensor-core kernel (results/2026-11-25-attention-mma/
// rows/, two rounds) is faster than the split-KV kernel at 8 rows too (llama-1b +2.5%, llama-1b
// Q4_K +4%, llama-8b Q4_K +6%) and at 16 (llama-1b +3.6%, Q4_K +1.5%, llama-8b Q4_K even).
// Against session 44's split-KV tensor-core rows kernel (H200, results/2026-12-02-cluster-rows/,
// contexts of 512-640) it is 2-7% faster at 6 and 8 rows; from 10 rows it is 0.2-3.5% slower on
// llama-8b and llama-1b Q4_K (llama-1b bf16: 0.3% faster at 10, even at 12-14, 1.0-1.4% slower at
// 16), but 12-19% faster at 10-16 rows on SmolLM2-135M's shape, whose 30 layers of 3 KV heads x 64
// probably give the rows kernel too little work a layer to pay for its separate RoPE/KV-write and
// merge launches (not profiled). Hence the limit by the KV width a layer (a GPU's share under
// tensor parallel). gpt2 (12 KV heads of 64, no GQA group: past the cluster kernel the scalar
// split-KV kernel, attention.cu mma_rows_apply) gains more and sooner: 0.580 -> 0.492 ms a step at
// 12 rows, 0.635 -> 0.508 at 16 (results/2026-12-02-cluster-rows/3_rule/), 0.465 -> 0.441 at 8,
// even at 6 (0.430 / 0.428), the cluster kernel 2% faster at 5 (4_gpt2/). SmolLM2's shape stays
// faster on the cluster kernel to 32 rows (1.033 against 1.204 ms a step at 24, 1.181 against
// 1.228 at 32) and falls behind from 48 (1.569 against 1.372; 6_smollm2_wide/).
// Those limits were set at 512-640 keys. With longer rows the split-KV kernel, which spreads a
// row's keys over the whole GPU, overtakes the cluster kernel sooner. H200, one binary a call,
// decode steps of grid:B:P:128 against ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS
// (results/2026-12-03-cluster-rows-context/), cluster -> split-KV, ms a step:
//   llama-1b Q4_K, 8 rows: P=1,024 1.057 -> 1.078, 1,536 1.127 -> 1.113, 2,048 1.194 -> 1.153,
//     4,096 1.400 -> 1.278 (bf16 alike: 1.320 -> 1.332 ... 1.666 -> 1.531); 6 rows (the same
//     bucket of 8) even at 1,536-2,048, 7-8% faster on split-KV at 4,096; 4 rows at 4,096 still
//     8-9% faster on the cluster kernel (1.031 against 1.126); llama-8b Q4_K, 8 rows: 4.052 ->
//     4.035 at 1,024, 4.475 -> 4.273 at 2,048, 5.251 -> 4.745 at 4,096.
//   SmolLM2's shape by rows: 8 stay far faster on clusters (0.875 against 1.257 at 2,048, 1.071
//     against 1.380 at 4,096); 16 faster on clusters at 1,536 (1.118 / 1.160), even at 2,048
//     (1.205 / 1.197), 13% faster on split-KV at 4,096 (1.600 -> 1.381); 24 2% faster on
//     clusters at 2,048 (1.388 / 1.420); 32 faster on split-KV from 1,024 keys (1.389 -> 1.330,
//     1,536 1.540 -> 1.418, 2,048 1.690 -> 1.521). Call 3: 16 rows 8% faster on split-KV at
//     3,072 (1.405 -> 1.294); 24 rows faster on clusters at 1,024 (1.180 / 1.285), even at 3,072
//     (1.580 / 1.567), 4% faster on split-KV at 4,096 (1.774 -> 1.711).
// So each kind of model has a limit by its step's longest row (the last entry whose min_keys it
// reaches). A graph bucket whose path that changes has a graph variant of its own
// (CudaBackend::graph_variant).
struct ClusterRowLimit {
  int min_keys;  // from this many keys in the step's longest row (this step's key included)
  int max_rows;
};
// GQA, kv_dim >= kClusterAttentionWideKvDim (llama-1b, llama-8b).
constexpr ClusterRowLimit kWideClusterRowLimits[] = {{0, 8}, {1536, 4}};
// One query head a KV head (gpt2; its rows end at 1,024 keys).
constexpr ClusterRowLimit kNoGroupClusterRowLimits[] = {{0, 6}};
// Narrower KV (SmolLM2: 3 x 64 = 192).
constexpr ClusterRowLimit kNarrowClusterRowLimits[] = {{0, 32}, {1024, 24}, {3072, 8}};
constexpr int kClusterAttentionWideKvDim = 512;  // llama-1b's 8 x 64, the narrowest measured
inline int cluster_attention_max_rows(const ModelConfig& config, int max_context) {
  using Limits = std::span<const ClusterRowLimit>;
  const Limits limits = config.kv_dim() < kClusterAttentionWideKvDim
                            ? Limits(kNarrowClusterRowLimits)
                        : config.num_heads == config.num_kv_heads ? Limits(kNoGroupClusterRowLimits)
                                                                  : Limits(kWideClusterRowLimits);
  int rows = limits[0].max_rows;
  for (const ClusterRowLimit& limit : limits) {
    if (max_context >= limit.min_keys) rows = limit.max_rows;
  }
  return rows;
}
constexpr int kScalarClusterAttentionMaxRows = 4;  // ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0
// The blocks a cluster of the tensor-core cluster attention (AttentionArgs::cluster_splits): each
// warp has a row's first two 16-key chunks in flight before its PDL wait, so a cluster of 8 blocks
// of 4 warps covers 1,024 keys that way and a longer row's later chunks cost trips after it; 16
// blocks cover 2,048. Decode on the H200, one binary each call
// (results/2026-12-03-cluster-splits/): at 512-640 keys 8 blocks are fastest at one row (16:
// llama-1b Q4_K 0.417 -> 0.425 ms a step, SmolLM2's shape 0.459 -> 0.477; 4 blocks slower still);
// past 1,024 keys 16 are (llama-1b Q4_K at 1,024-1,152 keys 0.452 -> 0.439, 2,048-2,176 0.500 ->
// 0.470, 4,096-4,224 0.605 -> 0.530; SmolLM2's shape 0.504 -> 0.481, 0.589 -> 0.533, 0.759 ->
// 0.623; llama-1b bf16 and llama-8b Q4_K at 2,048: 0.932 -> 0.897, 1.846 -> 1.735) as long as the
// step has few clusters: at 2,048 keys 16 blocks win at 8-16 clusters (rows x KV heads: llama-1b at
// 2 rows 0.626 -> 0.614, SmolLM2 at 4 rows 1.087 -> 1.024) and lose from 24 (SmolLM2 at 8 rows
// 0.875 -> 1.003, llama-1b at 4 rows 0.926 -> 0.979). So 16 once a step's longest row has more keys
// than 8 blocks cover and the step has at most kWideClusterMaxClusters clusters.
constexpr int kClusterAttentionSplits = 8;
constexpr int kWideClusterAttentionSplits = 16;
constexpr int kWideClusterMinKeys = 1025;  // past 2 chunks x 16 keys x 4 warps x 8 blocks
constexpr int kWideClusterMaxClusters = 16;
// rows: the step's decode rows; config: the model (a GPU's shard under tensor parallel).
inline int cluster_attention_splits(const ModelConfig& config, int rows, int max_context) {
  const int64_t clusters = attention_merge_counters(rows, config.num_kv_heads, config.num_heads);
  return max_context >= kWideClusterMinKeys && clusters <= kWideClusterMaxClusters
             ? kWideClusterAttentionSplits
             : kClusterAttentionSplits;
}
// A decode bucket's CUDA graph variant (GraphCache::run), one for each launch sequence a step of
// `padded` rows can take: 1 with the shared-prefix launch, 2 with 16-block attention clusters (a
// shared prefix runs no cluster kernel), 3 when the step's long rows send a bucket that short rows
// run on the cluster kernel to the split-KV kernel (which launches RoPE/KV-write on its own), 0
// else. cluster_splits: the step's cluster_attention_splits; short_rows_max / step_max: the
// cluster attention's row limit for short rows and for this step (cluster_attention_max_rows, or
// the switch's one limit).
inline int decode_graph_variant(bool shared_prefix, int cluster_splits, int padded,
                                int short_rows_max, int step_max) {
  if (shared_prefix) return 1;
  if (cluster_splits != kClusterAttentionSplits) return 2;
  return padded <= short_rows_max && padded > step_max ? 3 : 0;
}
// Kept quantized matrices: how many rows of a product the tile-decoding GEMM (gemm_quant.cuh)
// takes, by the matrix's shape; past it (and from 1 to 8 rows, the quantized GEMV's) a decoded
// copy and cuBLAS. Decoding a weight costs the GEMM 5-6 instructions, so it wins where it has
// enough thread blocks to hide that and the decoded copy's write and read cost most.
// Before split-K its parallelism was the output tiles only. One Q4_K product on the H100 at
// n = 16 / 32 / 64, us, GEMM against decode + cuBLAS (results/2026-11-24-quant-gemm/check):
//   llama-1b qkv (3072 x 2048)    12.8 / 16.6 / 19.3 against 15.1 / 15.0 / 15.5
//   llama-1b o (2048 x 2048)      12.6 / 12.8 / 16.7 against 17.2 / 17.7 / 18.2
//   llama-1b gate|up (16384 x 2048) 26.7 / 34.9 / 39.3 against 57.4 / 57.8 / 58.8
//   llama-1b down (2048 x 8192)   46.5 / 46.9 / 61.7 against 25.3 / 28.0 / 29.1
//   llama-8b gate|up (28672 x 4096) 98.3 / 96.9 / 109 against 202 / 203 / 203
//   llama-8b down (4096 x 14336)  89.9 / 122 / 129 against 105 / 106 / 107
// So without split-K (ROSEINFER_GEMM_QUANT_SPLIT_K=0): none for a matrix whose input is wider
// than its output (the MLP's down projection: long k loops on few tiles); up to
// kQuantGemmWideMaxRows for one whose output is at least 4x its input (gate|up, lm_head);
// kQuantGemmMaxRows else. With split-K (gemm_quant_split.h: narrow and long-k matrices cut k into
// slices, so they get as many blocks as wide ones; results/2026-11-24-splitk/final), Q4_K, us,
// GEMM against decode + cuBLAS:
//   llama-1b down at 16 rows: 20.4 against 25.4: up to kQuantGemmDownMaxRows (at 32 rows 24.6
//   against 28.2, not yet tried end to end; at 64, 47.5 against 29.1);
//   llama-8b down (out >= kQuantGemmLargeOut) at 32 / 64 rows, with the larger activation tiles a
//   split product takes: 58.9 / 74.0 against 105.8 / 106.7: up to kQuantGemmLargeDownMaxRows
//   (decode at batch 64: 5,142 tok/s against 4,760 with 16);
//   wide matrices with in >= kQuantGemmLargeOut (llama-8b gate|up, lm_head) up to
//   kQuantGemmLargeWideMaxRows: decode at batch 128 7,449 against 6,674 tok/s at 64 (explore2;
//   llama-1b's lost 1% at 128 rows, results/2026-11-24-quant-gemm/wide);
//   qkv and o stay at kQuantGemmMaxRows (llama-1b qkv at 32: 19.9 against 19.5; llama-8b's win
//   at 32, 31.2 / 22.8 against 42.2 / 25.3, not yet tried end to end).
// The decoded copy's cost grows with the matrix, the GEMM's parallelism no longer shrinks with it.
constexpr int kQuantGemmMaxRows = 16;
constexpr int kQuantGemmWideMaxRows = 64;
constexpr int kQuantGemmDownMaxRows = 16;
constexpr int kQuantGemmLargeOut = 4096;
constexpr int kQuantGemmLargeDownMaxRows = 64;
constexpr int kQuantGemmLargeWideMaxRows = 128;
// Wide matrices in 32-element blocks (Q8_0, Q4_0, Q4_1) up to this many rows: since the wgmma
// tiles' software pipeline, the m64 x n256 tile multiplies Q8_0 gate|up at 256 rows in 41.6 us
// against 54.6 for decode + cuBLAS (llama-1b; llama-8b 149 against 187), while the K-quants, whose
// per-sub-block scales cost more to decode, stay slower there (results/2026-12-03-wgmma-pipeline;
// end to end, Q8_0's decode step against the rule before: llama-1b 3.075 -> 2.834 ms at 128 rows,
// 4.125 -> 3.913 at 256; llama-8b 19.410 -> 18.007 at 256). Measured on llama-1b's and llama-8b's
// widths; narrower matrices (SmolLM2's 576) keep the rule.
constexpr int kQuantGemmSmallBlockWideMaxRows = 256;
constexpr int kQuantGemmSmallBlockMinIn = 2048;
// The three classes of kept (out, in) matrix the row rule tells apart (the values index
// CudaBackend's per-class override): output at least 4x the input (gate|up, lm_head), input wider
// than output (the MLP's down projection), and the rest (qkv, o).
enum class QuantGemmShape { kSquare = 0, kDown = 1, kWide = 2 };
constexpr QuantGemmShape quant_gemm_shape(int64_t out, int64_t in) {
  return out >= 4 * in ? QuantGemmShape::kWide
         : in > out    ? QuantGemmShape::kDown
                       : QuantGemmShape::kSquare;
}
// The most rows of a product with a kept (out, in) matrix that the tile-decoding GEMM takes;
// split_k false: the rule before split-K, for the comparison switch; small_blocks: the matrix is
// all in 32-element block types (Q8_0, Q4_0, Q4_1).
constexpr int quant_gemm_row_limit(int64_t out, int64_t in, bool split_k = true,
                                   bool small_blocks = false) {
  switch (quant_gemm_shape(out, in)) {
    case QuantGemmShape::kWide:
      if (split_k && small_blocks && in >= kQuantGemmSmallBlockMinIn)
        return kQuantGemmSmallBlockWideMaxRows;
      return split_k && in >= kQuantGemmLargeOut ? kQuantGemmLargeWideMaxRows
                                                 : kQuantGemmWideMaxRows;
    case QuantGemmShape::kDown:
      if (!split_k) return 0;
      return out >= kQuantGemmLargeOut ? kQuantGemmLargeDownMaxRows : kQuantGemmDownMaxRows;
    case QuantGemmShape::kSquare:
      break;
  }
  return kQuantGemmMaxRows;
}
// Tensor parallel: the fp32 logits a rank's shard holds for `rows` sequences of `stride`
// (vocab_shard_stride) each, rounded up to whole 16-byte vectors: the peer gather sends the chunk
// in vectors.
constexpr int64_t shard_logits_floats(int64_t rows, int64_t stride) {
  return (rows * stride + 3) / 4 * 4;
}
// --batch-invariant with ROSEINFER_CUDA_GEMM_QUANT_INVARIANT=1 sends every product (prefill
// chunks too) through the GEMM: its split workspace holds this many rows, and larger products run
// in launches of as many (the same bits: rows are independent).
constexpr int kQuantGemmInvariantRows = 256;
// --batch-invariant attention: keys per split, aligned to position 0. 512 is 4 tiles per warp of
// the row-shared kernel at llama's head_dim 64 (16 at 128 with 8 heads): enough keys per block to
// pay for its query load, warp merge and partial write, yet a batch-1 decode at 2k-8k context
// still gets 4-16 splits per KV head to spread over the SMs (2048 would leave 1-4).
constexpr int kInvariantSplitKeys = 512;
// Bound on the invariant attention partials: the launcher runs the rows in launches that fit.
constexpr int64_t kInvariantPartialBytes = int64_t(128) << 20;

int64_t align_up(int64_t x, int64_t a);

// Where each per-step array lives inside the one metadata buffer (same offsets on host and device).
// The offsets depend only on the step's token and sequence counts, so the arrays are packed
// tightly (one small copy per step) and a graph captured for a batch size keeps reading the right
// addresses: every replay of that bucket has the same counts.
struct MetaLayout {
  int64_t sample_params = 0;  // (num_seqs,) SampleRowParams
  int64_t query_start = 0;    // (num_seqs + 1,) int32
  int64_t context_lens = 0;   // (num_seqs,)
  int64_t sample_rows = 0;    // (num_seqs,) flat index of each sequence's last token
  int64_t table_stride = 0;   // (1,) block table stride of this step
  int64_t sample_slot = 0;    // (1,) where the sampler writes: offset of this step's half of the
                              // ids buffer (SampleTargets::slot_offset)
  int64_t token_ids = 0;      // (num_tokens,)
  int64_t positions = 0;      // (num_tokens,)
  int64_t slot_mapping = 0;   // (num_tokens,)
  int64_t token_seq = 0;      // (num_tokens,) sequence of each token
  int64_t shared_keys = 0;    // (1,) keys of the step's shared prefix (AttentionArgs), 0: none
  int64_t shares_prefix = 0;  // (num_seqs,) 1 for the rows that share it
  int64_t block_tables = 0;   // (num_seqs, table stride) packed with this step's stride
};

// Each array 16-byte aligned; block_tables last, since its length depends on the step's stride.
MetaLayout meta_layout(int64_t num_tokens, int64_t num_seqs);

// What the sizes depend on (the budgets as BackendOptions gives them, max_model_len resolved).
struct WorkspaceInputs {
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  int max_model_len = 0;
  int block_size = 0;
  bool batch_invariant = false;
  int64_t element_size = 2;         // bytes of the activation dtype (dtype_size)
  int num_sms = 0;                  // streaming multiprocessors of the device
  int64_t max_quantized_elems = 0;  // rows * cols of the largest matrix kept in ggml blocks
};

// Bytes of every device buffer a step uses (T = WorkspacePlan::max_tokens, S = max_seqs, H hidden,
// I intermediate, V vocab, e the element size). 0: not allocated.
struct WorkspaceBytes {
  int64_t residual = 0;     // (T, H) fp32 residual stream
  int64_t normed = 0;       // (T, H) e: norm output, the next linear layer's input
  int64_t qkv = 0;          // (T, qkv_dim) e
  int64_t attn = 0;         // (T, q_dim) e: attention output
  int64_t proj = 0;         // (T, H) e: o and down outputs
  int64_t mlp = 0;          // (T, mlp_up_rows) e: up (or gate|up) output
  int64_t act = 0;          // (T, I) e: silu(gate) * up; gated MLPs only
  int64_t dequantized = 0;  // (max_quantized_elems,) e: a quantized matrix decoded for a GEMM
  // The tile-decoding GEMM's split-K workspace (gemm_quant_workspace_bound: arrival counters, then
  // (slices, rows, out) fp32 partials) for the most rows any kept matrix's product takes through
  // it (quant_gemm_row_limit; kQuantGemmInvariantRows with --batch-invariant); zeroed once.
  int64_t quant_gemm_split = 0;
  // The int8 tensor-core GEMV's quantized x (gemv_quant_mma_scratch_bytes) for its most rows and
  // the widest product's `in`.
  int64_t quant_mma_x = 0;
  int64_t final_normed = 0;  // (S, H) e: each sequence's last row, normed
  int64_t logits = 0;        // (S, V) fp32
  // Tensor parallel (ModelConfig::is_shard), else 0: this rank's logits, (S, stride) fp32 with
  // stride = vocab_shard_stride (rounded up to 16 bytes), and every rank's gathered, (tp_size, S,
  // stride) fp32.
  int64_t shard_logits = 0;
  int64_t gathered_logits = 0;
  int64_t sampled = 0;         // (S,) int32: pinned, mapped host memory the sampler writes
  int64_t sample_scratch = 0;  // sample_scratch_bytes(S): the sampler's per-row split partials
  int64_t partial_out = 0;     // (partial_rows, head_dim) fp32 attention split partials
  int64_t partial_lse = 0;     // (partial_rows,) fp32
  int64_t merge_counters = 0;  // (attention_merge_counters(T),) int32
  int64_t meta = 0;            // the largest step's MetaLayout plus (S, max_table_stride) tables;
                               // the device buffer and its pinned host mirror
  // RoPE models: (max_model_len, head_dim / 2, 2) fp32, every position's cos and sin
  // (launch_fill_rope_angles), filled once; 0 otherwise.
  int64_t rope_angles = 0;
};

struct WorkspacePlan {
  int max_tokens = 0;  // max(token budget, seq budget): a decode step of S sequences is S tokens
  int max_seqs = 0;    // S
  int max_table_stride = 0;  // block-table columns for max_model_len
  int target_ctas = 0;       // thread blocks attention aims for: 4 per SM
  // --batch-invariant (0 otherwise): the attention grid's splits for max_model_len, and the query
  // rows per launch whose partials fit kInvariantPartialBytes at that grid.
  int invariant_splits = 0;
  int invariant_rows = 0;
  int64_t partial_rows = 0;  // (token, head, split) triples of the partials at the worst batch
  WorkspaceBytes bytes;
};

WorkspacePlan plan_workspaces(const ModelConfig& config, const WorkspaceInputs& in);

// One KV block across all layers: K and V, (block_size, num_kv_heads, head_dim) each per layer.
int64_t kv_block_bytes(const ModelConfig& config, int block_size, int64_t element_size);

}  // namespace rose
