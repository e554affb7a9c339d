// The CUDA backend's workspace sizes (workspace_plan.h): plain arithmetic, no CUDA.
#include "engine/backend/cuda/workspace_plan.h"

#include <algorithm>

#include "engine/parallel/shard_plan.h"
#include "kernels/common/attention_split.h"
#include "kernels/common/gemm_quant_split.h"
#include "kernels/common/gemv_quant_mma_layout.h"
#include "kernels/common/sampling_rule.h"

namespace rose {

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

MetaLayout meta_layout(int64_t num_tokens, int64_t num_seqs) {
  MetaLayout layout;
  int64_t offset = 0;
  auto take = [&](int64_t bytes) {
    const int64_t at = offset;
    offset = align_up(offset + bytes, 16);
    return at;
  };
  layout.sample_params = take(num_seqs * int64_t(sizeof(SampleRowParams)));
  layout.query_start = take((num_seqs + 1) * 4);
  layout.context_lens = take(num_seqs * 4);
  layout.sample_rows = take(num_seqs * 4);
  layout.table_stride = take(4);
  layout.sample_slot = take(4);
  layout.token_ids = take(num_tokens * 4);
  layout.positions = take(num_tokens * 4);
  layout.slot_mapping = take(num_tokens * 4);
  layout.token_seq = take(num_tokens * 4);
  layout.shared_keys = take(4);
  layout.shares_prefix = take(num_seqs * 4);
  layout.block_tables = offset;
  return layout;
}

namespace {

// Attention partials: in invariant mode, invariant_rows rows of the fixed grid; otherwise the
// largest (rows x heads x splits) over every batch size that splits at all (a one-split launch
// writes its output directly).
void plan_attention_partials(const ModelConfig& c, const WorkspaceInputs& in, WorkspacePlan& plan) {
  const int64_t T = plan.max_tokens;
  int64_t partial_rows = 0;
  if (in.batch_invariant) {
    plan.invariant_splits = (in.max_model_len + kInvariantSplitKeys - 1) / kInvariantSplitKeys;
    const int64_t row_bytes = int64_t(c.num_heads) * plan.invariant_splits * (c.head_dim + 1) * 4;
    plan.invariant_rows = int(std::clamp<int64_t>(kInvariantPartialBytes / row_bytes, 1, T));
    partial_rows = int64_t(plan.invariant_rows) * c.num_heads * plan.invariant_splits;
  }
  for (int n = 1; n <= T && !in.batch_invariant; ++n) {
    const int splits =
        attention_num_splits(n, c.num_kv_heads, c.num_heads, plan.target_ctas, kMaxAttentionSplits);
    if (splits > 1)
      partial_rows = std::max<int64_t>(partial_rows, int64_t(n) * c.num_heads * splits);
  }
  // Shared-prefix decode steps (n rows of one token each, n >= 2): the prefix launch's slots too,
  // and the key splits write partials even when there is one.
  const bool shared_prefix = !in.batch_invariant && attention_shared_prefix_supported(
                                                        c.num_kv_heads, c.num_heads, c.head_dim);
  for (int n = 2; shared_prefix && n <= std::min<int64_t>(T, in.max_num_seqs); ++n) {
    const int splits =
        attention_num_splits(n, c.num_kv_heads, c.num_heads, plan.target_ctas, kMaxAttentionSplits);
    const int prefix = attention_prefix_splits(n, c.num_kv_heads, c.num_heads, plan.target_ctas,
                                               kMaxAttentionSplits);
    partial_rows = std::max<int64_t>(partial_rows, int64_t(n) * c.num_heads * (splits + prefix));
  }
  plan.partial_rows = partial_rows;
  plan.bytes.partial_out = partial_rows * c.head_dim * 4;
  plan.bytes.partial_lse = partial_rows * 4;
  plan.bytes.merge_counters = attention_merge_counters(int(T), c.num_kv_heads, c.num_heads) * 4;
}

}  // namespace

WorkspacePlan plan_workspaces(const ModelConfig& c, const WorkspaceInputs& in) {
  WorkspacePlan plan;
  plan.max_seqs = in.max_num_seqs;
  plan.max_tokens = std::max(in.max_num_batched_tokens, in.max_num_seqs);
  plan.max_table_stride = (in.max_model_len + in.block_size - 1) / in.block_size;
  plan.target_ctas = 4 * in.num_sms;

  const int64_t T = plan.max_tokens, S = plan.max_seqs, H = c.hidden_size, e = in.element_size;
  WorkspaceBytes& b = plan.bytes;
  b.residual = T * H * 4;
  b.normed = T * H * e;
  b.qkv = T * c.qkv_dim() * e;
  b.attn = T * c.q_dim() * e;
  b.proj = T * H * e;
  b.mlp = T * c.mlp_up_rows() * e;
  if (c.mlp_kind() == MlpKind::kSiluGated) b.act = T * c.intermediate_size * e;
  b.final_normed = S * H * e;
  b.logits = S * c.vocab_size * 4;
  if (c.is_shard()) {
    const int64_t stride = vocab_shard_stride(c.vocab_size, c.tp_size);
    b.shard_logits = shard_logits_floats(S, stride) * 4;
    b.gathered_logits = c.tp_size * S * stride * 4;
  }
  b.sampled = S * 4;
  b.sample_scratch = sample_scratch_bytes(S);
  b.dequantized = in.max_quantized_elems * e;
  if (in.max_quantized_elems > 0) {
    // forward()'s products (CudaBackend::gemm_shapes): (out, in, most rows); whichever are kept,
    // the workspace covers them (the slice rule bounds slices x out for any shape).
    const int64_t I = c.intermediate_size;
    const int64_t shapes[][3] = {{c.qkv_dim(), H, T},
                                 {H, c.q_dim(), T},
                                 {c.mlp_up_rows(), H, T},
                                 {H, I, T},
                                 {c.lm_head_vocab_rows(), H, S}};
    int64_t rows = in.batch_invariant ? kQuantGemmInvariantRows : 0;
    for (const auto& [out, width, most] : shapes)
      rows = std::max(rows, std::min<int64_t>(most, quant_gemm_row_limit(out, width)));
    b.quant_gemm_split = gemm_quant_workspace_bound(std::min(rows, T), in.num_sms);
    const int64_t widest_in = std::max({int64_t(H), int64_t(c.q_dim()), I});
    b.quant_mma_x = gemv_quant_mma_scratch_bytes(kGemvQuantMmaMaxRows, int(widest_in));
  }
  plan_attention_partials(c, in, plan);
  if (c.uses_rope()) b.rope_angles = int64_t(in.max_model_len) * c.head_dim * 4;
  // The layout only grows with the token and sequence counts: the largest step's fits them all.
  b.meta = meta_layout(T, S).block_tables + S * plan.max_table_stride * int64_t(4);
  return plan;
}

int64_t kv_block_bytes(const ModelConfig& c, int block_size, int64_t element_size) {
  return int64_t(2) * c.num_layers * block_size * c.kv_dim() * element_size;
}

}  // namespace rose
