#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace rose {

// residual[i] = tok_emb[id i] (+ pos_emb[positions[i]] when pos_emb is set, GPT-2), id i as
// step_token_id (step_token.cuh) reads it. Preconditions: ids in [0, vocab), previous-step tokens
// naming rows the previous step sampled, positions in [0, max_positions) (checked on the host).
void launch_embedding(float* residual,              // (num_tokens, hidden) fp32
                      const void* tok_emb,          // (vocab, hidden)
                      const void* pos_emb,          // (max_positions, hidden) or nullptr
                      const int32_t* token_ids,     // (num_tokens,)
                      const int32_t* previous_ids,  // (previous step's rows,) sampled ids
                      const int32_t* positions,     // (num_tokens,)
                      int num_tokens, int hidden, DType dtype, cudaStream_t stream);

}  // namespace rose
