// One rank's slices of a model's weights (sharded_weights.h).
#include "engine/parallel/sharded_weights.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/common/error.h"
#include "engine/parallel/shard_plan.h"

namespace rose {
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

  std::optional<std::vector<StoredPart>> stored_parts(const std::string& name) const override {
    const TensorSlice slice = shard_slice(whole_.config(), degree_, rank_, name);
    if (!slice.whole()) return std::nullopt;
    return whole_.stored_parts(slice.source);
  }

 private:
  const WeightSource& whole_;
  int degree_, rank_;
  ModelConfig config_;
};

}  // namespace

std::unique_ptr<WeightSource> shard_weights(const WeightSource& whole, int degree, int rank) {
  return std::make_unique<ShardedWeightSource>(whole, degree, rank);
}

}  // namespace rose
