// The CUDA backend's forward pass: per-layer kernel arguments built once, the layers, the linear
// layers' dispatch (cuda_backend.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/parallel/shard_plan.h"
#include "kernels/common/error.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gemm_quant.cuh"
#include "kernels/cuda/gemv_fusion.cuh"
#include "kernels/cuda/gemv_quant.cuh"
#include "kernels/cuda/sampling.cuh"

namespace rose {

// The add-norm arguments every norm of the model shares: the residual stream, the output rows,
// the model's norm.
AddNormArgs CudaBackend::norm_args() const {
  AddNormArgs norm;
  norm.residual = residual_;
  norm.out = normed_;
  norm.hidden = config_.hidden_size;
  norm.eps = config_.norm_eps;
  norm.kind = config_.norm_kind();
  norm.dtype = dtype_;
  return norm;
}

// Layer l's K (then V) pages: (num_blocks, block_size, num_kv_heads, head_dim) each.
void* CudaBackend::k_cache(int l) const {
  return static_cast<char*>(kv_pool_) + int64_t(2 * l) * kv_layer_bytes_;
}
void* CudaBackend::v_cache(int l) const { return static_cast<char*>(k_cache(l)) + kv_layer_bytes_; }

RopeKvArgs CudaBackend::rope_kv_args(int l) const {
  const ModelConfig& c = config_;
  RopeKvArgs rope;
  rope.qkv = qkv_;
  rope.qkv_bias = weights_.layers[l].qkv_b;
  rope.k_cache = k_cache(l);
  rope.v_cache = v_cache(l);
  rope.inv_freq = weights_.inv_freq;  // nullptr without RoPE: no rotation
  rope.angle_table = rope_angles_;
  rope.angle_table_positions = max_model_len_;
  rope.num_heads = c.num_heads;
  rope.num_kv_heads = c.num_kv_heads;
  rope.head_dim = c.head_dim;
  rope.dtype = dtype_;
  return rope;
}

namespace {

// AttentionArgs::kv_evict_first_keys for a model whose K/V take key_bytes a key (all layers): the
// keys a step reads before its cache reads fill the current device's L2 (a 50 MiB L2, as NVIDIA
// gives the H100's and H200's: llama-8b, 128 KiB a key, passes it at 400 keys; llama-1b, 32 KiB,
// at 1,600). 0 (never) with ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST=0.
int64_t kv_evict_first_keys(int64_t key_bytes) {
  if (!kernel_switches().attention_kv_evict_first || key_bytes <= 0) return 0;
  int device = 0, l2_bytes = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  ROSE_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  return std::max<int64_t>(1, int64_t(l2_bytes) / key_bytes);
}

}  // namespace

AttentionArgs CudaBackend::attention_args(int l) const {
  const ModelConfig& c = config_;
  AttentionArgs at;
  at.q = qkv_;
  at.q_stride = c.qkv_dim();
  at.k_cache = k_cache(l);
  at.v_cache = v_cache(l);
  at.out = attn_;
  at.partial_out = partial_out_;
  at.partial_lse = partial_lse_;
  at.merge_counters = merge_counters_;
  at.num_heads = c.num_heads;
  at.num_kv_heads = c.num_kv_heads;
  at.head_dim = c.head_dim;
  at.block_size = options_.block_size;
  // --batch-invariant: fixed splits from position 0 (see kInvariantSplitKeys).
  if (options_.batch_invariant) at.split_keys = kInvariantSplitKeys;
  at.scale = 1.0f / std::sqrt(float(c.head_dim));
  at.dtype = dtype_;
  return at;
}

// Everything but the step's counts and metadata pointers. Each add-norm first adds the sub-layer
// output still pending in proj_ (and its bias) to the residual: layer 0's attention norm has none.
void CudaBackend::build_layer_args() {
  const int num_layers = config_.num_layers;
  const void* pending_bias = nullptr;  // the bias of the sub-layer output now in proj_
  layer_args_.resize(num_layers);
  // The same for every layer: the device's L2 is asked once.
  const int64_t kv_first_keys = kv_evict_first_keys(kv_block_bytes(config_, 1, element_size_));
  for (int l = 0; l < num_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    LayerArgs& args = layer_args_[l];
    args.attn_norm = norm_args();
    args.attn_norm.delta = l > 0 ? proj_ : nullptr;
    args.attn_norm.delta_bias = pending_bias;
    args.attn_norm.weight = w.attn_norm_w;
    args.attn_norm.bias = w.attn_norm_b;
    args.rope_kv = rope_kv_args(l);
    args.attention = attention_args(l);
    args.attention.kv_evict_first_keys = kv_first_keys;
    args.mlp_norm = norm_args();
    args.mlp_norm.delta = proj_;
    args.mlp_norm.delta_bias = w.o_b;
    args.mlp_norm.weight = w.mlp_norm_w;
    args.mlp_norm.bias = w.mlp_norm_b;
    pending_bias = w.down_b;
  }
  // Layer 0's attention norm also looks up the embedding: one launch fewer a step.
  // ROSEINFER_CUDA_FUSED_EMBEDDING=0 keeps launch_embedding (comparisons).
  if (num_layers > 0 && switches_.fused_embedding) {
    layer_args_[0].attn_norm.tok_emb = weights_.tok_emb;
    layer_args_[0].attn_norm.pos_emb = weights_.pos_emb;
  }
  // Final norm on each sequence's last token only (row_index per step), residual left as it is.
  final_norm_args_ = norm_args();
  final_norm_args_.delta = num_layers > 0 ? proj_ : nullptr;
  final_norm_args_.delta_bias = pending_bias;
  final_norm_args_.weight = weights_.final_norm_w;
  final_norm_args_.bias = weights_.final_norm_b;
  final_norm_args_.out = final_normed_;
  final_norm_args_.write_residual = false;
}

StepFields CudaBackend::step_fields(int n, int num_seqs) const {
  const ModelConfig& c = config_;
  const MetaLayout layout = meta_layout(n, num_seqs);
  StepFields step;
  step.num_tokens = n;
  step.num_seqs = num_seqs;
  step.num_splits =
      attention_num_splits(n, c.num_kv_heads, c.num_heads, plan_.target_ctas, kMaxAttentionSplits);
  if (options_.batch_invariant) {
    step.num_splits = step_splits_;
    // The partials hold invariant_rows rows of invariant_splits splits: more rows of fewer.
    step.rows_per_launch = int(std::min<int64_t>(
        plan_.max_tokens, int64_t(plan_.invariant_rows) * plan_.invariant_splits / step_splits_));
  }
  step.positions = meta<int32_t>(layout.positions);
  step.slot_mapping = meta<int32_t>(layout.slot_mapping);
  step.token_ids = meta<int32_t>(layout.token_ids);
  step.token_seq = meta<int32_t>(layout.token_seq);
  step.query_start = meta<int32_t>(layout.query_start);
  step.context_lens = meta<int32_t>(layout.context_lens);
  step.sample_rows = meta<int32_t>(layout.sample_rows);
  step.block_tables = meta<int32_t>(layout.block_tables);
  step.table_stride = meta<int32_t>(layout.table_stride);
  step.sample_slot = meta<int32_t>(layout.sample_slot);
  step.sample_params = meta<SampleRowParams>(layout.sample_params);
  step.fused_norms = n <= fused_norm_rows_;
  if (step_shared_keys_ > 0) {
    step.shared_keys = meta<int32_t>(layout.shared_keys);
    step.shares_prefix = meta<int32_t>(layout.shares_prefix);
    step.prefix_splits = attention_prefix_splits(n, c.num_kv_heads, c.num_heads, plan_.target_ctas,
                                                 kMaxAttentionSplits);
  }
  return step;
}

void CudaBackend::forward(int n, int num_seqs, int max_query_len) {
  const ModelConfig& c = config_;
  const StepFields step = step_fields(n, num_seqs);
  unreduced_rows_ = 0;  // a step that threw part-way may have left one pending
  unreduced_pushed_ = false;
  const bool embedding_in_norm =
      !layer_args_.empty() && layer_args_[0].attn_norm.tok_emb && !skipped(kSkipNorm);
  if (!embedding_in_norm) {
    launch_embedding(residual_, weights_.tok_emb, weights_.pos_emb, step.token_ids, previous_ids_,
                     step.positions, n, c.hidden_size, dtype_, stream_);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    attention_block(layer_args_[l], weights_.layers[l], step, max_query_len);
    mlp_block(layer_args_[l], weights_.layers[l], step, l == c.num_layers - 1);
  }
  AddNormArgs final_norm = final_norm_args_;
  final_norm.row_index = step.sample_rows;
  final_norm.num_rows = num_seqs;
  if (step.fused_norms) {  // the last down projection has added its output to the residual
    final_norm.delta = nullptr;
    final_norm.delta_bias = nullptr;
  }
  add_norm(final_norm);
  ROSE_ASSERT(unreduced_rows_ == 0);
  lm_head_logits(num_seqs);
  launch_sample(SampleTargets{sample_target_, step.sample_slot, previous_ids_}, logits_,
                step.sample_params, num_seqs, c.vocab_size, sample_scratch_, stream_);
}

// Add-norm, qkv, RoPE and the KV write, attention, o.
void CudaBackend::attention_block(const LayerArgs& layer, const LayerWeights& w,
                                  const StepFields& step, int max_query_len) {
  const int n = step.num_tokens;
  AddNormArgs norm = layer.attn_norm;
  norm.num_rows = n;
  norm.token_ids = step.token_ids;  // read by layer 0's, which also does the embedding
  norm.previous_ids = previous_ids_;
  norm.positions = step.positions;
  // Layer 0's norm (no pending output; it may also do the embedding) stays a kernel of its own.
  if (step.fused_norms && norm.delta) {
    gemm(nullptr, w.qkv, qkv_, n, false, norm_input(norm));
  } else {
    add_norm(norm, !skipped(kSkipNorm));
    gemm(normed_, w.qkv, qkv_, n, false);
  }

  RopeKvArgs rope = layer.rope_kv;
  rope.positions = step.positions;
  rope.slot_mapping = step.slot_mapping;
  rope.num_tokens = n;
  // Batch-1 decode: the cluster attention kernel, which also does the RoPE and the KV write.
  // Default mode, pure decode: the tensor-core kernel (KV heads' query heads packed in a tile)
  // from switches_.tc_decode_min_seqs sequences on, unless the shared-prefix launch applies.
  const int tc_min_seqs = switches_.tc_decode_min_seqs;
  const bool tc_decode =
      tc_min_seqs > 0 && max_query_len == 1 && step.num_seqs >= tc_min_seqs && !step.shared_keys;
  const bool cluster = !options_.batch_invariant && max_query_len == 1 && !step.shared_keys &&
                       !tc_decode && n <= step_cluster_max_rows_ &&
                       (config_.head_dim == 64 || config_.head_dim == 128);
  const bool fuse_rope = cluster && switches_.fused_rope;
  if (!skipped(kSkipRope) && !fuse_rope) launch_rope_kv_write(rope, stream_);

  AttentionArgs at = layer.attention;
  at.block_tables = step.block_tables;
  at.block_table_stride = step.table_stride;
  at.query_start = step.query_start;
  at.context_lens = step.context_lens;
  at.token_seq = step.token_seq;
  at.num_tokens = n;
  at.num_splits = step.num_splits;
  at.rows_per_launch = step.rows_per_launch;
  at.shared_keys = step.shared_keys;
  at.shares_prefix = step.shares_prefix;
  at.prefix_splits = step.prefix_splits;
  at.cluster_decode = cluster;
  at.cluster_splits = step_cluster_splits_;
  at.probe = switches_.attention_probe;
  at.fuse_rope = fuse_rope;
  at.rope = rope;
  // Steps with prefill rows run the tensor-core kernel (one block per 64 query rows); pure
  // decode keeps split-KV, which spreads few rows over the GPU. --batch-invariant runs every step
  // through one kernel so a position's reduction is the same wherever its row comes from: the
  // tensor-core one where it applies (a row's keys are walked in 64-key tiles from position 0,
  // whatever else shares its tile), else split-KV with fixed 512-key splits.
  const bool tensor_core = options_.batch_invariant ? invariant_tensor_core_attention_
                                                    : (max_query_len > 1 || tc_decode) &&
                                                          prefill_attention_supported(at);
  if (skipped(kSkipAttention)) {
    // measurement only (ROSEINFER_CUDA_SKIP)
  } else if (tensor_core) {
    launch_prefill_attention(at, step.num_seqs, max_query_len, stream_);
  } else {
    launch_paged_attention(at, stream_);
  }
  project_out(attn_, w.o, step);
}

// The o or down projection: its output into proj_ for the next add-norm (and the tensor-parallel
// sum), or added straight to the residual stream when the norms are fused.
void CudaBackend::project_out(const void* x, const DeviceMatrix& w, const StepFields& step,
                              bool next_norm_gathers) {
  const int n = step.num_tokens;
  if (step.fused_norms) {
    GemvFusion fusion;
    fusion.residual_add = true;
    gemm(x, w, residual_, n, false, fusion);
    return;
  }
  GemvFusion fusion;
  const bool push = pushes_partial(w, n, next_norm_gathers);
  if (push) fusion.push = push_target_;
  gemm(x, w, proj_, n, false, fusion);
  if (add_norm_reducer_ && !skipped(kSkipCollective)) {
    unreduced_rows_ = n;  // summed by the next add_norm(), fused with it where it can be
    unreduced_pushed_ = push;
  } else {
    all_reduce_proj(n);
  }
}

// A pushed partial must be taken by the very next fused call (its words carry that call's epoch),
// so every condition add_norm() checks before fusing is checked here too.
bool CudaBackend::pushes_partial(const DeviceMatrix& w, int n, bool next_norm_gathers) const {
  if (push_target_.size < 2 || n > push_max_rows_ || next_norm_gathers ||
      skipped(kSkipCollective) || skipped(kSkipNorm)) {
    return false;
  }
  // dense_gemm's path to launch_gemv, the one kernel that pushes
  if (w.quantized() || invariant_gemm_ || !use_gemv(n, int(w.cols)) || skipped(kSkipGemv) ||
      layer_args_.empty()) {
    return false;
  }
  AddNormArgs next = layer_args_[0].mlp_norm;  // every layer's add-norm after o or down alike
  next.num_rows = n;
  return add_norm_reducer_->takes_push(next);
}

// Add-norm, up (or gate|up) with its activation, down; down's output stays in proj_ for the next
// add-norm.
void CudaBackend::mlp_block(const LayerArgs& layer, const LayerWeights& w, const StepFields& step,
                            bool last_layer) {
  const int n = step.num_tokens;
  const ModelConfig& c = config_;
  const int I = c.intermediate_size;
  AddNormArgs norm = layer.mlp_norm;
  norm.num_rows = n;
  const bool gated = c.mlp_kind() == MlpKind::kSiluGated;
  void* hidden_act = gated ? act_ : mlp_;  // (n, I): the down projection's input
  const GemvActivation act = gated ? GemvActivation::kSiluMul : GemvActivation::kGeluTanhBias;
  if (step.fused_norms) {  // the norm in the up projection (fused_norm_max_rows: fused up here)
    gemv_act(nullptr, w.up, w.up_b, hidden_act, n, act, norm_input(norm));
  } else {
    add_norm(norm, !skipped(kSkipNorm));
    if (use_fused_up(w.up, n)) {  // small batch: activation fused
      gemv_act(normed_, w.up, w.up_b, hidden_act, n, act);
    } else {
      gemm(normed_, w.up, mlp_, n, false);
      if (gated) {
        launch_silu_and_mul(act_, mlp_, n, I, dtype_, stream_);
      } else {
        launch_gelu_tanh_bias(mlp_, w.up_b, n, I, dtype_, stream_);
      }
    }
  }
  project_out(hidden_act, w.down, step, last_layer);
}

// The sum is in the activation dtype, as the o and down outputs are (the usual choice of serving
// engines): a rank's partial rounds once more than the whole product does.
void CudaBackend::all_reduce_proj(int n) {
  if (!collective_ || skipped(kSkipCollective)) return;
  const CollectiveType type = dtype_ == DType::kBF16 ? CollectiveType::kBF16 : CollectiveType::kF16;
  collective_->all_reduce_sum(proj_, int64_t(n) * config_.hidden_size, type, stream_);
}

void CudaBackend::add_norm(const AddNormArgs& norm, bool run_norm) {
  const int pending = std::exchange(unreduced_rows_, 0);
  const bool pushed = std::exchange(unreduced_pushed_, false);
  // The final norm gathers rows (row_index) and writes no residual: only its rows need the sum,
  // however many rows are pending.
  const bool rows_covered = norm.row_index ? !norm.write_residual : norm.num_rows == pending;
  if (pending > 0 && run_norm && norm.delta == proj_ && rows_covered &&
      add_norm_reducer_->fuses_add_norm(norm)) {
    add_norm_reducer_->all_reduce_add_norm(norm, pushed, stream_);
    return;
  }
  // Pushed words left unread would pass for the next fused call's (they carry its epoch).
  ROSE_ASSERT(!pushed);
  if (pending > 0) all_reduce_proj(pending);
  if (run_norm) launch_add_norm(norm, stream_);
}

// Under tensor parallel each rank computes its vocab rows' logits (num_seqs, its rows) into
// shard_logits_, and gather_logits() puts every rank's in place; every rank then samples the same
// logits.
void CudaBackend::lm_head_logits(int num_seqs) {
  if (!collective_) return gemm(final_normed_, weights_.lm_head, logits_, num_seqs, true);
  gemm(final_normed_, weights_.lm_head, shard_logits_, num_seqs, true);
  if (!skipped(kSkipCollective)) gather_logits(num_seqs);
}

// By one peer-memory kernel where the collective has one that takes the rows (LogitsGatherer),
// else by sending a whole (num_seqs, stride) chunk through all_gather and copying each rank's rows
// into place.
void CudaBackend::gather_logits(int num_seqs) {
  const ModelConfig& c = config_;
  const int64_t stride = vocab_shard_stride(c.vocab_size, c.tp_size);
  if (logits_gatherer_ && c.tp_size <= kPeerAllReduceMaxRanks) {
    PeerColumnGather layout;  // rank r's (num_seqs, its vocab rows) into logits_' columns
    layout.rows = num_seqs;
    layout.chunk = shard_logits_floats(num_seqs, stride);
    layout.recv_stride = c.vocab_size;
    for (int rank = 0; rank < c.tp_size; ++rank) {
      const RowRun vocab = vocab_shard(c.vocab_size, c.tp_size, rank);
      layout.begin[rank] = int(vocab.begin);
      layout.count[rank] = int(vocab.count);
    }
    if (logits_gatherer_->gathers_logits(layout)) {
      logits_gatherer_->all_gather_logits(shard_logits_, logits_, layout, stream_);
      return;
    }
  }
  collective_->all_gather(shard_logits_, gathered_logits_, num_seqs * stride, CollectiveType::kF32,
                          stream_);
  for (int rank = 0; rank < c.tp_size; ++rank) {
    const RowRun vocab = vocab_shard(c.vocab_size, c.tp_size, rank);
    const size_t row_bytes = size_t(vocab.count) * 4;
    ROSE_CUDA_CHECK(cudaMemcpy2DAsync(logits_ + vocab.begin, size_t(c.vocab_size) * 4,
                                      gathered_logits_ + int64_t(rank) * num_seqs * stride,
                                      row_bytes, row_bytes, size_t(num_seqs),
                                      cudaMemcpyDeviceToDevice, stream_));
  }
}

// Every (out, in, f32_out) forward() passes to gemm(), with the most rows it passes.
std::vector<GemmShape> CudaBackend::gemm_shapes() const {
  const ModelConfig& c = config_;
  const int H = c.hidden_size, I = c.intermediate_size;
  const int T = plan_.max_tokens;
  return {
      GemmShape{c.qkv_dim(), H, false, T},                         // qkv
      GemmShape{H, c.q_dim(), false, T},                           // o
      GemmShape{int(c.mlp_up_rows()), H, false, T},                // up, or gate|up when gated
      GemmShape{H, I, false, T},                                   // down
      GemmShape{c.lm_head_vocab_rows(), H, true, plan_.max_seqs},  // lm_head, fp32 logits
  };
}

void CudaBackend::gemm(const void* x, const DeviceMatrix& w, void* y, int n, bool f32_out,
                       const GemvFusion& fusion) {
  const bool fused = fusion.norm_residual || fusion.residual_add;
  if (!w.quantized()) return dense_gemm(x, w.data, y, n, int(w.cols), int(w.rows), f32_out, fusion);
  if (use_quant_mma(w, n, fusion)) {  // small batches, Q4_K: int8 tensor cores on the blocks
    if (skipped(kSkipGemv)) return;
    const int64_t out_element = f32_out ? 4 : element_size_;
    for (const QuantRange& range : w.ranges) {
      launch_gemv_quant_mma(x, range.blocks, uint32_t(range.type),
                            static_cast<char*>(y) + range.row_begin * out_element, n, int(w.cols),
                            int(range.rows), f32_out, dtype_, quant_mma_x_, stream_, int(w.rows));
    }
    return;
  }
  if (use_quant_gemv(n)) {           // decode: read the blocks, one launch per range of one type
    if (skipped(kSkipGemv)) return;  // measurement only (ROSEINFER_CUDA_SKIP)
    const int64_t out_element = f32_out || fusion.residual_add ? 4 : element_size_;
    for (const QuantRange& range : w.ranges) {
      launch_gemv_quant(x, range.blocks, uint32_t(range.type),
                        static_cast<char*>(y) + range.row_begin * out_element, n, int(w.cols),
                        int(range.rows), f32_out, dtype_, stream_, int(w.rows), fusion);
    }
    return;
  }
  ROSE_ASSERT(!fused);         // fused_norm_max_rows keeps fused steps on the GEMV
  if (use_quant_gemm(w, n)) {  // batches and prefill chunks: tiles decoded inside the GEMM
    const int64_t out_element = f32_out ? 4 : element_size_;
    for (const QuantRange& range : w.ranges) {
      launch_gemm_quant(x, range.blocks, uint32_t(range.type),
                        static_cast<char*>(y) + range.row_begin * out_element, n, int(w.cols),
                        int(range.rows), f32_out, dtype_, quant_gemm_split_,
                        plan_.bytes.quant_gemm_split, stream_, int(w.rows));
    }
    return;
  }
  // The decoded copy was written by the kernel just before: never the GEMVs, whose first weight
  // loads come before their PDL wait.
  library_gemm(x, dequantize(w), y, n, int(w.cols), int(w.rows), f32_out);
}

bool CudaBackend::use_quant_mma(const DeviceMatrix& w, int n, const GemvFusion& fusion) const {
  if (invariant_gemm_ || !quant_mma_x_ || n < quant_mma_min_rows_ || n > quant_mma_max_rows_ ||
      fusion.norm_residual || fusion.residual_add || fusion.push.size > 1) {
    return false;
  }
  return std::all_of(w.ranges.begin(), w.ranges.end(), [&](const QuantRange& range) {
    return (switches_.quant_mma_all_types || range.type == GgmlType::kQ4_K ||
            (switches_.quant_mma_q6k && range.type == GgmlType::kQ6_K)) &&
           gemv_quant_mma_supported(uint32_t(range.type), n, int(w.cols));
  });
}

int CudaBackend::quant_gemm_limit(const DeviceMatrix& w) const {
  const int forced = switches_.gemm_quant_rows[size_t(quant_gemm_shape(w.rows, w.cols))];
  if (forced >= 0) return forced;
  const bool small_blocks =
      std::all_of(w.ranges.begin(), w.ranges.end(), [](const QuantRange& range) {
        return range.type == GgmlType::kQ8_0 || range.type == GgmlType::kQ4_0 ||
               range.type == GgmlType::kQ4_1;
      });
  return quant_gemm_row_limit(w.rows, w.cols, quant_gemm_split_k_,
                              small_blocks && kernel_switches().gemm_quant_pipeline);
}

bool CudaBackend::quant_gemm_in_some_product(int n) const {
  const auto uses = [&](const DeviceMatrix& w) { return w.quantized() && use_quant_gemm(w, n); };
  if (uses(weights_.lm_head)) return true;
  return std::any_of(weights_.layers.begin(), weights_.layers.end(), [&](const LayerWeights& l) {
    return uses(l.qkv) || uses(l.o) || uses(l.up) || uses(l.down);
  });
}

bool CudaBackend::use_quant_gemm(const DeviceMatrix& w, int n) const {
  if (invariant_gemm_ ? !switches_.gemm_quant_invariant : n > quant_gemm_limit(w)) return false;
  return std::all_of(w.ranges.begin(), w.ranges.end(), [&](const QuantRange& range) {
    return gemm_quant_supported(uint32_t(range.type), int(w.cols));
  });
}

// Decodes a kept matrix into dequantized_ (rows, cols) in the activation dtype, for a product of
// more rows than the quantized GEMV takes (prefill, large decode batches, --batch-invariant):
// rows 0..4 cost one weight read, more rows are worth a tensor-core GEMM over the decoded copy.
const void* CudaBackend::dequantize(const DeviceMatrix& w) {
  char* dst = static_cast<char*>(dequantized_);
  for (const QuantRange& range : w.ranges) {
    launch_dequantize_rows(dst + range.row_begin * w.cols * element_size_, dtype_, range.blocks,
                           uint32_t(range.type), 0, range.rows, range.rows, w.cols, 0, stream_);
  }
  return dequantized_;
}

void CudaBackend::dense_gemm(const void* x, const void* w, void* y, int n, int in, int out,
                             bool f32_out, const GemvFusion& fusion) {
  // use_gemv and use_gemv_mma are off under --batch-invariant: library_gemm's pinned GEMM then.
  if (use_gemv(n, in)) {             // small-batch decode: stream the weights with enough blocks
    if (skipped(kSkipGemv)) return;  // measurement only (ROSEINFER_CUDA_SKIP)
    launch_gemv(x, w, y, n, in, out, f32_out, dtype_, stream_, fusion);
    return;
  }
  // fused_norm_max_rows keeps fused steps on the GEMV.
  ROSE_ASSERT(!fusion.norm_residual && !fusion.residual_add);
  // Past the GEMV's rows, up to 32 of a small model (decode batches, short prefill chunks).
  if (use_gemv_mma(n, in)) {
    if (skipped(kSkipGemv)) return;
    launch_gemv_mma(x, w, y, n, in, out, f32_out, dtype_, stream_);
    return;
  }
  library_gemm(x, w, y, n, in, out, f32_out);
}

void CudaBackend::library_gemm(const void* x, const void* w, void* y, int n, int in, int out,
                               bool f32_out) {
  if (invariant_gemm_) {  // --batch-invariant: row r's bits do not depend on n
    invariant_gemm_->run(x, w, y, n, in, out, f32_out, stream_);
    return;
  }
  if (bucketed_gemm_ && bucketed_gemm_->run(x, w, y, n, in, out, f32_out, stream_)) return;
  // Row-major y (n, out) = x (n, in) W^T with W (out, in): in cuBLAS's column-major terms
  // y^T (out, n) = W^T-as-stored (op T of the (in, out) column-major view) times x^T (in, n).
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = dtype_ == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  ROSE_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, t, in, x,
                                 t, in, &beta, y, f32_out ? CUDA_R_32F : t, out, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

bool CudaBackend::use_fused_up(const DeviceMatrix& up, int n) const {
  const int H = config_.hidden_size, I = config_.intermediate_size;
  if (!up.quantized()) return use_gemv(n, H) && use_gemv(n, I);
  // Past the fused-norm rows a gate|up the int8 tensor-core GEMV takes goes there, its SiLU after.
  if (n > fused_norm_cap_ && use_quant_mma(up, n, GemvFusion{})) return false;
  // The quantized fused kernel is the gated one, over one range (gate | up of one type).
  return use_quant_gemv(n) && up.ranges.size() == 1 && config_.mlp_kind() == MlpKind::kSiluGated;
}

void CudaBackend::gemv_act(const void* x, const DeviceMatrix& w, const void* bias, void* y, int n,
                           GemvActivation act, const GemvFusion& norm) {
  if (skipped(kSkipGemv)) return;  // measurement only (ROSEINFER_CUDA_SKIP)
  const int64_t out = act == GemvActivation::kSiluMul ? w.rows / 2 : w.rows;  // gate | up: 2 * out
  if (w.quantized()) {
    ROSE_ASSERT(act == GemvActivation::kSiluMul && w.ranges.size() == 1 && !bias);
    const QuantRange& range = w.ranges.front();
    launch_gemv_quant_silu_mul(x, range.blocks, uint32_t(range.type), y, n, int(w.cols), int(out),
                               dtype_, stream_, norm);
    return;
  }
  launch_gemv_act(x, w.data, bias, y, n, int(w.cols), int(out), act, dtype_, stream_, norm);
}

GemvFusion CudaBackend::norm_input(const AddNormArgs& norm) const {
  GemvFusion fusion;
  fusion.norm_residual = residual_;
  fusion.norm_weight = norm.weight;
  fusion.norm_eps = norm.eps;
  return fusion;
}

int CudaBackend::fused_norm_max_rows() const {
  const int cap = fused_norm_cap_;
  const ModelConfig& c = config_;
  if (cap <= 0 || collective_ || invariant_gemm_ || skipped(kSkipNorm) || skipped(kSkipGemv) ||
      c.norm_kind() != NormKind::kRmsNorm) {
    return 0;
  }
  // Each matrix's product at n rows on a GEMV kernel that takes the fusion: qkv and up (gate | up
  // with its SiLU, one range when quantized) with the norm in, on the quantized GEMV or the dense
  // one-wave kernel (gemv_norm_input_supported: SmolLM2-135M's small products); o and down on
  // either GEMV (both add to the residual).
  const auto on_gemv = [&](const DeviceMatrix& w, int n) {
    if (!w.quantized()) return use_gemv(n, int(w.cols));
    return use_quant_gemv(n) &&
           std::all_of(w.ranges.begin(), w.ranges.end(), [&](const QuantRange& range) {
             return gemv_quant_supported(uint32_t(range.type), n, int(w.cols));
           });
  };
  const bool gated = c.mlp_kind() == MlpKind::kSiluGated;
  const auto norm_in = [&](const DeviceMatrix& w, int n, int64_t out) {
    return on_gemv(w, n) && (w.quantized() || gemv_norm_input_supported(n, int(w.cols), int(out)));
  };
  const auto layer_fuses = [&](const LayerWeights& l, int n) {
    const bool no_biases = !l.o_b && !l.down_b && !l.attn_norm_b && !l.mlp_norm_b;
    return no_biases && gated && norm_in(l.qkv, n, l.qkv.rows) && on_gemv(l.o, n) &&
           on_gemv(l.down, n) && use_fused_up(l.up, n) && norm_in(l.up, n, l.up.rows / 2);
  };
  int rows = 0;
  for (int n = 1; n <= std::max(kGemvMaxRows, kGemvQuantMaxRows); ++n) {
    const auto fuses = [&](const LayerWeights& l) { return layer_fuses(l, n); };
    if (!std::all_of(weights_.layers.begin(), weights_.layers.end(), fuses)) break;
    rows = n;
  }
  return std::min(rows, cap);
}

}  // namespace rose
