#pragma once
// `info --check-weights`: finds NaN and infinite values in a model's canonical tensors, so a
// broken checkpoint is named before it silently produces garbage.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/weights.h"

namespace rose {

struct NonFiniteWeight {
  std::string tensor;             // canonical name
  std::vector<int64_t> position;  // its index along each dimension of the canonical shape
  float value = 0.0f;             // NaN, +inf or -inf
};

struct WeightCheck {
  int64_t tensors = 0;
  int64_t values = 0;
  int64_t non_finite = 0;              // how many values in all
  std::vector<NonFiniteWeight> first;  // the first `max_reported` of them, in tensor order
};

// Reads every canonical tensor of `weights` (one at a time) and counts its non-finite values.
WeightCheck check_weights(const WeightSource& weights, int max_reported);

}  // namespace rose
