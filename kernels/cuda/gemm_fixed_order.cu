#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm_fixed_order.cuh"

namespace rose {
namespace {

constexpr int kTile = 16;  // a (kTile x kTile) block of outputs per thread block, one per thread

// x (n, in), w (out, in), y (n, out). Thread (ty, tx) owns y[row0 + ty][col0 + tx]; the k loop
// walks tiles in increasing k and each tile's elements in increasing k, so the chain is fixed.
template <typename T, typename Y>
__global__ void gemm_fixed_order_kernel(const T* x, const T* w, Y* y, int n, int in, int out) {
  __shared__ float xs[kTile][kTile + 1];  // (rows, k)
  __shared__ float ws[kTile][kTile + 1];  // (cols, k)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  const int w_row = blockIdx.x * kTile + ty;  // the weight row this thread loads
  float acc = 0.0f;
  for (int k0 = 0; k0 < in; k0 += kTile) {
    const int k = k0 + tx;
    xs[ty][tx] = row < n && k < in ? to_float(x[int64_t(row) * in + k]) : 0.0f;
    ws[ty][tx] = w_row < out && k < in ? to_float(w[int64_t(w_row) * in + k]) : 0.0f;
    __syncthreads();
    const int k_end = min(kTile, in - k0);
    for (int kk = 0; kk < k_end; ++kk) acc = fmaf(xs[ty][kk], ws[tx][kk], acc);
    __syncthreads();
  }
  if (row >= n || col >= out) return;
  if constexpr (std::is_same_v<Y, float>) {
    y[int64_t(row) * out + col] = acc;
  } else {
    y[int64_t(row) * out + col] = from_float<Y>(acc);
  }
}

template <typename T>
void launch_typed(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                  cudaStream_t stream) {
  const dim3 block(kTile, kTile);
  const dim3 grid((out + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(w);
  if (f32_out) {
    gemm_fixed_order_kernel<T, float>
        <<<grid, block, 0, stream>>>(xt, wt, static_cast<float*>(y), n, in, out);
  } else {
    gemm_fixed_order_kernel<T, T>
        <<<grid, block, 0, stream>>>(xt, wt, static_cast<T*>(y), n, in, out);
  }
  ROSE_CUDA_CHECK_LAUNCH();
}

// a, b (words,); one atomicAdd per block.
__global__ void count_mismatches_kernel(const uint16_t* a, const uint16_t* b, int64_t words,
                                        unsigned long long* count) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words;
       i += int64_t(gridDim.x) * blockDim.x) {
    local += a[i] != b[i];
  }
  __shared__ unsigned long long block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  if (local) atomicAdd(&block_sum, local);
  __syncthreads();
  if (threadIdx.x == 0 && block_sum) atomicAdd(count, block_sum);
}

}  // namespace

void launch_count_mismatches(const uint16_t* a, const uint16_t* b, int64_t words,
                             unsigned long long* count, cudaStream_t stream) {
  const int64_t blocks = std::min<int64_t>((words + 255) / 256, 1024);
  if (blocks == 0) return;
  count_mismatches_kernel<<<int(blocks), 256, 0, stream>>>(a, b, words, count);
  ROSE_CUDA_CHECK_LAUNCH();
}

void launch_gemm_fixed_order(const void* x, const void* w, void* y, int n, int in, int out,
                             bool f32_out, DType dtype, cudaStream_t stream) {
  if (n <= 0 || out <= 0) return;
  if (dtype == DType::kBF16) {
    launch_typed<__nv_bfloat16>(x, w, y, n, in, out, f32_out, stream);
  } else {
    launch_typed<__half>(x, w, y, n, in, out, f32_out, stream);
  }
}

}  // namespace rose
