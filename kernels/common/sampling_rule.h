#pragma once
// Sampling parameters and the counter-based random numbers behind them. A request's n-th sampled
// token uses uniform(seed, n): it does not depend on what else is in the batch, and the CPU and GPU
// backends draw the same number for the same token.
#include <cstdint>

#include "kernels/common/counter_rng.h"

namespace rose {

// The sampling rule, identical in both backends (chosen so a GPU can apply it with thresholds and
// one scan, no sort):
//   temperature == 0: argmax of the logits, the lowest id on ties.
//   otherwise: l = logits / temperature. If top_k > 0, keep the tokens with l >= the k-th largest l
//   (ties at the boundary are all kept). p = softmax over the kept tokens. If top_p < 1, find the
//   largest threshold t such that the sum of p_i over {p_i >= t} reaches top_p, and keep {p_i >=
//   t}. With u = sampling_uniform(seed, token_index), walk the kept tokens in ascending id order
//   and pick the first whose running sum of p exceeds u * (sum of kept p); the last kept token if
//   none does.
struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, lowest id on ties)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  uint64_t seed = 0;
};

// Per-row sampling parameters as the GPU kernel reads them (kernels/cuda/sampling.cuh), filled on
// the host. Here, not in the kernel's header, so the CUDA backend's metadata layout
// (engine/backend/cuda/workspace_plan.h) is plain C++ that CPU-only builds compile and test.
struct SampleRowParams {
  float temperature;
  int32_t top_k;
  float top_p;
  int32_t do_sample;  // 0: write -1
  uint64_t seed;
  uint64_t sample_index;
};
static_assert(sizeof(SampleRowParams) == 32, "the metadata layout packs 32-byte rows");

// The sampled id reported for a sequence whose logits held a NaN or an infinity: both backends'
// per-sequence flag, carried in the id so it costs no extra copy or synchronisation.
constexpr int32_t kSampledNonFinite = -2;

// Overlapped steps (engine/scheduler/engine.h): a step is planned before the ids of the step
// before it reach the host, so a token id in its plan may instead name "the id the previous step
// sampled for its row r": previous_step_token(r). Backends resolve it where the ids are (the CUDA
// embedding reads them on the device); a row that sampled nothing usable (kSampledNonFinite)
// resolves to id 0, and the engine drops what that row computes. Below every id and code above.
constexpr int32_t kPreviousStepTokenBase = -16;
ROSE_HOST_DEVICE constexpr int32_t previous_step_token(int row) {
  return kPreviousStepTokenBase - row;
}
ROSE_HOST_DEVICE constexpr bool is_previous_step_token(int32_t id) {
  return id <= kPreviousStepTokenBase;
}
ROSE_HOST_DEVICE constexpr int previous_step_row(int32_t id) { return kPreviousStepTokenBase - id; }

// The GPU sampler (kernels/cuda/sampling.cu) finds a row's maximum with up to kSampleMaxSplits
// thread blocks, each over a slice of the vocabulary, when few rows leave the GPU idle. Its scratch
// holds one record per row, at the same place whatever the launch's row count: an int32 arrival
// counter (zero between launches) and 4 bytes of padding, then one 8-byte (max, index) partial per
// split. Here so the CUDA backend's workspace plan stays plain C++.
constexpr int kSampleMaxSplits = 32;
constexpr int64_t kSampleRecordBytes = 8 + int64_t(kSampleMaxSplits) * 8;
constexpr int64_t sample_scratch_bytes(int64_t rows) { return rows * kSampleRecordBytes; }

// The uniform number that picks the `token_index`-th generated token of a request with `seed`.
ROSE_HOST_DEVICE float sampling_uniform(uint64_t seed, uint64_t token_index) {
  return uniform01(mix64(seed ^ 0x5A17ED5EEDull), token_index);
}

}  // namespace rose
