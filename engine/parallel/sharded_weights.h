#pragma once
// One tensor-parallel rank's view of a model's weights (shard_plan.h): the shard's config and
// its slices of the whole model's tensors, so a backend loads a shard as it loads a model.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "engine/model/weights.h"
#include "engine/parallel/shard_plan.h"

namespace rose {

// `whole` must outlive the returned source. Presets stay synthetic (the slice is generated on the
// device, with the whole tensor's values); checkpoints are read as fp32 and sliced on the host;
// ggml blocks (a GGUF's, or --quantize's) stay blocks where every cut of a matrix falls between
// blocks (slice_stored_parts), else the slice is read as fp32 like a checkpoint's.
std::unique_ptr<WeightSource> shard_weights(const WeightSource& whole, int degree, int rank);

// The stored parts of `slice` cut from the whole tensor's parts (WeightSource::stored_parts, in
// row order), so that dequantizing them gives the slice's fp32 values. Row runs keep whole rows
// (spans into the same bytes); a column range keeps whole blocks of every row, copied into
// `storage`, which must outlive the result. nullopt when a cut falls inside a block, or inside a
// head of a part whose rows are un-permuted per head.
std::optional<std::vector<StoredPart>> slice_stored_parts(
    const std::vector<StoredPart>& whole, const TensorSlice& slice,
    std::deque<std::vector<uint8_t>>& storage);

}  // namespace rose
