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
  // (angle_table_positions, head_dim / 2, 2): cos, sin of position x inv_freq[i] for every
  // position below angle_table_positions, as sincosf gives them (launch_fill_rope_angles), or
  // nullptr. The fused cluster attention reads its angles there instead of computing them.
  const float* angle_table = nullptr;
  int angle_table_positions = 0;
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kBF16;
};

void launch_rope_kv_write(const RopeKvArgs& args, cudaStream_t stream);

// table (positions, head_dim / 2, 2) = cos, sin of float(p) * inv_freq[i], with the same sincosf
// and operands as the kernels that compute them in place, so reading them gives the same bits.
void launch_fill_rope_angles(const float* inv_freq, int head_dim, int positions, float* table,
                             cudaStream_t stream);

}  // namespace rose
