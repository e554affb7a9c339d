#pragma once
// Sampling on the GPU by the rule of kernels/common/sampling_rule.h: greedy argmax, or temperature with
// top-k and top-p applied as value thresholds (each found by bisection over the row), then one
// ordered scan in ascending token id. Only the sampled ids leave the GPU.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace rose {

// Per-row sampling parameters as the kernel reads them (32 bytes, filled on the host).
struct SampleRowParams {
  float temperature;
  int32_t top_k;
  float top_p;
  int32_t do_sample;  // 0: write -1
  uint64_t seed;
  uint64_t sample_index;
};

// sampled (num_rows,) from logits (num_rows, vocab) fp32.
void launch_sample(int32_t* sampled, const float* logits, const SampleRowParams* params,
                   int num_rows, int vocab, cudaStream_t stream);

}  // namespace rose
