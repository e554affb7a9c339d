// The CUDA backend's workspace sizes (engine/backend/cuda/workspace_plan.h), checked without a GPU
// against sizes worked out by hand from the presets' shapes: every buffer, the attention partials
// with and without --batch-invariant, the metadata layout and the KV block.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>

#include "engine/backend/cuda/workspace_plan.h"
#include "engine/model/presets.h"
#include "engine/parallel/shard_plan.h"
#include "kernels/common/attention_split.h"
#include "kernels/common/gemm_quant_split.h"
#include "kernels/common/gemv_quant_mma_layout.h"

using namespace rose;

namespace {

ModelConfig preset(const char* name) {
  const std::optional<ModelConfig> config = preset_config(name);
  REQUIRE(config.has_value());
  return *config;
}

WorkspaceInputs inputs(int tokens, int seqs, int max_model_len, bool invariant) {
  WorkspaceInputs in;
  in.max_num_batched_tokens = tokens;
  in.max_num_seqs = seqs;
  in.max_model_len = max_model_len;
  in.block_size = 16;
  in.batch_invariant = invariant;
  in.element_size = 2;
  in.num_sms = 132;  // H100 SXM: target_ctas 528
  return in;
}

}  // namespace

TEST_CASE("meta_layout packs each array 16-byte aligned, block tables last") {
  // 8 seqs, 64 tokens: params 8*32 = 256; query_start 9*4 = 36 -> 304; context_lens, sample_rows
  // 32 each -> 336, 368; table_stride 4 -> 384; sample_slot 4 -> 400; four token arrays of 256
  // each -> 1424; shared_keys 4 -> 1440 (aligned); shares_prefix 32 -> 1472.
  const MetaLayout m = meta_layout(64, 8);
  CHECK(m.sample_params == 0);
  CHECK(m.query_start == 256);
  CHECK(m.context_lens == 304);
  CHECK(m.sample_rows == 336);
  CHECK(m.table_stride == 368);
  CHECK(m.sample_slot == 384);
  CHECK(m.token_ids == 400);
  CHECK(m.positions == 656);
  CHECK(m.slot_mapping == 912);
  CHECK(m.token_seq == 1168);
  CHECK(m.shared_keys == 1424);
  CHECK(m.shares_prefix == 1440);
  CHECK(m.block_tables == 1472);
}

TEST_CASE("tiny preset: every buffer, split-KV partials") {
  // tiny: V 512, H 256, I 688 (gated: up rows 1376), heads 8, KV heads 2, head_dim 32, 4 layers.
  const ModelConfig c = preset("tiny");
  const WorkspacePlan plan = plan_workspaces(c, inputs(64, 8, 2048, false));
  CHECK(plan.max_tokens == 64);
  CHECK(plan.max_seqs == 8);
  CHECK(plan.max_table_stride == 128);
  CHECK(plan.target_ctas == 528);
  CHECK(plan.invariant_splits == 0);
  const WorkspaceBytes& b = plan.bytes;
  CHECK(b.residual == 64 * 256 * 4);
  CHECK(b.normed == 64 * 256 * 2);
  CHECK(b.qkv == 64 * 384 * 2);  // qkv_dim 256 + 2 * 64
  CHECK(b.attn == 64 * 256 * 2);
  CHECK(b.proj == 64 * 256 * 2);
  CHECK(b.mlp == 64 * 1376 * 2);
  CHECK(b.act == 64 * 688 * 2);
  CHECK(b.final_normed == 8 * 256 * 2);
  CHECK(b.logits == 8 * 512 * 4);
  CHECK(b.sampled == 8 * 4);
  CHECK(b.sample_scratch == 8 * (8 + 32 * 8));  // a counter and 32 split partials per row
  CHECK(b.dequantized == 0);                    // nothing kept quantized
  // One block per (row, KV head): splits(n) = min(32, 528 / 2n); rows * heads * splits peaks at
  // 8 * 264 = 2112 (n = 11: 11 * 24 = 264). head_dim 32: no shared-prefix slots.
  CHECK(plan.partial_rows == 2112);
  CHECK(b.partial_out == 2112 * 32 * 4);
  CHECK(b.partial_lse == 2112 * 4);
  CHECK(b.merge_counters == 64 * 2 * 4);
  CHECK(b.meta == 1472 + 8 * 128 * 4);
  CHECK(b.rope_angles == 2048 * 32 * 4);  // (max_model_len, head_dim / 2) (cos, sin) pairs
  CHECK(kv_block_bytes(c, 16, 2) == 2 * 4 * 16 * 64 * 2);
}

TEST_CASE("a tensor-parallel shard: its heads and I, and the gathered logits") {
  // tiny over 2 ranks: 4 heads and 1 KV head each (qkv_dim 128 + 2 * 32 = 192), I 344 (up rows
  // 688); vocab 512 in two shards of 256 rows; the KV block holds one head.
  const ModelConfig c = shard_config(preset("tiny"), 2, 1);
  const WorkspaceBytes b = plan_workspaces(c, inputs(64, 8, 2048, false)).bytes;
  CHECK(b.qkv == 64 * 192 * 2);
  CHECK(b.attn == 64 * 128 * 2);
  CHECK(b.proj == 64 * 256 * 2);  // o and down outputs stay hidden-wide (then all-reduced)
  CHECK(b.mlp == 64 * 688 * 2);
  CHECK(b.act == 64 * 344 * 2);
  CHECK(b.logits == 8 * 512 * 4);  // the whole vocabulary, sampled on every rank
  CHECK(b.shard_logits == 8 * 256 * 4);
  CHECK(b.gathered_logits == 2 * 8 * 256 * 4);
  CHECK(kv_block_bytes(c, 16, 2) == 2 * 4 * 16 * 32 * 2);
  CHECK(plan_workspaces(preset("tiny"), inputs(64, 8, 2048, false)).bytes.shard_logits == 0);
}

TEST_CASE("tiny preset, --batch-invariant: fixed grid of 512-key splits") {
  const ModelConfig c = preset("tiny");
  const WorkspacePlan plan = plan_workspaces(c, inputs(64, 8, 2048, true));
  // 2048 / 512 = 4 splits; a row is 8 heads * 4 splits * 33 floats = 4224 B, so 128 MiB holds
  // 31775 rows, clamped to the 64 tokens.
  CHECK(plan.invariant_splits == 4);
  CHECK(plan.invariant_rows == 64);
  CHECK(plan.partial_rows == 64 * 8 * 4);
  CHECK(plan.bytes.partial_out == 64 * 8 * 4 * 32 * 4);
  CHECK(plan.bytes.partial_lse == 64 * 8 * 4 * 4);
  CHECK(plan.bytes.merge_counters == 64 * 2 * 4);
  CHECK(plan.bytes.residual == 64 * 256 * 4);  // the rest does not depend on the mode
}

TEST_CASE("llama-1b shapes at the default budgets") {
  // V 128256, H 2048, I 8192, heads 32, KV heads 8, head_dim 64; 8192 tokens, 256 seqs, 4096 len.
  const ModelConfig c = preset("llama-1b");
  const WorkspacePlan plan = plan_workspaces(c, inputs(8192, 256, 4096, false));
  const WorkspaceBytes& b = plan.bytes;
  CHECK(plan.max_table_stride == 256);
  CHECK(b.residual == int64_t(8192) * 2048 * 4);
  CHECK(b.normed == int64_t(8192) * 2048 * 2);
  CHECK(b.qkv == int64_t(8192) * 3072 * 2);
  CHECK(b.attn == int64_t(8192) * 2048 * 2);
  CHECK(b.proj == int64_t(8192) * 2048 * 2);
  CHECK(b.mlp == int64_t(8192) * 16384 * 2);
  CHECK(b.act == int64_t(8192) * 8192 * 2);
  CHECK(b.final_normed == 256 * 2048 * 2);
  CHECK(b.logits == int64_t(256) * 128256 * 4);
  CHECK(b.sampled == 256 * 4);
  // splits(n) = min(32, 528 / 8n) alone peak at 32 * 66 = 2112 rows. The shared-prefix slots
  // (group 4: 2 rows per prefix block) add min(32, 528 / (8 ceil(n / 2))) for decode steps of
  // n >= 2 rows: at n = 256, 1 + 1 slots for 256 * 32 heads = 16384, the most.
  CHECK(plan.partial_rows == 16384);
  CHECK(b.partial_out == 16384 * 64 * 4);
  CHECK(b.merge_counters == 8192 * 8 * 4);
  // meta_layout(8192, 256): params 8192; query_start 1028 -> 9232; 1024 + 1024 -> 11280; stride
  // -> 11296; sample_slot -> 11312; four token arrays of 32768 -> 142384; shared_keys 16,
  // shares_prefix 1024 -> 143424; then 256 rows of 256 table entries.
  CHECK(meta_layout(8192, 256).block_tables == 143424);
  CHECK(b.meta == 143424 + 256 * 256 * 4);
  CHECK(kv_block_bytes(c, 16, 2) == 2 * 16 * 16 * 512 * 2);

  const WorkspacePlan inv = plan_workspaces(c, inputs(8192, 256, 4096, true));
  // 4096 / 512 = 8 splits; a row is 32 * 8 * 65 * 4 = 66560 B; 128 MiB / 66560 = 2016 rows.
  CHECK(inv.invariant_splits == 8);
  CHECK(inv.invariant_rows == 2016);
  CHECK(inv.partial_rows == 2016 * 32 * 8);
  CHECK(inv.bytes.partial_out == int64_t(2016) * 32 * 8 * 64 * 4);
}

TEST_CASE("gpt2 preset: no act buffer, up rows I; budgets resolved") {
  // V 50257, H 768, I 3072, 12 heads (MHA), head_dim 64. Token budget 4 below the 8 seqs: a
  // decode step of 8 sequences is 8 tokens, so T = 8.
  const ModelConfig c = preset("gpt2");
  const WorkspacePlan plan = plan_workspaces(c, inputs(4, 8, 1024, false));
  CHECK(plan.max_tokens == 8);
  CHECK(plan.bytes.mlp == 8 * 3072 * 2);
  CHECK(plan.bytes.act == 0);
  CHECK(plan.bytes.qkv == 8 * 2304 * 2);
  CHECK(plan.bytes.logits == 8 * 50257 * 4);
  // splits(n) = min(32, 528 / 12n) = min(32, 44 / n), plus the shared-prefix slots of decode
  // steps (group 1: 8 rows per prefix block, so one block per head up to n = 8: 32 slots): n = 8
  // gives 8 * 12 * (5 + 32) = 3552, the most.
  CHECK(plan.partial_rows == 3552);
  CHECK(plan.bytes.merge_counters == 8 * 12 * 4);
  CHECK(plan.bytes.rope_angles == 0);  // learned positions: no RoPE

  WorkspaceInputs wide = inputs(4, 8, 1024, false);
  wide.element_size = 4;  // the element size scales the activation buffers only
  const WorkspacePlan fp32 = plan_workspaces(c, wide);
  CHECK(fp32.bytes.normed == 2 * plan.bytes.normed);
  CHECK(fp32.bytes.residual == plan.bytes.residual);
  CHECK(fp32.bytes.logits == plan.bytes.logits);
}

TEST_CASE("weights kept quantized: a scratch for the largest matrix, decoded") {
  // llama-1b with a quantized tied lm_head (V 128256 x H 2048), its largest matrix.
  const ModelConfig c = preset("llama-1b");
  WorkspaceInputs in = inputs(8192, 256, 4096, false);
  in.max_quantized_elems = int64_t(128256) * 2048;
  CHECK(plan_workspaces(c, in).bytes.dequantized == int64_t(128256) * 2048 * 2);
  in.element_size = 4;  // the scratch holds the decoded matrix in the activation dtype
  CHECK(plan_workspaces(c, in).bytes.dequantized == int64_t(128256) * 2048 * 4);
}

TEST_CASE("weights kept quantized: the int8 tensor-core GEMV's x for 32 rows of the widest in") {
  // llama-8b's widest product input is the down projection's I = 14336: 32 rows of int8 (458752
  // B), then 32 x 448 (d, d sum) pairs of 8 bytes (114688 B). None without quantized weights.
  const ModelConfig c = preset("llama-8b");
  WorkspaceInputs in = inputs(8192, 256, 4096, false);
  CHECK(plan_workspaces(c, in).bytes.quant_mma_x == 0);
  in.max_quantized_elems = int64_t(128256) * 4096;
  CHECK(kGemvQuantMmaMaxRows == 32);
  CHECK(plan_workspaces(c, in).bytes.quant_mma_x == 32 * 14336 + 32 * 448 * 8);
  // A tensor-parallel shard's down projection reads I / 2: half of it (gemv_quant_mma_scratch_bytes
  // is linear in `in` at a fixed row count).
  const ModelConfig shard = shard_config(c, 2, 0);
  CHECK(plan_workspaces(shard, in).bytes.quant_mma_x == 32 * 7168 + 32 * 224 * 8);
}

TEST_CASE("weights kept quantized: the tile-decoding GEMM's row limit by (out, in)") {
  // With split-K (the default): wide matrices up to kQuantGemmWideMaxRows, or
  // kQuantGemmLargeWideMaxRows from an input of kQuantGemmLargeOut; the down projection (input
  // wider than output) up to kQuantGemmDownMaxRows, or kQuantGemmLargeDownMaxRows from an output
  // of kQuantGemmLargeOut; the rest up to kQuantGemmMaxRows.
  // The classes the rule (and the backend's per-class override) tell apart.
  CHECK(quant_gemm_shape(16384, 2048) == QuantGemmShape::kWide);  // gate | up
  CHECK(quant_gemm_shape(8192, 2048) == QuantGemmShape::kWide);   // exactly 4 in
  CHECK(quant_gemm_shape(8191, 2048) == QuantGemmShape::kSquare);
  CHECK(quant_gemm_shape(2048, 2048) == QuantGemmShape::kSquare);      // o
  CHECK(quant_gemm_shape(2048, 8192) == QuantGemmShape::kDown);        // down
  CHECK(quant_gemm_row_limit(3072, 2048) == kQuantGemmMaxRows);        // llama-1b qkv
  CHECK(quant_gemm_row_limit(2048, 2048) == kQuantGemmMaxRows);        // o: in == out
  CHECK(quant_gemm_row_limit(16384, 2048) == kQuantGemmWideMaxRows);   // gate | up: 8 in
  CHECK(quant_gemm_row_limit(128256, 2048) == kQuantGemmWideMaxRows);  // lm_head
  CHECK(quant_gemm_row_limit(8192, 2048) == kQuantGemmWideMaxRows);    // exactly 4 in
  CHECK(quant_gemm_row_limit(8191, 2048) == kQuantGemmMaxRows);
  CHECK(quant_gemm_row_limit(2048, 8192) == kQuantGemmDownMaxRows);  // down
  CHECK(quant_gemm_row_limit(2048, 2049) == kQuantGemmDownMaxRows);
  CHECK(quant_gemm_row_limit(6144, 4096) == kQuantGemmMaxRows);            // llama-8b qkv
  CHECK(quant_gemm_row_limit(4096, 4096) == kQuantGemmMaxRows);            // o
  CHECK(quant_gemm_row_limit(4096, 14336) == kQuantGemmLargeDownMaxRows);  // down
  CHECK(quant_gemm_row_limit(4095, 14336) == kQuantGemmDownMaxRows);
  CHECK(quant_gemm_row_limit(28672, 4096) == kQuantGemmLargeWideMaxRows);   // gate | up
  CHECK(quant_gemm_row_limit(128256, 4096) == kQuantGemmLargeWideMaxRows);  // lm_head
  CHECK(quant_gemm_row_limit(16380, 4095) == kQuantGemmWideMaxRows);
  // Matrices in 32-element blocks: wide products up to kQuantGemmSmallBlockWideMaxRows, the rest
  // as the K-quants.
  CHECK(quant_gemm_row_limit(16384, 2048, true, true) == kQuantGemmSmallBlockWideMaxRows);
  CHECK(quant_gemm_row_limit(128256, 4096, true, true) == kQuantGemmSmallBlockWideMaxRows);
  CHECK(quant_gemm_row_limit(3072, 2048, true, true) == kQuantGemmMaxRows);
  CHECK(quant_gemm_row_limit(2048, 8192, true, true) == kQuantGemmDownMaxRows);
  CHECK(quant_gemm_row_limit(4096, 14336, true, true) == kQuantGemmLargeDownMaxRows);
  CHECK(quant_gemm_row_limit(16384, 2048, false, true) == kQuantGemmWideMaxRows);
  CHECK(quant_gemm_row_limit(3072, 576, true, true) == kQuantGemmWideMaxRows);  // SmolLM2
  CHECK(quant_gemm_row_limit(8188, 2047, true, true) == kQuantGemmWideMaxRows);
  CHECK(kQuantGemmSmallBlockWideMaxRows > kQuantGemmLargeWideMaxRows);
  // Without (the comparison switch): the rule before split-K, no down projection.
  CHECK(quant_gemm_row_limit(3072, 2048, false) == kQuantGemmMaxRows);
  CHECK(quant_gemm_row_limit(16384, 2048, false) == kQuantGemmWideMaxRows);
  CHECK(quant_gemm_row_limit(28672, 4096, false) == kQuantGemmWideMaxRows);
  CHECK(quant_gemm_row_limit(8191, 2048, false) == kQuantGemmMaxRows);
  CHECK(quant_gemm_row_limit(2048, 8192, false) == 0);
  CHECK(quant_gemm_row_limit(4096, 14336, false) == 0);
  CHECK(quant_gemm_row_limit(2048, 2049, false) == 0);
  CHECK(kQuantGemmDownMaxRows > 0);
  CHECK(kQuantGemmMaxRows <= kQuantGemmWideMaxRows);
  CHECK(kQuantGemmWideMaxRows <= kQuantGemmLargeWideMaxRows);
  CHECK(kQuantGemmDownMaxRows <= kQuantGemmLargeDownMaxRows);
}

TEST_CASE("weights kept quantized: llama-8b's split-K workspace holds 128 rows") {
  // gate|up and lm_head take the GEMM up to kQuantGemmLargeWideMaxRows: 128 x 16896 x 4 =
  // 8650752 B of partials, a 63rd 137314, C = 137472 (537 x 256).
  const ModelConfig c = preset("llama-8b");
  WorkspaceInputs in = inputs(8192, 256, 4096, false);
  in.max_quantized_elems = int64_t(128256) * 4096;
  CHECK(kQuantGemmLargeWideMaxRows == 128);
  CHECK(plan_workspaces(c, in).bytes.quant_gemm_split == 64 * 137472);
}

TEST_CASE("weights kept quantized: the split-K workspace, by the most rows through the GEMM") {
  // 132 SMs: slices x out at most 4 x 132 tiles x 32 = 16896 columns (out at most 8448). The
  // layout: 64 C bytes, C a multiple of 256 holding the counters and a 63rd of the partials.
  // llama-1b's most rows through the GEMM are gate|up's kQuantGemmWideMaxRows (64): partials
  // 64 x 16896 x 4 = 4325376 B, a 63rd 68658 (counters: 4 x 264 x 4 = 4224), C = 68864.
  const ModelConfig c = preset("llama-1b");
  WorkspaceInputs in = inputs(8192, 256, 4096, false);
  CHECK(plan_workspaces(c, in).bytes.quant_gemm_split == 0);  // nothing kept quantized
  in.max_quantized_elems = int64_t(128256) * 2048;
  CHECK(kQuantGemmWideMaxRows == 64);
  CHECK(plan_workspaces(c, in).bytes.quant_gemm_split == 64 * 68864);
  CHECK(gemm_quant_workspace_bound(64, 132) == 64 * 68864);
  CHECK(gemm_quant_counter_bytes(64 * 68864) == 68864);
  // --batch-invariant: kQuantGemmInvariantRows (256) rows: 17301504 B of partials, a 63rd
  // 274628, C = 274688.
  in.batch_invariant = true;
  CHECK(plan_workspaces(c, in).bytes.quant_gemm_split == 64 * 274688);
  // A budget of 32 tokens caps the rows (every product has at most 32).
  WorkspaceInputs small = inputs(32, 32, 4096, false);
  small.max_quantized_elems = 1;
  CHECK(plan_workspaces(c, small).bytes.quant_gemm_split == gemm_quant_workspace_bound(32, 132));
  // Every split launch the rule makes with up to 64 rows fits the bound, whatever the (out, in),
  // and a launch fits the size gemm_quant_workspace_bytes gives it but not 256 bytes less.
  for (int64_t width : {2048, 4096, 8192, 14336}) {
    for (int64_t out : {32, 333, 576, 2048, 3072, 4096, 6144, 16384}) {
      const int splits = gemm_quant_split_k(width, out, 132);
      CHECK(gemm_quant_workspace_fits(gemm_quant_workspace_bound(64, 132), splits, 64, out));
      const int64_t bytes = gemm_quant_workspace_bytes(std::max(splits, 2), 64, out);
      CHECK(gemm_quant_workspace_fits(bytes, std::max(splits, 2), 64, out));
      CHECK_FALSE(gemm_quant_workspace_fits(bytes - 64 * 256, std::max(splits, 2), 64, out));
    }
  }
}

TEST_CASE("shared-prefix attention: rows per prefix block and prefix splits") {
  // Query vectors per block are 8: rows = 8 / (the GQA group rounded up to 1, 2 or 4).
  CHECK(attention_prefix_rows_per_block(12, 12) == 8);  // gpt2
  CHECK(attention_prefix_rows_per_block(8, 32) == 2);   // llama-1b, group 4
  CHECK(attention_prefix_rows_per_block(4, 12) == 2);   // group 3 rounds up to 4
  CHECK(attention_prefix_rows_per_block(4, 8) == 4);    // group 2
  CHECK(attention_prefix_rows_per_block(1, 8) == 0);    // group 8 fills a block alone: off
  CHECK(attention_shared_prefix_supported(12, 12, 64));
  CHECK(attention_shared_prefix_supported(8, 32, 128));
  CHECK_FALSE(attention_shared_prefix_supported(12, 12, 32));  // the row-shared kernel's widths
  CHECK_FALSE(attention_shared_prefix_supported(1, 8, 64));
  // seed000 on gpt2: 64 rows -> 8 blocks per head x 12 heads = 96 blocks; 528 / 96 = 5 splits.
  CHECK(attention_prefix_splits(64, 12, 12, 528, 32) == 5);
  CHECK(attention_prefix_splits(2, 8, 32, 528, 32) == 32);   // capped at max_splits
  CHECK(attention_prefix_splits(256, 8, 32, 528, 32) == 1);  // at least one
  CHECK(attention_prefix_splits(64, 1, 8, 528, 32) == 0);    // off
}

TEST_CASE(
    "the cluster decode attention takes 16 blocks a cluster for few clusters past 1,024 keys") {
  // 8 blocks of 4 warps have two 16-key chunks each in flight before the PDL wait: 1,024 keys.
  const ModelConfig llama = preset("llama-1b");  // 8 KV heads: a cluster a KV head and row
  CHECK(cluster_attention_splits(llama, 1, 1) == 8);
  CHECK(cluster_attention_splits(llama, 1, 640) == 8);
  CHECK(cluster_attention_splits(llama, 1, 1024) == 8);
  CHECK(cluster_attention_splits(llama, 1, 1025) == 16);
  CHECK(cluster_attention_splits(llama, 2, 4096) == 16);  // 16 clusters
  CHECK(cluster_attention_splits(llama, 3, 4096) == 8);   // 24
  ModelConfig smollm2 = llama;
  smollm2.num_heads = 9;
  smollm2.num_kv_heads = 3;
  CHECK(cluster_attention_splits(smollm2, 4, 2176) == 16);  // 12
  CHECK(cluster_attention_splits(smollm2, 8, 2176) == 8);   // 24
  ModelConfig wide_group = llama;  // a GQA group of 16: two blocks' worth of heads a KV head
  wide_group.num_heads = 32;
  wide_group.num_kv_heads = 2;
  CHECK(cluster_attention_splits(wide_group, 4, 2048) == 16);  // 4 x 2 x 2
  CHECK(cluster_attention_splits(wide_group, 5, 2048) == 8);   // 20
}

TEST_CASE("a decode bucket's graph variant follows its launch sequence") {
  // The variant of a bucket of `rows` on `config` at `keys` (the step's longest row), as the CUDA
  // backend composes it: the step's splits and limit against the short rows' limit.
  const auto variant = [](const ModelConfig& config, int rows, int keys, bool shared = false) {
    return decode_graph_variant(shared, cluster_attention_splits(config, rows, keys), rows,
                                cluster_attention_max_rows(config, 0),
                                cluster_attention_max_rows(config, keys));
  };
  const ModelConfig llama = preset("llama-1b");
  CHECK(variant(llama, 8, 640) == 0);   // clusters of 8 blocks
  CHECK(variant(llama, 8, 1536) == 3);  // split-KV in place of them
  CHECK(variant(llama, 4, 4096) == 0);  // 32 clusters: still 8 blocks
  CHECK(variant(llama, 2, 2048) == 2);  // 16 clusters past 1,024 keys: 16 blocks
  CHECK(variant(llama, 16, 640) == 0);  // split-KV at any context
  CHECK(variant(llama, 16, 4096) == 0);
  CHECK(variant(llama, 8, 1536, true) == 1);  // the shared-prefix launch
  ModelConfig smollm2 = llama;
  smollm2.num_heads = 9;
  smollm2.num_kv_heads = 3;
  CHECK(variant(smollm2, 32, 1023) == 0);
  CHECK(variant(smollm2, 32, 1024) == 3);
  CHECK(variant(smollm2, 24, 2048) == 0);
  CHECK(variant(smollm2, 24, 3072) == 3);
  CHECK(variant(smollm2, 16, 3072) == 3);
  CHECK(variant(smollm2, 8, 4096) == 0);
  CHECK(variant(smollm2, 4, 2048) == 2);  // 12 clusters
  CHECK(variant(smollm2, 40, 512) == 0);  // past every limit
  // One forced limit (ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS): the same at every context.
  CHECK(decode_graph_variant(false, kClusterAttentionSplits, 8, 4, 4) == 0);
}

TEST_CASE("the cluster decode attention's row limit follows the KV width and the context") {
  // llama-1b (8 KV heads of 64) and llama-8b (8 of 128): the split-KV kernel from 9 rows; gpt2
  // (12 of 64, one query head each) from 7. SmolLM2-135M (3 KV heads of 64: 192 wide) keeps the
  // cluster kernel to 32.
  CHECK(cluster_attention_max_rows(preset("llama-1b"), 640) == 8);
  CHECK(cluster_attention_max_rows(preset("llama-8b"), 640) == 8);
  CHECK(cluster_attention_max_rows(preset("gpt2"), 640) == 6);
  ModelConfig smollm2 = preset("llama-1b");
  smollm2.num_heads = 9;
  smollm2.num_kv_heads = 3;
  CHECK(smollm2.kv_dim() == 192);
  CHECK(cluster_attention_max_rows(smollm2, 640) == 32);
  // A GPU's shard under tensor parallel: llama-8b over two GPUs keeps 4 x 128 = 512.
  ModelConfig shard = preset("llama-8b");
  shard.num_heads /= 2;
  shard.num_kv_heads /= 2;
  CHECK(cluster_attention_max_rows(shard, 640) == 8);
  shard.num_heads /= 2;
  shard.num_kv_heads /= 2;
  CHECK(cluster_attention_max_rows(shard, 640) == 32);  // four GPUs: 256 wide
  // Long rows: the wide GQA models keep the cluster kernel to 4 rows only from 1,536 keys (the
  // graph bucket of 8 goes to the split-KV kernel); SmolLM2's shape to 24 rows from 1,024 keys
  // and to 8 from 3,072; gpt2 keeps its limit (its rows end at 1,024 keys).
  CHECK(cluster_attention_max_rows(preset("llama-1b"), 1535) == 8);
  CHECK(cluster_attention_max_rows(preset("llama-1b"), 1536) == 4);
  CHECK(cluster_attention_max_rows(preset("llama-8b"), 4224) == 4);
  CHECK(cluster_attention_max_rows(preset("gpt2"), 4224) == 6);
  CHECK(cluster_attention_max_rows(smollm2, 1023) == 32);
  CHECK(cluster_attention_max_rows(smollm2, 1024) == 24);
  CHECK(cluster_attention_max_rows(smollm2, 3071) == 24);
  CHECK(cluster_attention_max_rows(smollm2, 3072) == 8);
  CHECK(cluster_attention_max_rows(smollm2, 1 << 20) == 8);
}
