#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rope_kv.cuh"

namespace rose {
namespace {

// At decode (few blocks) enough threads that a token's (heads + kv_heads) * head_dim / 2 pairs take
// one or two rounds, each a dependent global-memory trip; prefill has a block per token anyway.
// Varying with the batch is harmless to --batch-invariant: every element is one thread's pointwise
// work (no reduction), so only which thread computes it changes, never how.
int threads_for(int num_tokens) { return num_tokens <= 1024 ? 512 : 128; }

// Rounds of a thread's pairs whose rotation is computed before the PDL wait (decode: 2 to 5).
constexpr int kAngleRounds = 4;

// One block per token. Work items: q pairs, k pairs (rotated together: element j and j + half),
// then v elements. The angle pos * inv_freq is computed in fp32 with the accurate sincosf, so long
// positions keep their precision.

template <typename T>
__global__ void rope_kv_kernel(RopeKvArgs args) {
  const int token = blockIdx.x;
  const int head_dim = args.head_dim, half = head_dim / 2;
  const int q_dim = args.num_heads * head_dim, kv_dim = args.num_kv_heads * head_dim;
  T* row = static_cast<T*>(args.qkv) + int64_t(token) * (q_dim + 2 * kv_dim);
  const T* bias = static_cast<const T*>(args.qkv_bias);
  const int num_pairs = (args.num_heads + args.num_kv_heads) * half;
  // The position and slot (this step's metadata, copied in before its first kernel) and the
  // rotation angles do not depend on the previous kernel: loaded and computed before the PDL
  // wait, so the sincos and their memory trips overlap its end.
  const int64_t slot = args.slot_mapping[token];
  const float pos = static_cast<float>(args.positions[token]);
  float sines[kAngleRounds], cosines[kAngleRounds];
#pragma unroll
  for (int r = 0; r < kAngleRounds; ++r) {
    const int p = threadIdx.x + r * blockDim.x;
    if (args.inv_freq && p < num_pairs)
      sincosf(pos * args.inv_freq[p % half], &sines[r], &cosines[r]);
  }
  pdl_wait();
  pdl_launch_dependents();
  T* k_dst = slot >= 0 ? static_cast<T*>(args.k_cache) + slot * kv_dim : nullptr;
  T* v_dst = slot >= 0 ? static_cast<T*>(args.v_cache) + slot * kv_dim : nullptr;

  for (int p = threadIdx.x, round = 0; p < num_pairs; p += blockDim.x, ++round) {
    const int head = p / half, j = p % half;
    const int col = head * head_dim + j;  // in q|k, k heads follow q heads
    float a = to_float(row[col]), b = to_float(row[col + half]);
    if (bias) {
      a += to_float(bias[col]);
      b += to_float(bias[col + half]);
    }
    if (args.inv_freq) {
      float s = 0.0f, c = 1.0f;
      if (round < kAngleRounds) {
#pragma unroll
        for (int r = 0; r < kAngleRounds; ++r) {
          if (r == round) {
            s = sines[r];
            c = cosines[r];
          }
        }
      } else {
        sincosf(pos * args.inv_freq[j], &s, &c);
      }
      const float ra = a * c - b * s, rb = b * c + a * s;
      a = ra;
      b = rb;
    }
    if (head < args.num_heads) {
      row[col] = from_float<T>(a);
      row[col + half] = from_float<T>(b);
    } else if (k_dst) {
      const int kcol = col - q_dim;
      k_dst[kcol] = from_float<T>(a);
      k_dst[kcol + half] = from_float<T>(b);
    }
  }
  if (v_dst) {
    const T* v = row + q_dim + kv_dim;
    for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
      float x = to_float(v[i]);
      if (bias) x += to_float(bias[q_dim + kv_dim + i]);
      v_dst[i] = from_float<T>(x);
    }
  }
}

// One thread per (position, frequency) pair.
__global__ void fill_rope_angles_kernel(const float* inv_freq, int half, int positions,
                                        float* table) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(positions) * half) return;
  const float pos = static_cast<float>(i / half);
  float s, c;
  sincosf(pos * inv_freq[i % half], &s, &c);
  table[2 * i] = c;
  table[2 * i + 1] = s;
}

}  // namespace

void launch_fill_rope_angles(const float* inv_freq, int head_dim, int positions, float* table,
                             cudaStream_t stream) {
  const int64_t pairs = int64_t(positions) * (head_dim / 2);
  if (pairs <= 0) return;
  constexpr int kThreads = 256;
  launch_kernel(fill_rope_angles_kernel, dim3(unsigned((pairs + kThreads - 1) / kThreads)),
                kThreads, 0, stream, inv_freq, head_dim / 2, positions, table);
  ROSE_CUDA_CHECK_LAUNCH();
}

void launch_rope_kv_write(const RopeKvArgs& args, cudaStream_t stream) {
  if (args.num_tokens <= 0) return;
  dispatch_dtype(args.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(rope_kv_kernel<T>, args.num_tokens, threads_for(args.num_tokens), 0, stream,
                  args);
  });
  ROSE_CUDA_CHECK_LAUNCH();
}

}  // namespace rose
