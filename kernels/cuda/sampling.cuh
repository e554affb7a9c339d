#pragma once
// Sampling on the GPU by the rule of kernels/common/sampling_rule.h: greedy argmax, or temperature
// with top-k and top-p applied as value thresholds (each found by bisection over the row), then one
// ordered scan in ascending token id. Only the sampled ids leave the GPU.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/sampling_rule.h"  // SampleRowParams

namespace rose {

// sampled (num_rows,) from logits (num_rows, vocab) fp32. scratch: sample_scratch_bytes(num_rows)
// bytes (sampling_rule.h), zeroed once before the first launch; each launch leaves it zeroed for
// the next. `sampled` may be mapped host memory: the ids then need no copy.
void launch_sample(int32_t* sampled, const float* logits, const SampleRowParams* params,
                   int num_rows, int vocab, void* scratch, cudaStream_t stream);

// Where a launch writes row r's id: ids[*slot_offset + r] (slot_offset null: ids[r]), so that
// two steps in flight write different halves of a host buffer; and, when set, device_ids[r] too,
// where the next step's embedding reads its previous-step tokens (sampling_rule.h).
struct SampleTargets {
  int32_t* ids = nullptr;                // (slots * num_rows) may be mapped host memory
  const int32_t* slot_offset = nullptr;  // (1,) device, or null
  int32_t* device_ids = nullptr;         // (num_rows,) device, or null
};
void launch_sample(const SampleTargets& targets, const float* logits, const SampleRowParams* params,
                   int num_rows, int vocab, void* scratch, cudaStream_t stream);

// The thread blocks that share one row's maximum (1 when enough rows fill the GPU).
int sample_splits(int num_rows, int vocab);

}  // namespace rose
