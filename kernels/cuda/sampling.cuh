#pragma once
// Sampling on the GPU by the rule of kernels/common/sampling_rule.h: greedy argmax, or temperature
// with top-k and top-p applied as value thresholds (each found by bisection over the row), then one
// ordered scan in ascending token id. Only the sampled ids leave the GPU.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/sampling_rule.h"  // SampleRowParams

namespace rose {

// sampled (num_rows,) from logits (num_rows, vocab) fp32.
void launch_sample(int32_t* sampled, const float* logits, const SampleRowParams* params,
                   int num_rows, int vocab, cudaStream_t stream);

}  // namespace rose
