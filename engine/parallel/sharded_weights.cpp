// One rank's slices of a model's weights (sharded_weights.h).
#include "engine/parallel/sharded_weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/model/quant.h"
#include "engine/parallel/shard_plan.h"

namespace rose {

namespace {

// Rows [begin, end) of `part` (rows of the canonical tensor, counted within the part), columns as
// the slice says; appended to `out`. False when a cut is not allowed (slice_stored_parts).
bool cut_part(const StoredPart& part, int64_t begin, int64_t end, const TensorSlice& slice,
              std::deque<std::vector<uint8_t>>& storage, std::vector<StoredPart>& out) {
  StoredPart cut = part;
  cut.rows = end - begin;
  if (part.unpermute_heads > 0) {  // a head's rows move among themselves: cut whole heads only
    const int64_t head_rows = part.rows / part.unpermute_heads;
    if (begin % head_rows != 0 || cut.rows % head_rows != 0) return false;
    cut.unpermute_heads = int(cut.rows / head_rows);
  }
  const GgmlTypeTraits& t = ggml_type_traits(part.type);
  const int64_t row_bytes = part.cols / t.block_elems * t.block_bytes;
  const uint8_t* first_row = part.bytes.data() + begin * row_bytes;
  if (slice.col_begin == 0 && slice.cols == part.cols) {
    cut.bytes = std::span<const uint8_t>(first_row, size_t(cut.rows * row_bytes));
  } else {
    if (slice.col_begin % t.block_elems != 0 || slice.cols % t.block_elems != 0) return false;
    const int64_t skip = slice.col_begin / t.block_elems * t.block_bytes;
    const int64_t keep = slice.cols / t.block_elems * t.block_bytes;
    std::vector<uint8_t>& bytes = storage.emplace_back(size_t(cut.rows * keep));
    for (int64_t r = 0; r < cut.rows; ++r) {
      std::copy_n(first_row + r * row_bytes + skip, keep, bytes.data() + r * keep);
    }
    cut.bytes = bytes;
    cut.cols = slice.cols;
  }
  out.push_back(cut);
  return true;
}

}  // namespace

std::optional<std::vector<StoredPart>> slice_stored_parts(
    const std::vector<StoredPart>& whole, const TensorSlice& slice,
    std::deque<std::vector<uint8_t>>& storage) {
  int64_t total_rows = 0;
  for (const StoredPart& part : whole) {
    if (part.cols != slice.source_cols) return std::nullopt;
    total_rows += part.rows;
  }
  if (total_rows != slice.source_rows) return std::nullopt;
  std::vector<StoredPart> out;
  for (const RowRun& run : slice.rows) {
    int64_t part_begin = 0;  // the part's first canonical row
    for (const StoredPart& part : whole) {
      const int64_t begin = std::max(run.begin, part_begin);
      const int64_t end = std::min(run.begin + run.count, part_begin + part.rows);
      if (begin < end &&
          !cut_part(part, begin - part_begin, end - part_begin, slice, storage, out)) {
        return std::nullopt;
      }
      part_begin += part.rows;
    }
  }
  return out;
}

namespace {

class ShardedWeightSource final : public WeightSource {
 public:
  ShardedWeightSource(const WeightSource& whole, int degree, int rank)
      : whole_(whole),
        degree_(degree),
        rank_(rank),
        config_(shard_config(whole.config(), degree, rank)) {}

  const ModelConfig& config() const override { return config_; }

  void read_f32(const std::string& name, std::span<float> dst) const override {
    const TensorSlice slice = shard_slice(whole_.config(), degree_, rank_, name);
    ROSE_ASSERT(int64_t(dst.size()) == slice.numel());
    if (slice.whole()) return whole_.read_f32(slice.source, dst);
    std::vector<float> source(size_t(slice.source_rows * slice.source_cols));
    whole_.read_f32(slice.source, source);
    float* out = dst.data();
    for (const RowRun& run : slice.rows) {
      for (int64_t r = run.begin; r < run.begin + run.count; ++r) {
        const float* row = source.data() + r * slice.source_cols + slice.col_begin;
        out = std::copy_n(row, slice.cols, out);
      }
    }
  }

  std::optional<SyntheticInit> synthetic(const std::string& name) const override {
    const TensorSlice slice = shard_slice(whole_.config(), degree_, rank_, name);
    std::optional<SyntheticInit> init = whole_.synthetic(slice.source);
    if (!init || slice.whole() || init->kind == SyntheticInit::Kind::kConstant) return init;
    init->rows = slice.rows;
    init->source_cols = slice.source_cols;
    init->col_begin = slice.col_begin;
    init->cols = slice.cols;
    return init;
  }

  // A sliced tensor's parts are made once and kept (with the bytes they copy) for the source's
  // life: a backend asks for them to size its upload and again to upload.
  std::optional<std::vector<StoredPart>> stored_parts(const std::string& name) const override {
    const TensorSlice slice = shard_slice(whole_.config(), degree_, rank_, name);
    if (slice.whole()) return whole_.stored_parts(slice.source);
    const std::lock_guard<std::mutex> lock(mutex_);
    auto cached = sliced_.find(name);
    if (cached == sliced_.end()) {
      std::optional<std::vector<StoredPart>> parts = whole_.stored_parts(slice.source);
      if (parts) parts = slice_stored_parts(*parts, slice, storage_);
      cached = sliced_.emplace(name, std::move(parts)).first;
    }
    return cached->second;
  }

 private:
  const WeightSource& whole_;
  int degree_, rank_;
  ModelConfig config_;
  mutable std::mutex mutex_;  // guards the two below
  mutable std::map<std::string, std::optional<std::vector<StoredPart>>> sliced_;
  mutable std::deque<std::vector<uint8_t>> storage_;  // copied blocks of column cuts
};

}  // namespace

std::unique_ptr<WeightSource> shard_weights(const WeightSource& whole, int degree, int rank) {
  return std::make_unique<ShardedWeightSource>(whole, degree, rank);
}

}  // namespace rose
