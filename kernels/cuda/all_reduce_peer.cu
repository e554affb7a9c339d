// One-shot all-reduce through peer memory (all_reduce_peer.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/all_reduce_peer.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dtype_dispatch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm_row.cuh"

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

// The low-latency exchange's loads: a 64-bit load sees a peer's 64-bit store whole or not at all
// (store_relaxed_system_u64, peer_push.cuh).
__device__ __forceinline__ uint64_t load_relaxed_system_u64(const uint64_t* address) {
  uint64_t value;
  asm volatile("ld.relaxed.sys.global.b64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
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

__device__ __forceinline__ void store_relaxed_system(uint32_t* address, uint32_t value) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
}

// Block b's part of the exchange: announce epoch to every peer, wait for every peer's announcement.
__device__ void exchange_flags(const PeerAllReduceArgs& a, uint32_t epoch) {
  const int b = blockIdx.x;
  const int peer = threadIdx.x;
  if (a.probe & 4) return;
  if (peer < a.size && peer != a.rank) {
    uint32_t* flag = &a.flags[peer][b * kPeerAllReduceMaxRanks + a.rank];
    if (a.probe & 2) {
      store_relaxed_system(flag, epoch);
    } else {
      store_release_system(flag, epoch);
    }
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

// This block's epoch for this call: its last one + 1, kept in a.epochs (every rank's blocks count
// their calls alike). Every thread of the block must call it, once per call.
__device__ uint32_t next_epoch(const PeerAllReduceArgs& a) {
  __shared__ uint32_t epoch_shared;
  if (threadIdx.x == 0) {
    epoch_shared = a.epochs[blockIdx.x] + 1;
    a.epochs[blockIdx.x] = epoch_shared;
  }
  __syncthreads();
  return epoch_shared;
}

// grid (kPeerAllReduceBlocks,), block (kPeerAllReduceThreads,). buffer (vectors,) of 16 bytes.
template <typename T>
__global__ void peer_all_reduce_kernel(PeerAllReduceArgs a, uint4* buffer, int64_t vectors) {
  pdl_wait();
  const uint32_t epoch = next_epoch(a);
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

// An element of T (bf16 or fp16: dispatch_dtype's types) read past L1 (another GPU wrote it this
// epoch; L1 may hold epoch - 2's value), as its raw bits: callers convert later, so a thread's
// loads are all in flight before the first value is used.
template <typename T>
__device__ __forceinline__ unsigned short load_bits_cg(const T* p) {
  static_assert(sizeof(T) == 2);
  return __ldcg(reinterpret_cast<const unsigned short*>(p));
}

template <typename T>
__device__ __forceinline__ float bits_to_float(unsigned short bits) {
  T value;
  memcpy(&value, &bits, 2);
  return to_float(value);
}

// What a fused row needs from this GPU alone, in a thread's registers: its elements
// threadIdx.x + j * kNormThreads (j < kPerThread) of the residual, of the sub-layer output's bias,
// and of this rank's partial (raw bits: converted where used, so no load waits for the one before).
template <typename T, int kPerThread>
struct FusedRowInputs {
  float x[kPerThread];
  T bias_value[kPerThread];
  unsigned short own[kPerThread];

  // source: the row of residual and delta this output row reads (norm.row_index's, or its own).
  __device__ __forceinline__ void load_residual(const AddNormArgs& norm, int source) {
    const float* res = norm.residual + int64_t(source) * norm.hidden;
    const T* delta_bias = static_cast<const T*>(norm.delta_bias);
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kNormThreads;
      x[j] = 0.0f;
      if (i < norm.hidden) {
        x[j] = res[i];
        if (delta_bias) bias_value[j] = delta_bias[i];
      }
    }
  }
  // Past hidden the bits are 0 (the low-latency exchange sends them).
  __device__ __forceinline__ void load_partial(const AddNormArgs& norm, int source) {
    const T* delta = static_cast<const T*>(norm.delta) + int64_t(source) * norm.hidden;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kNormThreads;
      own[j] = i < norm.hidden ? load_bits_cg(delta + i) : 0;
    }
  }
  // reduced: the ranks' partials summed in rank order in fp32. Rounds the sum to T, adds it (and
  // the bias) to the residual and finishes the row as add_norm_kernel does into out_row (hidden,).
  __device__ __forceinline__ void finish(const AddNormArgs& norm,
                                         const float (&reduced)[kPerThread], int source,
                                         const float (&w)[kPerThread], const float (&b)[kPerThread],
                                         T* out_row, float* scratch) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = threadIdx.x + j * kNormThreads;
      if (i < norm.hidden) {
        x[j] += to_float(from_float<T>(reduced[j]));
        if (norm.delta_bias) x[j] += to_float(bias_value[j]);
      }
    }
    float* res = norm.residual + int64_t(source) * norm.hidden;
    finish_add_norm_row<T>(norm, x, res, w, b, out_row, scratch);
  }
};

// grid (min(num_rows, kPeerAllReduceBlocks),), block (kNormThreads,): block b handles rows b,
// b + kPeerAllReduceBlocks, ... The sum and add-norm are add_norm_kernel's (norm_row.cuh) with
// delta's element replaced by the rounded rank-order sum peer_all_reduce_kernel computes.
template <typename T, int kPerThread>
__global__ void __launch_bounds__(kNormThreads)
    peer_all_reduce_add_norm_kernel(PeerAllReduceArgs a, AddNormArgs norm) {
  float w[kPerThread], b[kPerThread];
  load_norm_params<T>(norm, w, b);
  __shared__ float scratch[32];
  const int hidden = norm.hidden;
  const int64_t region_bytes = a.slot_bytes / a.size / 16 * 16;
  uint32_t epoch = 0;
  // (num_rows, hidden) of T: rank `source`'s rows as held in rank `holder`'s staging this epoch.
  auto region = [&](int holder, int source) {
    return reinterpret_cast<T*>(static_cast<char*>(a.stages[holder]) +
                                int64_t(epoch & 1) * a.slot_bytes + source * region_bytes);
  };
  const T* delta = static_cast<const T*>(norm.delta);  // (rows_in, hidden) this rank's partial
  // Output row `row` reads source row source_row(row) (the final norm gathers rows); the staging
  // regions are indexed by output row, alike on every rank.
  auto source_row = [&](int row) { return norm.row_index ? norm.row_index[row] : row; };
  // The block's first row's inputs are loaded before the flags are exchanged, in flight while they
  // cross (kEarly); a further row's (past 32 rows) after the row before it. At 32 elements a
  // thread (hidden > 4,096) holding the partial too would spill: there the row's loads all wait
  // for the exchange, and the partial is read in the sum.
  constexpr bool kEarly = kPerThread <= 16;
  FusedRowInputs<T, kPerThread> in;
  auto load_own = [&](int row) {
    in.load_residual(norm, source_row(row));
    if constexpr (kEarly) in.load_partial(norm, source_row(row));
  };
  // The epoch and the block's first residual row are read before the PDL wait, off the path from
  // the partial's arrival to the flags (-54 us a llama-8b TP=2 batch-1 step on two H200s,
  // results/2026-11-29-tp-prefetch). Both were written two or more kernels back: the previous
  // call of this group and the add-norm or embedding before it, with at least the row-parallel
  // product that feeds this call in between, so they completed before the kernel just before this
  // one passed its own wait and could launch this one. Not for the final norm (row_index, which
  // the host wrote for this step; a read of it would be the first).
  const bool before_wait = !(a.probe & 8) && !norm.row_index;
  if (before_wait) {
    epoch = next_epoch(a);
    if (kEarly) in.load_residual(norm, blockIdx.x);
  }
  pdl_wait();
  if (!before_wait) epoch = next_epoch(a);
  const int vectors = hidden * int(sizeof(T)) / 16;
  for (int row = blockIdx.x; row < norm.num_rows && !(a.probe & 1); row += kPeerAllReduceBlocks) {
    const uint4* mine = reinterpret_cast<const uint4*>(delta + int64_t(source_row(row)) * hidden);
    for (int v = threadIdx.x; v < vectors; v += kNormThreads) {
      const uint4 x = mine[v];
      for (int peer = 0; peer < a.size; ++peer) {
        if (peer == a.rank) continue;
        reinterpret_cast<uint4*>(region(peer, a.rank) + int64_t(row) * hidden)[v] = x;
      }
    }
  }
  if (kEarly) {  // the grid has at most num_rows blocks
    if (before_wait) {
      in.load_partial(norm, source_row(blockIdx.x));
    } else {
      load_own(blockIdx.x);
    }
  }
  __syncthreads();  // the block's stores, then the release by its flag-writing threads
  exchange_flags(a, epoch);
  pdl_launch_dependents();
  for (int row = blockIdx.x; row < norm.num_rows; row += kPeerAllReduceBlocks) {
    if (!kEarly || row != int(blockIdx.x)) load_own(row);
    const int64_t offset = int64_t(row) * hidden;
    // The ranks' partials summed in rank order, each peer's kPerThread loads issued together (a
    // loop over ranks inside the element loop would wait for each load in turn). The stores come
    // last (finish_add_norm_row), as in add_norm_kernel: a load used at once, or behind a store,
    // costs a memory round trip per element.
    float reduced[kPerThread] = {};
    for (int source = 0; source < a.size; ++source) {
      unsigned short bits[kPerThread];
      if (kEarly && source == a.rank) {
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) bits[j] = in.own[j];
      } else {
        const T* partial = source == a.rank ? delta + int64_t(source_row(row)) * hidden
                                            : region(a.rank, source) + offset;
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
          const int i = threadIdx.x + j * kNormThreads;
          if (i < hidden) bits[j] = load_bits_cg(partial + i);
        }
      }
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int i = threadIdx.x + j * kNormThreads;
        if (i < hidden) reduced[j] += bits_to_float<T>(bits[j]);
      }
    }
    in.finish(norm, reduced, source_row(row), w, b, static_cast<T*>(norm.out) + offset, scratch);
  }
}

// The low-latency staging's layout: a slot holds one region per source rank, and a region one
// part per block (block b owns part b whatever the hidden size: words are valid by their block's
// epoch, so no other block, whose epochs run apart, may ever write them). Bytes, multiples of 8.
__host__ __device__ inline int64_t low_latency_region_bytes(const PeerAllReduceArgs& a) {
  return a.low_latency_slot_bytes / a.size / 8 * 8;
}
__host__ __device__ inline int64_t low_latency_block_bytes(const PeerAllReduceArgs& a) {
  return low_latency_region_bytes(a) / 8 / kPeerAllReduceBlocks * 8;
}

// The low-latency exchange's word: two elements' raw bits and the epoch that makes them valid.
__device__ __forceinline__ uint64_t pack_word(unsigned short first, unsigned short second,
                                              uint32_t epoch) {
  return uint64_t(first) | uint64_t(second) << 16 | uint64_t(epoch) << 32;
}

// grid (num_rows,) with num_rows <= kPeerAllReduceBlocks, block (kNormThreads,): block b handles
// row b. launch_peer_all_reduce_add_norm's result by the low-latency exchange
// (PeerAllReduceArgs::low_latency_rows): thread t stores its partial's elements j and j + 1 of
// its row as one 8-byte word with the epoch into every peer's low-latency staging, and reads each
// peer's words for the same elements from its own until all carry the epoch. A 64-bit store is
// seen whole or not at all, so each word announces itself: no fence, no flag, no barrier between
// the push and the wait. kPushed: the GEMV that wrote delta already stored every element as a word
// of its own into the peers (peer_push.cuh: element i is word i of the row's part), so this kernel
// only reads.
template <typename T, int kPerThread, bool kPushed>
__global__ void __launch_bounds__(kNormThreads)
    peer_all_reduce_add_norm_low_latency_kernel(PeerAllReduceArgs a, AddNormArgs norm) {
  static_assert(kPerThread % 2 == 0 && kPerThread <= 16);
  // A thread's words of its row: k * kNormThreads + t, two elements each; pushed, one each.
  constexpr int kWords = kPushed ? kPerThread : kPerThread / 2;
  float w[kPerThread], b[kPerThread];
  load_norm_params<T>(norm, w, b);
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  int source = row;  // the row of residual and delta it reads: row_index's, read after the wait
  FusedRowInputs<T, kPerThread> in;
  uint32_t epoch = 0;
  // Before the PDL wait as in peer_all_reduce_add_norm_kernel (its comment says why).
  const bool before_wait = !norm.row_index;
  if (before_wait) {
    epoch = next_epoch(a);
    in.load_residual(norm, row);
  }
  if (a.probe & 32) pdl_launch_dependents();
  pdl_wait();
  if (!before_wait) {
    source = norm.row_index[row];
    epoch = next_epoch(a);
    in.load_residual(norm, source);
  }
  in.load_partial(norm, source);
  const int64_t region_words = low_latency_region_bytes(a) / 8;
  const int64_t block_words = low_latency_block_bytes(a) / 8;
  // This thread's first word of rank `source_rank`'s row in rank `holder`'s staging this epoch.
  auto region = [&](int holder, int source_rank) {
    return static_cast<uint64_t*>(a.low_latency_stages[holder]) +
           int64_t(epoch & 1) * (a.low_latency_slot_bytes / 8) + source_rank * region_words +
           row * block_words + threadIdx.x;
  };
  for (int peer = 0; peer < a.size && !kPushed; ++peer) {
    if (peer == a.rank) continue;
    uint64_t* words = region(peer, a.rank);
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      store_relaxed_system_u64(words + k * kNormThreads,
                               pack_word(in.own[2 * k], in.own[2 * k + 1], epoch));
    }
  }
  // The next kernel (a GEMV, which loads weights before its own wait) launches while this one
  // waits for the peers: -18 to -21 us a llama-8b TP=2 batch-1 step on two H200s against
  // launching after the wait (results/2026-11-29-tp-low-latency). With the flag exchange it
  // gained nothing.
  if (!(a.probe & 16)) pdl_launch_dependents();
  float reduced[kPerThread] = {};
  for (int rank = 0; rank < a.size; ++rank) {  // rank order, as the other kernels sum
    unsigned short bits[kPerThread];
    if (rank == a.rank) {
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) bits[j] = in.own[j];
    } else {
      const uint64_t* words = region(a.rank, rank);
      uint64_t got[kWords];
      const uint64_t start = global_timer_ns();
      // Pushed words exist only for the row's elements (a pair's word always does).
      auto present = [&](int k) {
        return !kPushed || int(threadIdx.x) + k * kNormThreads < norm.hidden;
      };
      for (;;) {  // every word's load in flight together, then all checked
#pragma unroll
        for (int k = 0; k < kWords; ++k) {
          got[k] = present(k) ? load_relaxed_system_u64(words + k * kNormThreads)
                              : uint64_t(epoch) << 32;
        }
        bool ready = true;
#pragma unroll
        for (int k = 0; k < kWords; ++k) ready &= uint32_t(got[k] >> 32) == epoch;
        if (ready) break;
        if (global_timer_ns() - start > kPeerWaitLimitNs) __trap();
      }
#pragma unroll
      for (int k = 0; k < kWords; ++k) {
        if constexpr (kPushed) {
          bits[k] = static_cast<unsigned short>(got[k]);
        } else {
          bits[2 * k] = static_cast<unsigned short>(got[k]);
          bits[2 * k + 1] = static_cast<unsigned short>(got[k] >> 16);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) reduced[j] += bits_to_float<T>(bits[j]);
  }
  if (a.probe & 16) pdl_launch_dependents();
  in.finish(norm, reduced, source, w, b, static_cast<T*>(norm.out) + int64_t(row) * norm.hidden,
            scratch);
}

// x's lanes into recv: vector v of rank `source`'s chunk holds its floats v * 4 .. v * 4 + 3, the
// source's (rows, count[source]) columns row-major; float e is recv[e / count, begin + e % count].
// Floats past rows * count are the chunk's padding.
__device__ __forceinline__ void place_columns(const uint4& x, int64_t v, int source, float* recv,
                                              const PeerColumnGather& g) {
  const float lanes[4] = {__uint_as_float(x.x), __uint_as_float(x.y), __uint_as_float(x.z),
                          __uint_as_float(x.w)};
  // Selected with constant indices: g.count[source] and g.begin[source] made ptxas copy the
  // kernel parameter into every thread's local memory (30 local loads and stores in the SASS).
  int count = 0, begin = 0;
#pragma unroll
  for (int r = 0; r < kPeerAllReduceMaxRanks; ++r) {
    if (r == source) {
      count = g.count[r];
      begin = g.begin[r];
    }
  }
  if (count <= 0) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t e = v * 4 + i;
    const int64_t row = e / count;
    if (row < g.rows) recv[row * g.recv_stride + begin + (e - row * count)] = lanes[i];
  }
}

// grid (kPeerAllReduceBlocks,), block (kPeerAllReduceThreads,). send (chunk / 4,) vectors of
// fp32, recv (rows, recv_stride) fp32 (launch_peer_all_gather_columns).
__global__ void peer_all_gather_columns_kernel(PeerAllReduceArgs a, const uint4* send, float* recv,
                                               PeerColumnGather g) {
  pdl_wait();
  const uint32_t epoch = next_epoch(a);
  const int64_t region_bytes = a.slot_bytes / a.size / 16 * 16;
  // (vectors,) of rank `source`'s shard as held in rank `holder`'s staging this epoch.
  auto region = [&](int holder, int source) {
    return reinterpret_cast<uint4*>(static_cast<char*>(a.stages[holder]) +
                                    int64_t(epoch & 1) * a.slot_bytes + source * region_bytes);
  };
  const int64_t vectors = g.chunk / 4;
  const int64_t stride = int64_t(kPeerAllReduceBlocks) * kPeerAllReduceThreads;
  const int64_t first = int64_t(blockIdx.x) * kPeerAllReduceThreads + threadIdx.x;
  for (int64_t v = first; v < vectors; v += stride) {
    const uint4 x = send[v];
    for (int peer = 0; peer < a.size; ++peer) {
      if (peer != a.rank) region(peer, a.rank)[v] = x;
    }
    place_columns(x, v, a.rank, recv, g);
  }
  __syncthreads();  // the block's stores, then the release by its flag-writing threads
  exchange_flags(a, epoch);
  pdl_launch_dependents();
  for (int source = 0; source < a.size; ++source) {
    if (source == a.rank) continue;
    const uint4* held = region(a.rank, source);
    for (int64_t v = first; v < vectors; v += stride) {
      place_columns(__ldcg(held + v), v, source, recv, g);  // L2: another GPU wrote it
    }
  }
}

}  // namespace

void launch_peer_all_gather_columns(const PeerAllReduceArgs& args, const float* send, float* recv,
                                    const PeerColumnGather& layout, cudaStream_t stream) {
  if (layout.rows <= 0) return;
  launch_kernel(peer_all_gather_columns_kernel, dim3(kPeerAllReduceBlocks),
                dim3(kPeerAllReduceThreads), 0, stream, args, reinterpret_cast<const uint4*>(send),
                recv, layout);
}

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

PeerPush peer_push_target(const PeerAllReduceArgs& args) {
  PeerPush push;
  if (args.low_latency_stages[0] == nullptr || args.size != 2) return push;
  push.peer_stage = args.low_latency_stages[1 - args.rank];
  push.epochs = args.epochs;
  push.slot_bytes = args.low_latency_slot_bytes;
  push.region_bytes = low_latency_region_bytes(args);
  push.block_bytes = low_latency_block_bytes(args);
  push.rank = args.rank;
  push.size = args.size;
  return push;
}

bool peer_add_norm_takes_push(const PeerAllReduceArgs& args, const AddNormArgs& norm) {
  return peer_add_norm_is_low_latency(args, norm) && norm.row_index == nullptr && args.size == 2 &&
         int64_t(norm.hidden) * 8 <= low_latency_block_bytes(args);
}

bool peer_add_norm_is_low_latency(const PeerAllReduceArgs& args, const AddNormArgs& norm) {
  int per_thread = 0;
  with_norm_per_thread(norm.hidden, [&](auto k) { per_thread = decltype(k)::value; });
  const int64_t row_bytes = int64_t(per_thread) * kNormThreads * 4;  // kPerThread / 2 words each
  return (args.probe & ~48) == 0 && args.low_latency_stages[0] != nullptr && per_thread <= 16 &&
         norm.num_rows <= args.low_latency_rows && norm.num_rows <= kPeerAllReduceBlocks &&
         row_bytes <= low_latency_block_bytes(args);
}

void launch_peer_all_reduce_add_norm(const PeerAllReduceArgs& args, const AddNormArgs& norm,
                                     bool pushed, cudaStream_t stream) {
  if (norm.num_rows <= 0) return;
  if (pushed && !peer_add_norm_takes_push(args, norm)) {
    cuda_fail("pushed rows the low-latency exchange does not take", "peer all-reduce add-norm",
              __FILE__, __LINE__);
  }
  const dim3 grid(norm.num_rows < kPeerAllReduceBlocks ? norm.num_rows : kPeerAllReduceBlocks);
  const bool low_latency = peer_add_norm_is_low_latency(args, norm);
  dispatch_dtype(norm.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_norm_per_thread(norm.hidden, [&](auto per_thread) {
      constexpr int kPerThread = decltype(per_thread)::value;
      if constexpr (kPerThread <= 16) {
        if (pushed) {
          launch_kernel(peer_all_reduce_add_norm_low_latency_kernel<T, kPerThread, true>, grid,
                        kNormThreads, 0, stream, args, norm);
          return;
        }
        if (low_latency) {
          launch_kernel(peer_all_reduce_add_norm_low_latency_kernel<T, kPerThread, false>, grid,
                        kNormThreads, 0, stream, args, norm);
          return;
        }
      }
      launch_kernel(peer_all_reduce_add_norm_kernel<T, kPerThread>, grid, kNormThreads, 0, stream,
                    args, norm);
    });
  });
}

}  // namespace rose
