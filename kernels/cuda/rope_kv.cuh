#pragma once
// RoPE (rotate-half form) and the qkv bias fused with the paged K/V cache write.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace rose {

struct RopeKvArgs {
  void* qkv = nullptr;  // (num_tokens, (num_heads + 2 num_kv_heads) head_dim), rows q|k|v;
                        // q is rotated (and biased) in place
  const void* qkv_bias = nullptr;         // (qkv_dim,) or nullptr
  void* k_cache = nullptr;                // (num_blocks, block_size, num_kv_heads, head_dim)
  void* v_cache = nullptr;                // (num_blocks, block_size, num_kv_heads, head_dim)
  const int32_t* positions = nullptr;     // (num_tokens,)
  const int32_t* slot_mapping = nullptr;  // (num_tokens,) -1: write nothing
  const float* inv_freq = nullptr;        // (head_dim / 2,) or nullptr: no rotation (GPT-2)
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kBF16;
};

void launch_rope_kv_write(const RopeKvArgs& args, cudaStream_t stream);

}  // namespace rose
