#include "engine/model/weight_check.h"

#include <cmath>

namespace rose {
namespace {

std::vector<int64_t> position_of(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> position(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    position[d] = flat % shape[d];
    flat /= shape[d];
  }
  return position;
}

}  // namespace

WeightCheck check_weights(const WeightSource& weights, int max_reported) {
  WeightCheck check;
  std::vector<float> values;
  for (const TensorSpec& spec : canonical_tensors(weights.config())) {
    values.resize(size_t(spec.numel()));
    weights.read_f32(spec.name, values);
    ++check.tensors;
    check.values += spec.numel();
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i])) continue;
      ++check.non_finite;
      if (int64_t(check.first.size()) < max_reported) {
        check.first.push_back(
            NonFiniteWeight{spec.name, position_of(int64_t(i), spec.shape), values[i]});
      }
    }
  }
  return check;
}

}  // namespace rose
