#pragma once
// Tensor parallel: one model split over N devices, every layer sharded (issue 13, DESIGN.md
// "Scale-out"). This header is the plan, in plain C++: which degrees a model allows, each rank's
// ModelConfig, and which rows and columns of the whole model's tensors each rank holds.
//
// The split (Megatron-style): qkv and up (gate | up) are column-parallel (a rank holds its query
// heads with their whole GQA groups' KV heads, and its part of the intermediate size), o and down
// row-parallel (their input columns), so each layer needs one all-reduce after o and one after
// down. The lm_head is split by vocabulary rows (the logits are gathered); the embeddings, norms
// and the biases added after an all-reduce are whole on every rank.
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace rose {

// Where one rank's tensor comes from: rows `rows` (runs, in order) and columns
// [col_begin, col_begin + cols) of the whole model's tensor `source` (source_rows, source_cols).
// A vector is one column: its elements are rows.
struct TensorSlice {
  std::string source;
  int64_t source_rows = 0, source_cols = 1;
  std::vector<RowRun> rows;
  int64_t col_begin = 0, cols = 1;
  int64_t numel() const;
  bool whole() const;  // the source tensor as it is
};

// Empty when the model can be split over `degree` devices, else why not, naming the field and
// the degrees it allows.
std::string tensor_parallel_refusal(const ModelConfig& model, int degree);
// The degrees `model` allows, from 1 up to its KV heads.
std::vector<int> tensor_parallel_degrees(const ModelConfig& model);
// "1, 2, 4, 8": tensor_parallel_degrees, for messages and `info`.
std::string tensor_parallel_degrees_text(const ModelConfig& model);
// Throws rose::Error with tensor_parallel_refusal's text.
void check_tensor_parallel(const ModelConfig& model, int degree);

// The vocabulary rows of rank `rank`'s lm_head: ceil(vocab / degree) each, the last rank the rest.
RowRun vocab_shard(int vocab_size, int degree, int rank);
int vocab_shard_stride(int vocab_size, int degree);  // ceil(vocab / degree): the gather's rows

// A backend's check that its weights are the shard of the collective it was given: rank `rank` of
// `size` (a whole model and no collective: 0 of 1). Throws rose::Error otherwise.
void check_shard_rank(const ModelConfig& shard, int rank, int size);

// Rank `rank`'s ModelConfig (config.h: is_shard); `model` must allow `degree`.
ModelConfig shard_config(const ModelConfig& model, int degree, int rank);
// Where the shard's canonical tensor `name` (a tensor of shard_config's canonical_tensors) comes
// from in the whole model.
TensorSlice shard_slice(const ModelConfig& model, int degree, int rank, const std::string& name);

}  // namespace rose
