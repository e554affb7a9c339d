// One-shot all-reduce through peer memory (all_reduce_peer.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/all_reduce_peer.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.cuh"

namespace rose {
namespace {

// A peer that never arrives (its rank failed mid-step) would otherwise hang the process: after
// this long the kernel traps, and the failure surfaces at the step's sync as a CUDA error.
constexpr uint64_t kPeerWaitLimitNs = 30ull * 1000 * 1000 * 1000;

__device__ __forceinline__ void store_release_system(uint32_t* address, uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_system(const uint32_t* address) {
  uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 16 bytes of T (fp32, bf16 or fp16) seen as kCount lanes, summed in fp32 lane by lane.
template <typename T>
struct Lanes {
  static constexpr int kCount = 16 / int(sizeof(T));
  __device__ static float get(const uint4& v, int i) {
    return to_float(reinterpret_cast<const T*>(&v)[i]);
  }
  __device__ static void set(uint4& v, int i, float x) {
    reinterpret_cast<T*>(&v)[i] = from_float<T>(x);
  }
};

// Block b's part of the exchange: announce epoch to every peer, wait for every peer's announcement.
__device__ void exchange_flags(const PeerAllReduceArgs& a, uint32_t epoch) {
  const int b = blockIdx.x;
  const int peer = threadIdx.x;
  if (peer < a.size && peer != a.rank) {
    store_release_system(&a.flags[peer][b * kPeerAllReduceMaxRanks + a.rank], epoch);
    const uint32_t* mine = &a.flags[a.rank][b * kPeerAllReduceMaxRanks + peer];
    const uint64_t start = global_timer_ns();
    // >= : a fast peer may already have announced epoch + 1 (it cannot get further ahead: that
    // needs this rank's epoch + 1). Wrap-around after 2^32 calls is not handled.
    while (load_acquire_system(mine) < epoch) {
      if (global_timer_ns() - start > kPeerWaitLimitNs) __trap();
    }
  }
  __syncthreads();
}

// grid (kPeerAllReduceBlocks,), block (kPeerAllReduceThreads,). buffer (vectors,) of 16 bytes.
template <typename T>
__global__ void peer_all_reduce_kernel(PeerAllReduceArgs a, uint4* buffer, int64_t vectors) {
  pdl_wait();
  __shared__ uint32_t epoch_shared;
  if (threadIdx.x == 0) {
    epoch_shared = a.epochs[blockIdx.x] + 1;
    a.epochs[blockIdx.x] = epoch_shared;
  }
  __syncthreads();
  const uint32_t epoch = epoch_shared;
  const int64_t slot_offset = int64_t(epoch & 1) * a.slot_bytes;
  const int64_t stride = int64_t(kPeerAllReduceBlocks) * kPeerAllReduceThreads;
  const int64_t first = int64_t(blockIdx.x) * kPeerAllReduceThreads + threadIdx.x;
  auto slot = [&](int r) {
    return reinterpret_cast<uint4*>(static_cast<char*>(a.stages[r]) + slot_offset);
  };
  uint4* own = slot(a.rank);
  for (int64_t v = first; v < vectors; v += stride) own[v] = buffer[v];
  __syncthreads();  // the block's stores, then the release by its flag-writing threads
  exchange_flags(a, epoch);
  pdl_launch_dependents();
  for (int64_t v = first; v < vectors; v += stride) {
    float sum[Lanes<T>::kCount] = {};
    for (int r = 0; r < a.size; ++r) {
      const uint4 x = __ldcg(slot(r) + v);  // L2, not L1: another GPU wrote it this epoch
#pragma unroll
      for (int i = 0; i < Lanes<T>::kCount; ++i) sum[i] += Lanes<T>::get(x, i);
    }
    uint4 out;
#pragma unroll
    for (int i = 0; i < Lanes<T>::kCount; ++i) Lanes<T>::set(out, i, sum[i]);
    buffer[v] = out;
  }
}

}  // namespace

void launch_peer_all_reduce(const PeerAllReduceArgs& args, void* buffer, int64_t count,
                            PeerReduceType type, cudaStream_t stream) {
  const int64_t element_bytes = type == PeerReduceType::kF32 ? 4 : 2;
  const int64_t vectors = count * element_bytes / 16;
  auto* data = static_cast<uint4*>(buffer);
  const dim3 grid(kPeerAllReduceBlocks), block(kPeerAllReduceThreads);
  switch (type) {
    case PeerReduceType::kF32:
      launch_kernel(peer_all_reduce_kernel<float>, grid, block, 0, stream, args, data, vectors);
      break;
    case PeerReduceType::kBF16:
      launch_kernel(peer_all_reduce_kernel<__nv_bfloat16>, grid, block, 0, stream, args, data,
                    vectors);
      break;
    case PeerReduceType::kF16:
      launch_kernel(peer_all_reduce_kernel<__half>, grid, block, 0, stream, args, data, vectors);
      break;
  }
}

}  // namespace rose
