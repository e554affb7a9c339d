// Tensor-parallel shard plan (shard_plan.h).
#include "engine/parallel/shard_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/common/error.h"

namespace rose {

int64_t TensorSlice::numel() const {
  int64_t rows_total = 0;
  for (const RowRun& run : rows) rows_total += run.count;
  return rows_total * cols;
}

bool TensorSlice::whole() const {
  return col_begin == 0 && cols == source_cols && rows.size() == 1 && rows[0].begin == 0 &&
         rows[0].count == source_rows;
}

std::string tensor_parallel_refusal(const ModelConfig& m, int degree) {
  if (degree < 1) return fmt::format("--tensor-parallel {} must be at least 1", degree);
  if (degree == 1) return "";
  const char* field = nullptr;
  int value = 0;
  // Whole GQA groups per rank: the KV heads split evenly, so the query heads do too.
  if (m.num_kv_heads % degree != 0) {
    field = "num_key_value_heads", value = m.num_kv_heads;
  } else if (m.num_heads % degree != 0) {
    field = "num_attention_heads", value = m.num_heads;
  } else if (m.intermediate_size % degree != 0) {
    field = "intermediate_size", value = m.intermediate_size;
  }
  if (!field && m.vocab_size < degree) {  // every rank needs lm_head rows
    return fmt::format("model {} cannot be split over {} devices: its vocab_size is {}", m.name,
                       degree, m.vocab_size);
  }
  if (!field) return "";
  return fmt::format(
      "model {} cannot be split over {} devices: its {} ({}) is not a multiple of {} (it allows "
      "--tensor-parallel {})",
      m.name, degree, field, value, degree, tensor_parallel_degrees_text(m));
}

std::vector<int> tensor_parallel_degrees(const ModelConfig& m) {
  std::vector<int> degrees;
  for (int d = 1; d <= std::max(1, m.num_kv_heads); ++d) {
    if (m.num_kv_heads % d == 0 && m.num_heads % d == 0 && m.intermediate_size % d == 0 &&
        m.vocab_size >= d) {
      degrees.push_back(d);
    }
  }
  return degrees;
}

std::string tensor_parallel_degrees_text(const ModelConfig& model) {
  std::string text;
  for (int d : tensor_parallel_degrees(model))
    text += (text.empty() ? "" : ", ") + std::to_string(d);
  return text;
}

void check_shard_rank(const ModelConfig& shard, int rank, int size) {
  if (shard.tp_size != size || shard.tp_rank != rank) {
    fail("model {}: shard {} of {} needs the collective of that rank (got rank {} of {})",
         shard.name, shard.tp_rank, shard.tp_size, rank, size);
  }
}

void check_tensor_parallel(const ModelConfig& model, int degree) {
  const std::string why = tensor_parallel_refusal(model, degree);
  if (!why.empty()) fail("{}", why);
}

int vocab_shard_stride(int vocab_size, int degree) { return (vocab_size + degree - 1) / degree; }

RowRun vocab_shard(int vocab_size, int degree, int rank) {
  const int64_t stride = vocab_shard_stride(vocab_size, degree);
  const int64_t begin = std::min<int64_t>(vocab_size, stride * rank);
  return RowRun{begin, std::min<int64_t>(vocab_size, begin + stride) - begin};
}

ModelConfig shard_config(const ModelConfig& model, int degree, int rank) {
  check_tensor_parallel(model, degree);
  ROSE_ASSERT(rank >= 0 && rank < degree);
  ModelConfig shard = model;
  if (degree == 1) return shard;
  shard.num_heads = model.num_heads / degree;
  shard.num_kv_heads = model.num_kv_heads / degree;
  shard.intermediate_size = model.intermediate_size / degree;
  shard.tp_rank = rank;
  shard.tp_size = degree;
  const RowRun vocab = vocab_shard(model.vocab_size, degree, rank);
  shard.lm_head_begin = int(vocab.begin);
  shard.lm_head_rows = int(vocab.count);
  shard.tie_word_embeddings = false;  // the shard's lm_head.weight is its own tensor
  return shard;
}

namespace {

bool ends_with(const std::string& text, const char* suffix) { return text.ends_with(suffix); }

// The whole tensor `name` of shape (rows, cols).
TensorSlice whole(const std::string& name, int64_t rows, int64_t cols) {
  return TensorSlice{name, rows, cols, {RowRun{0, rows}}, 0, cols};
}

}  // namespace

TensorSlice shard_slice(const ModelConfig& m, int degree, int rank, const std::string& name) {
  check_tensor_parallel(m, degree);
  const int64_t H = m.hidden_size, I = m.intermediate_size, hd = m.head_dim;
  const int64_t q_heads = m.num_heads / degree, kv_heads = m.num_kv_heads / degree;
  const int64_t shard_I = I / degree;
  if (name == "lm_head.weight") {
    const RowRun vocab = vocab_shard(m.vocab_size, degree, rank);
    const std::string source = m.tie_word_embeddings ? "tok_emb" : "lm_head.weight";
    return TensorSlice{source, m.vocab_size, H, {vocab}, 0, H};
  }
  const bool matrix = ends_with(name, ".weight") && !ends_with(name, "norm.weight");
  const bool qkv = ends_with(name, "qkv.weight") || ends_with(name, "qkv.bias");
  const bool up = ends_with(name, "up.weight") || ends_with(name, "up.bias");
  const int64_t cols = matrix ? H : 1;
  if (qkv) {  // column-parallel: this rank's query heads, then its KV heads of k and of v
    const int64_t q_dim = int64_t(m.num_heads) * hd, kv_dim = int64_t(m.num_kv_heads) * hd;
    std::vector<RowRun> rows = {{rank * q_heads * hd, q_heads * hd},
                                {q_dim + rank * kv_heads * hd, kv_heads * hd},
                                {q_dim + kv_dim + rank * kv_heads * hd, kv_heads * hd}};
    return TensorSlice{name, q_dim + 2 * kv_dim, cols, std::move(rows), 0, cols};
  }
  if (up) {  // column-parallel: this rank's part of I (of gate and of up when gated)
    const bool gated = m.mlp_kind() == MlpKind::kSiluGated && matrix;
    std::vector<RowRun> rows = {{rank * shard_I, shard_I}};
    if (gated) rows.push_back({I + rank * shard_I, shard_I});
    return TensorSlice{name, (gated ? 2 : 1) * I, cols, std::move(rows), 0, cols};
  }
  if (ends_with(name, "o.weight")) {  // row-parallel: its heads' input columns
    const int64_t q_dim = int64_t(m.num_heads) * hd;
    return TensorSlice{name, H, q_dim, {RowRun{0, H}}, rank * q_heads * hd, q_heads * hd};
  }
  if (ends_with(name, "down.weight")) {  // row-parallel: its part of I
    return TensorSlice{name, H, I, {RowRun{0, H}}, rank * shard_I, shard_I};
  }
  // Embeddings, norms, and the o and down biases (added once, after the all-reduce).
  for (const TensorSpec& spec : canonical_tensors(m)) {
    if (spec.name != name) continue;
    const int64_t rows = spec.shape[0];
    return whole(name, rows, spec.shape.size() > 1 ? spec.shape[1] : 1);
  }
  fail("model {}: no canonical tensor '{}' to shard", m.name, name);
}

}  // namespace rose
