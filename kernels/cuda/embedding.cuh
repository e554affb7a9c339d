#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace rose {

// residual[i] = tok_emb[token_ids[i]] (+ pos_emb[positions[i]] when pos_emb is set, GPT-2).
// Preconditions: ids in [0, vocab), positions in [0, max_positions) (checked on the host).
void launch_embedding(float* residual,           // (num_tokens, hidden) fp32
                      const void* tok_emb,       // (vocab, hidden)
                      const void* pos_emb,       // (max_positions, hidden) or nullptr
                      const int32_t* token_ids,  // (num_tokens,)
                      const int32_t* positions,  // (num_tokens,)
                      int num_tokens, int hidden, DType dtype, cudaStream_t stream);

}  // namespace rose
