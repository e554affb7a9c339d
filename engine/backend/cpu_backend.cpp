// The CPU backend: the reference forward pass in fp32 over the paged KV cache, built from the ops
// in kernels/cpu/ops.h. Every GPU result is checked against it, and CI (no GPU) runs the engine on
// it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/model/quantized_source.h"
#include "engine/model/rope.h"
#include "engine/parallel/shard_plan.h"
#include "kernels/cpu/ops.h"

namespace rose {
namespace {

// Rows per pass through the MLP and the lm_head: bounds the (rows, intermediate) and (rows, vocab)
// workspaces whatever the token budget is. Rows are independent there, so chunking changes nothing.
constexpr int kMlpChunk = 256;
constexpr int kLogitsChunk = 16;
// time_collectives(): calls of each collective before the timed ones.
constexpr int kCollectiveWarmUpCalls = 3;

// Mean seconds of one call() over `iterations` back-to-back calls, after the warm-up calls.
template <typename F>
double time_calls(int iterations, F call) {
  for (int i = 0; i < kCollectiveWarmUpCalls; ++i) call();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) call();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iterations;
}

struct LayerWeights {
  std::vector<float> attn_norm_w, attn_norm_b;  // (H,)
  std::vector<float> qkv_w;                     // (q_dim + 2 kv_dim, H)
  std::vector<float> qkv_b;                     // (q_dim + 2 kv_dim,) or empty
  std::vector<float> o_w;                       // (H, q_dim)
  std::vector<float> o_b;                       // (H,) GPT-2
  std::vector<float> mlp_norm_w, mlp_norm_b;    // (H,)
  std::vector<float> up_w;                      // GPT-2 (I, H); Llama (2I, H) rows gate | up
  std::vector<float> up_b;                      // (I,) GPT-2
  std::vector<float> down_w;                    // (H, I)
  std::vector<float> down_b;                    // (H,) GPT-2
};

// Nullable pointer to a tensor that may be absent.
const float* data_or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

class CpuBackend final : public Backend {
 public:
  CpuBackend(const WeightSource& weights, const BackendOptions& options);

  void execute(const StepPlan& plan, StepOutput& out) override;
  const PlanLimits& limits() const override { return limits_; }
  std::string device_name() const override {
    return "cpu (" + std::to_string(pool_.num_threads()) + " threads)";
  }
  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  std::string weight_types() const override { return weight_types_; }
  int64_t kv_bytes_per_token() const override {
    return config_.kv_elements_per_token() * int64_t(sizeof(float));
  }
  std::optional<CollectiveTiming> time_collectives(int rows, int iterations) override;

 private:
  // The constructor's phases, in order: each reads only what the ones before it set.
  void check_model_and_options(const BackendOptions& options);
  void load_weights(const WeightSource& weights);
  LayerWeights load_layer(const WeightSource& weights, int layer);
  void allocate_kv_pool(const BackendOptions& options);
  void allocate_workspaces();
  std::vector<float> load(const WeightSource& weights, const std::string& name, int64_t numel);
  void validate(const StepPlan& plan) const;
  // residual += delta (when given); out = the architecture's norm of residual.
  void add_norm(float* residual, const float* delta, const std::vector<float>& weight,
                const std::vector<float>& bias, int n, float* out) const;
  void mlp(const LayerWeights& layer, const float* normed, int n, float* out);
  // A row-parallel layer's output (n, H): summed over the tensor-parallel ranks, then its bias
  // added once (when given). Without tensor parallel the bias was added by the linear layer.
  void reduce_rows(float* out, const std::vector<float>& bias, int n);
  // The sampled rows' logits (rows, V): the lm_head's, or gathered from every rank's vocab rows.
  const float* logits_rows(const float* normed, int rows);

  ModelConfig config_;
  int block_size_ = 0;
  int num_kv_blocks_ = 0;
  PlanLimits limits_;  // set once the KV pool is sized
  int max_num_seqs_ = 0;
  int max_num_tokens_ = 0;
  int max_model_len_ = 0;
  int64_t weight_bytes_ = 0;
  std::string weight_types_;  // "fp32", or "fp32 (dequantized from Q4_1 x 120, ...)"
  mutable cpu::ThreadPool pool_;
  // Tensor parallel: this rank's collective, config_ being its shard (engine/parallel); else null.
  Collective* collective_ = nullptr;

  std::vector<float> tok_emb_;                      // (V, H)
  std::vector<float> pos_emb_;                      // (P, H) GPT-2
  std::vector<LayerWeights> layers_;                // (L,)
  std::vector<float> final_norm_w_, final_norm_b_;  // (H,)
  std::vector<float> lm_head_;                      // (V, H); empty when tied to tok_emb_
  std::vector<float> inv_freq_;                     // (head_dim / 2,) Llama

  // Paged KV pool, one K and one V slab per layer; left uninitialised (only written slots are
  // read).
  std::vector<std::unique_ptr<float[]>>
      k_cache_;  // (L) x (num_kv_blocks, block_size, kv_heads, hd)
  std::vector<std::unique_ptr<float[]>> v_cache_;  // same

  // Workspaces sized by the token budget at construction.
  std::vector<float> residual_;     // (max_tokens, H)
  std::vector<float> delta_;        // (max_tokens, H) the last sublayer's output
  std::vector<float> normed_;       // (max_tokens, H)
  std::vector<float> qkv_;          // (max_tokens, qkv_dim)
  std::vector<float> attn_;         // (max_tokens, q_dim)
  std::vector<float> mlp_up_;       // (kMlpChunk, I or 2I)
  std::vector<float> mlp_act_;      // (kMlpChunk, I) Llama
  std::vector<int32_t> last_rows_;  // (max_seqs,) flat row of each sampling sequence's last token
  std::vector<int32_t> last_seqs_;  // (max_seqs,) its sequence
  std::vector<float> last_residual_, last_delta_, last_normed_;  // (kLogitsChunk, H)
  std::vector<float> logits_;  // (kLogitsChunk, lm_head rows), or (kLogitsChunk, stride) sharded
  // Tensor parallel: every rank's logits (tp_size, kLogitsChunk, stride), and the sampled rows'
  // whole logits assembled from them (kLogitsChunk, V).
  std::vector<float> gathered_logits_, full_logits_;
  std::vector<float> sample_scratch_;  // (2 V,)
};

std::vector<float> CpuBackend::load(const WeightSource& weights, const std::string& name,
                                    int64_t numel) {
  std::vector<float> tensor(static_cast<size_t>(numel));
  weights.read_f32(name, std::span<float>(tensor));
  weight_bytes_ += numel * int64_t(sizeof(float));
  return tensor;
}

CpuBackend::CpuBackend(const WeightSource& weights, const BackendOptions& options)
    : config_(weights.config()),
      pool_(0),
      // A one-rank collective (--tensor-parallel 1 through the wrapper) has nothing to combine.
      collective_(options.collective && options.collective->size() > 1 ? options.collective
                                                                       : nullptr) {
  check_model_and_options(options);
  load_weights(weights);
  weight_types_ = has_quantized_linear(weights)
                      ? "fp32 (dequantized from " + linear_weight_types(weights) + ")"
                      : "fp32";
  allocate_kv_pool(options);
  allocate_workspaces();
}

// Rejects shapes and budgets the ops cannot run before anything is allocated, and resolves the
// budgets into members.
void CpuBackend::check_model_and_options(const BackendOptions& options) {
  const ModelConfig& c = config_;
  if (c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
      c.head_dim <= 0 || c.vocab_size <= 0 || c.intermediate_size <= 0) {
    fail(
        "model {}: hidden, layers, heads, kv heads, head_dim, vocab and intermediate sizes must "
        "be positive",
        c.name);
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    fail("model {}: num_attention_heads {} is not a multiple of num_key_value_heads {}", c.name,
         c.num_heads, c.num_kv_heads);
  }
  if (c.head_dim % 2 != 0 || c.head_dim > 1024) {
    fail("model {}: head_dim {} must be even and at most 1024", c.name, c.head_dim);
  }
  if (options.block_size <= 0 || options.max_num_seqs <= 0 || options.max_num_batched_tokens <= 0) {
    fail(
        "backend options: block_size {}, max_num_seqs {} and max_num_batched_tokens {} must be "
        "positive",
        options.block_size, options.max_num_seqs, options.max_num_batched_tokens);
  }
  const Collective* collective = options.collective;
  check_shard_rank(c, collective ? collective->rank() : 0, collective ? collective->size() : 1);
  block_size_ = options.block_size;
  max_num_seqs_ = options.max_num_seqs;
  max_num_tokens_ = options.max_num_batched_tokens;
  max_model_len_ = options.max_model_len > 0 ? options.max_model_len : c.max_position_embeddings;
  if (max_model_len_ <= 0) fail("model {}: max_position_embeddings must be positive", c.name);
  // A learned position table has no row past its end; RoPE extends to any position.
  if (c.uses_learned_positions() && max_model_len_ > c.max_position_embeddings) {
    fail("max_model_len {} exceeds model {}'s n_positions {} (GPT-2 positions are learned)",
         max_model_len_, c.name, c.max_position_embeddings);
  }
}

// Weights, in the canonical layout of engine/model/weights.h (absent tensors stay empty).
void CpuBackend::load_weights(const WeightSource& weights) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  tok_emb_ = load(weights, "tok_emb", V * H);
  if (c.uses_learned_positions()) {
    pos_emb_ = load(weights, "pos_emb", int64_t(c.max_position_embeddings) * H);
  }
  layers_.clear();
  for (int l = 0; l < c.num_layers; ++l) layers_.push_back(load_layer(weights, l));
  final_norm_w_ = load(weights, "final_norm.weight", H);
  if (c.norm_kind() == NormKind::kLayerNorm) final_norm_b_ = load(weights, "final_norm.bias", H);
  if (!c.tie_word_embeddings)
    lm_head_ = load(weights, "lm_head.weight", c.lm_head_vocab_rows() * H);
  if (c.uses_rope()) {
    inv_freq_.resize(c.head_dim / 2);
    rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling, inv_freq_.data());
  }
}

// Loads in the order the constructor always has, so the weight source is read the same way.
LayerWeights CpuBackend::load_layer(const WeightSource& weights, int layer) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, qkv_rows = c.qkv_dim();
  const bool layer_norm = c.norm_kind() == NormKind::kLayerNorm;  // norms carry a bias
  const std::string p = "layers." + std::to_string(layer) + ".";
  LayerWeights w;
  w.attn_norm_w = load(weights, p + "attn_norm.weight", H);
  w.qkv_w = load(weights, p + "qkv.weight", qkv_rows * H);
  if (c.has_qkv_bias()) w.qkv_b = load(weights, p + "qkv.bias", qkv_rows);
  w.o_w = load(weights, p + "o.weight", H * c.q_dim());
  w.mlp_norm_w = load(weights, p + "mlp_norm.weight", H);
  w.down_w = load(weights, p + "down.weight", H * I);
  if (layer_norm) w.attn_norm_b = load(weights, p + "attn_norm.bias", H);
  if (c.has_linear_biases()) w.o_b = load(weights, p + "o.bias", H);
  if (layer_norm) w.mlp_norm_b = load(weights, p + "mlp_norm.bias", H);
  w.up_w = load(weights, p + "up.weight", c.mlp_up_rows() * H);
  if (c.has_linear_biases()) {
    w.up_b = load(weights, p + "up.bias", I);
    w.down_b = load(weights, p + "down.bias", H);
  }
  return w;
}

// One K and one V slab per layer, sized by num_kv_blocks or else by the cpu_kv_bytes budget.
void CpuBackend::allocate_kv_pool(const BackendOptions& options) {
  const int64_t block_bytes = kv_bytes_per_token() * block_size_;
  const int64_t blocks =
      options.num_kv_blocks > 0 ? options.num_kv_blocks : options.cpu_kv_bytes / block_bytes;
  if (blocks <= 0 || blocks > int64_t(INT32_MAX) / block_size_) {
    fail("CPU KV pool: {} blocks of {} bytes does not fit (num_kv_blocks {}, cpu_kv_bytes {})",
         blocks, block_bytes, options.num_kv_blocks, options.cpu_kv_bytes);
  }
  num_kv_blocks_ = static_cast<int>(blocks);
  limits_ = PlanLimits{max_num_tokens_, max_num_seqs_, max_model_len_,
                       num_kv_blocks_,  block_size_,   config_.vocab_size};
  const size_t slab = size_t(num_kv_blocks_) * block_size_ * config_.kv_dim();
  for (int l = 0; l < config_.num_layers; ++l) {
    k_cache_.emplace_back(new float[slab]);
    v_cache_.emplace_back(new float[slab]);
  }
}

// Sized by the token budget once, so execute() never allocates.
void CpuBackend::allocate_workspaces() {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const size_t T = size_t(max_num_tokens_);
  residual_.resize(T * H);
  delta_.resize(T * H);
  normed_.resize(T * H);
  qkv_.resize(T * c.qkv_dim());
  attn_.resize(T * c.q_dim());
  const size_t mlp_rows = std::min<size_t>(T, kMlpChunk);
  mlp_up_.resize(mlp_rows * c.mlp_up_rows());
  if (c.mlp_kind() == MlpKind::kSiluGated) mlp_act_.resize(mlp_rows * I);
  last_rows_.resize(max_num_seqs_);
  last_seqs_.resize(max_num_seqs_);
  last_residual_.resize(kLogitsChunk * H);
  last_delta_.resize(kLogitsChunk * H);
  last_normed_.resize(kLogitsChunk * H);
  if (c.is_shard()) {
    const int stride = vocab_shard_stride(c.vocab_size, c.tp_size);
    logits_.resize(size_t(kLogitsChunk) * stride);
    gathered_logits_.resize(size_t(c.tp_size) * kLogitsChunk * stride);
    full_logits_.resize(size_t(kLogitsChunk) * V);
  } else {
    logits_.resize(size_t(kLogitsChunk) * V);
  }
  sample_scratch_.resize(2 * V);
}

void CpuBackend::validate(const StepPlan& plan) const { validate_step_plan(plan, limits_); }

void CpuBackend::add_norm(float* residual, const float* delta, const std::vector<float>& weight,
                          const std::vector<float>& bias, int n, float* out) const {
  if (config_.norm_kind() == NormKind::kLayerNorm) {
    cpu::add_layernorm(residual, delta, weight.data(), bias.data(), config_.norm_eps, n,
                       config_.hidden_size, out);
  } else {
    cpu::add_rmsnorm(residual, delta, weight.data(), config_.norm_eps, n, config_.hidden_size, out);
  }
}

void CpuBackend::mlp(const LayerWeights& w, const float* normed, int n, float* out) {
  const int H = config_.hidden_size, I = config_.intermediate_size;
  for (int r0 = 0; r0 < n; r0 += kMlpChunk) {
    const int rows = std::min(kMlpChunk, n - r0);
    const float* x = normed + int64_t(r0) * H;
    float* y = out + int64_t(r0) * H;
    if (config_.mlp_kind() == MlpKind::kGeluTanh) {
      cpu::linear(x, w.up_w.data(), w.up_b.data(), rows, H, I, mlp_up_.data(), &pool_);
      cpu::gelu_tanh(mlp_up_.data(), int64_t(rows) * I);
      cpu::linear(mlp_up_.data(), w.down_w.data(), collective_ ? nullptr : w.down_b.data(), rows, I,
                  H, y, &pool_);
    } else {
      cpu::linear(x, w.up_w.data(), nullptr, rows, H, 2 * I, mlp_up_.data(), &pool_);
      cpu::silu_and_mul(mlp_up_.data(), rows, I, mlp_act_.data());
      cpu::linear(mlp_act_.data(), w.down_w.data(), nullptr, rows, I, H, y, &pool_);
    }
  }
  if (collective_) reduce_rows(out, w.down_b, n);
}

void CpuBackend::reduce_rows(float* out, const std::vector<float>& bias, int n) {
  const int H = config_.hidden_size;
  collective_->all_reduce_sum(out, int64_t(n) * H, CollectiveType::kF32, nullptr);
  if (bias.empty()) return;
  for (int64_t r = 0; r < n; ++r) {
    for (int i = 0; i < H; ++i) out[r * H + i] += bias[size_t(i)];
  }
}

const float* CpuBackend::logits_rows(const float* normed, int rows) {
  const ModelConfig& c = config_;
  const float* head = lm_head_.empty() ? tok_emb_.data() : lm_head_.data();
  cpu::linear(normed, head, nullptr, rows, c.hidden_size, c.lm_head_vocab_rows(), logits_.data(),
              &pool_);
  if (!collective_) return logits_.data();
  // Every rank sends its whole (kLogitsChunk, stride) buffer, rows (rows, its vocab rows) used.
  const int64_t stride = vocab_shard_stride(c.vocab_size, c.tp_size);
  collective_->all_gather(logits_.data(), gathered_logits_.data(), kLogitsChunk * stride,
                          CollectiveType::kF32, nullptr);
  for (int rank = 0; rank < c.tp_size; ++rank) {
    const RowRun vocab = vocab_shard(c.vocab_size, c.tp_size, rank);
    const float* part = gathered_logits_.data() + int64_t(rank) * kLogitsChunk * stride;
    for (int r = 0; r < rows; ++r) {
      std::copy_n(part + r * vocab.count, vocab.count,
                  full_logits_.data() + int64_t(r) * c.vocab_size + vocab.begin);
    }
  }
  return full_logits_.data();
}

// A pure-decode step of `rows` sequences: reduce_rows() on (rows, H) twice per layer, and
// logits_rows() once per kLogitsChunk sampled rows, each gathering the whole chunk buffer. Timed
// on the step's own buffers (delta_ is zeroed first so that the repeated in-place sums stay 0).
std::optional<CollectiveTiming> CpuBackend::time_collectives(int rows, int iterations) {
  if (!collective_) return std::nullopt;
  const ModelConfig& c = config_;
  CollectiveTiming t;
  t.ranks = collective_->size();
  t.rows = std::clamp(rows, 1, std::min(max_num_tokens_, max_num_seqs_));
  t.iterations = std::max(1, iterations);
  const int64_t count = int64_t(t.rows) * c.hidden_size;
  const int64_t gather_count = int64_t(kLogitsChunk) * vocab_shard_stride(c.vocab_size, c.tp_size);
  t.all_reduces_per_step = 2 * c.num_layers;
  t.all_reduce_bytes = count * int64_t(sizeof(float));
  t.all_gathers_per_step = (t.rows + kLogitsChunk - 1) / kLogitsChunk;
  t.all_gather_bytes = gather_count * int64_t(sizeof(float));
  std::fill_n(delta_.begin(), count, 0.0f);
  t.all_reduce_s = time_calls(t.iterations, [&] {
    collective_->all_reduce_sum(delta_.data(), count, CollectiveType::kF32, nullptr);
  });
  t.all_gather_s = time_calls(t.iterations, [&] {
    collective_->all_gather(logits_.data(), gathered_logits_.data(), gather_count,
                            CollectiveType::kF32, nullptr);
  });
  return t;
}

void CpuBackend::execute(const StepPlan& plan, StepOutput& out) {
  validate(plan);
  const ModelConfig& c = config_;
  const int n = plan.num_tokens();
  const int num_seqs = plan.num_seqs();
  const int H = c.hidden_size, V = c.vocab_size;
  out.sampled.assign(num_seqs, -1);
  if (plan.return_logits) {
    out.logits.assign(size_t(num_seqs) * V, 0.0f);
  } else {
    out.logits.clear();
  }
  if (n == 0) return;

  cpu::embedding(plan.token_ids.data(), plan.positions.data(), tok_emb_.data(),
                 c.uses_learned_positions() ? pos_emb_.data() : nullptr, n, H, residual_.data());
  const float* pending = nullptr;  // the previous sublayer's output, not yet added to residual_
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    add_norm(residual_.data(), pending, w.attn_norm_w, w.attn_norm_b, n, normed_.data());
    cpu::linear(normed_.data(), w.qkv_w.data(), data_or_null(w.qkv_b), n, H, c.qkv_dim(),
                qkv_.data(), &pool_);
    cpu::rope_and_write_kv(qkv_.data(), plan.positions.data(), plan.slot_mapping.data(),
                           c.uses_rope() ? inv_freq_.data() : nullptr, n, c.num_heads,
                           c.num_kv_heads, c.head_dim, block_size_, k_cache_[l].get(),
                           v_cache_[l].get());
    cpu::paged_attention(qkv_.data(), c.qkv_dim(), k_cache_[l].get(), v_cache_[l].get(),
                         plan.query_start.data(), plan.context_lens.data(),
                         plan.block_tables.data(), plan.block_table_stride, num_seqs, c.num_heads,
                         c.num_kv_heads, c.head_dim, block_size_, scale, attn_.data(), &pool_);
    cpu::linear(attn_.data(), w.o_w.data(), collective_ ? nullptr : data_or_null(w.o_b), n,
                c.q_dim(), H, delta_.data(), &pool_);
    if (collective_) reduce_rows(delta_.data(), w.o_b, n);
    add_norm(residual_.data(), delta_.data(), w.mlp_norm_w, w.mlp_norm_b, n, normed_.data());
    mlp(w, normed_.data(), n, delta_.data());
    pending = delta_.data();
  }

  // The final norm and the lm_head only on each sampling sequence's last token.
  int num_sampled = 0;
  for (int s = 0; s < num_seqs; ++s) {
    if (!plan.do_sample[s]) continue;
    last_rows_[num_sampled] = plan.query_start[s + 1] - 1;
    last_seqs_[num_sampled] = s;
    ++num_sampled;
  }
  for (int r0 = 0; r0 < num_sampled; r0 += kLogitsChunk) {
    const int rows = std::min(kLogitsChunk, num_sampled - r0);
    for (int r = 0; r < rows; ++r) {
      const int64_t row = last_rows_[r0 + r];
      std::memcpy(&last_residual_[size_t(r) * H], &residual_[row * H], sizeof(float) * H);
      std::memcpy(&last_delta_[size_t(r) * H], &delta_[row * H], sizeof(float) * H);
    }
    add_norm(last_residual_.data(), last_delta_.data(), final_norm_w_, final_norm_b_, rows,
             last_normed_.data());
    const float* logits = logits_rows(last_normed_.data(), rows);
    for (int r = 0; r < rows; ++r) {
      const int s = last_seqs_[r0 + r];
      const float* row_logits = logits + size_t(r) * V;
      // A NaN would make every comparison false and argmax return id 0 forever: flag the row.
      const bool finite =
          std::all_of(row_logits, row_logits + V, [](float v) { return std::isfinite(v); });
      out.sampled[s] = finite ? cpu::sample_token(row_logits, V, plan.sampling[s],
                                                  plan.sample_index[s], sample_scratch_.data())
                              : kSampledNonFinite;
      if (plan.return_logits) std::copy_n(row_logits, V, &out.logits[size_t(s) * V]);
    }
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const WeightSource& weights,
                                          const BackendOptions& options) {
  return std::make_unique<CpuBackend>(weights, options);
}

}  // namespace rose
