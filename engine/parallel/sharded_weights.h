#pragma once
// One tensor-parallel rank's view of a model's weights (shard_plan.h): the shard's config and
// its slices of the whole model's tensors, so a backend loads a shard as it loads a model.
#include <memory>

#include "engine/model/weights.h"

namespace rose {

// `whole` must outlive the returned source. Presets stay synthetic (the slice is generated on the
// device, with the whole tensor's values); checkpoints are read as fp32 and sliced on the host,
// so ggml blocks of a sharded matrix are not kept quantized (whole tensors keep theirs).
std::unique_ptr<WeightSource> shard_weights(const WeightSource& whole, int degree, int rank);

}  // namespace rose
