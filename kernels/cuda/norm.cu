#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/norm_row.cuh"
#include "kernels/cuda/step_token.cuh"
#include "kernels/cuda/trace_probe.cuh"

namespace rose {
namespace {

// Fixed, never derived from num_rows: the block size sets each row's reduction tree, so it must not
// change with the batch (--batch-invariant; vLLM's RMSNorm lost invariance exactly so, #48271).
// The fused GEMV prologues reproduce this tree (norm_row.cuh).
constexpr int kThreads = kNormThreads;
// kPerThread: elements of the row each thread keeps in registers (with_norm_per_thread).
template <typename T, int kPerThread>
__global__ void __launch_bounds__(kThreads) add_norm_kernel(AddNormArgs args) {
  // The norm's weight and bias are constants of the run: load them before the PDL wait, so their
  // memory trip overlaps the previous kernel's end instead of following the row's reduction.
  trace_probe::Stamps stamps;  // probe builds only (trace_probe.cuh)
  stamps.start();
  float w[kPerThread], b[kPerThread];
  load_norm_params<T>(args, w, b);
  pdl_wait();
  pdl_launch_dependents();
  stamps.wait_done();
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  const int src = args.row_index ? args.row_index[row] : row;
  const int hidden = args.hidden;
  float* res = args.residual + int64_t(src) * hidden;
  const T* delta = static_cast<const T*>(args.delta);
  const T* delta_bias = static_cast<const T*>(args.delta_bias);
  if (delta) delta += int64_t(src) * hidden;
  // The step's token ids and positions are written before its first kernel, as launch_embedding
  // reads them; the sums below are that kernel's, in its order.
  const T* tok_row = nullptr;
  const T* pos_row = nullptr;
  if (args.tok_emb) {
    tok_row = static_cast<const T*>(args.tok_emb) +
              int64_t(step_token_id(args.token_ids, args.previous_ids, src)) * hidden;
    if (args.pos_emb) {
      pos_row = static_cast<const T*>(args.pos_emb) + int64_t(args.positions[src]) * hidden;
    }
  }

  float x[kPerThread];
  if (tok_row) {
    // The embedding (layer 0's norm, once a step): x = tok_emb (+ pos_emb) (+ delta ...).
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      x[j] = 0.0f;
      if (i < hidden) {
        float v = to_float(tok_row[i]);
        if (pos_row) v += to_float(pos_row[i]);
        if (delta) v += to_float(delta[i]);
        if (delta_bias) v += to_float(delta_bias[i]);
        x[j] = v;
      }
    }
  } else {
    // Every element's loads are issued before any value is used: the raw values, converted in the
    // next loop. Converting at the load, or storing the residual in the same loop (nothing tells
    // the compiler res and delta are apart), made each element wait for the previous element's
    // round trip to memory: 7.5 us a norm of llama-8b's 4,096 in a batch-1 graph on an H200.
    float r[kPerThread];
    T dv[kPerThread], bv[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < hidden) {
        r[j] = res[i];
        if (delta) dv[j] = delta[i];
        if (delta_bias) bv[j] = delta_bias[i];
      }
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kThreads;
      x[j] = 0.0f;
      if (i < hidden) {
        float v = r[j];
        if (delta) v += to_float(dv[j]);
        if (delta_bias) v += to_float(bv[j]);
        x[j] = v;
      }
    }
  }
  finish_add_norm_row<T>(args, x, res, w, b, static_cast<T*>(args.out) + int64_t(row) * hidden,
                         scratch);
  stamps.finish(-2, hidden);
}

}  // namespace

void launch_add_norm(const AddNormArgs& args, cudaStream_t stream) {
  if (args.num_rows <= 0) return;
  if (args.hidden > kAddNormMaxHidden) {
    cuda_fail("hidden size above 8192 is not supported by the norm kernel", "launch_add_norm",
              __FILE__, __LINE__);
  }
  dispatch_dtype(args.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_norm_per_thread(args.hidden, [&](auto per_thread) {
      launch_kernel(add_norm_kernel<T, decltype(per_thread)::value>, args.num_rows, kThreads, 0,
                    stream, args);
    });
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

bool trace_probe::dump_norm(std::FILE* f, std::string* error) {
  return trace_probe::write_ring(f, "norm", error);
}

}  // namespace rose
