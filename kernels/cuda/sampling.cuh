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

// The thread blocks that share one row's maximum (1 when enough rows fill the GPU).
int sample_splits(int num_rows, int vocab);

}  // namespace rose
