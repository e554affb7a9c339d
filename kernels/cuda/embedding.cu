#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/step_token.cuh"

namespace rose {
namespace {

template <typename T>
__global__ void embedding_kernel(float* residual, const T* tok_emb, const T* pos_emb,
                                 const int32_t* token_ids, const int32_t* previous_ids,
                                 const int32_t* positions, int hidden) {
  pdl_wait();
  pdl_launch_dependents();
  const int token = blockIdx.x;
  const T* tok_row = tok_emb + int64_t(step_token_id(token_ids, previous_ids, token)) * hidden;
  const T* pos_row = pos_emb ? pos_emb + int64_t(positions[token]) * hidden : nullptr;
  float* out = residual + int64_t(token) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float x = to_float(tok_row[i]);
    if (pos_row) x += to_float(pos_row[i]);
    out[i] = x;
  }
}

}  // namespace

void launch_embedding(float* residual, const void* tok_emb, const void* pos_emb,
                      const int32_t* token_ids, const int32_t* previous_ids,
                      const int32_t* positions, int num_tokens, int hidden, DType dtype,
                      cudaStream_t stream) {
  if (num_tokens <= 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(embedding_kernel<T>, num_tokens, 256, 0, stream, residual,
                  static_cast<const T*>(tok_emb), static_cast<const T*>(pos_emb), token_ids,
                  previous_ids, positions, hidden);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

}  // namespace rose
