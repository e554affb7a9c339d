#pragma once
// How the ranks of a tensor-parallel model combine their partial results (shard_plan.h): one
// object per rank, and every rank calls the same operations in the same order with the same
// counts. On the CPU the ranks are threads of one process (thread_collective.h); on GPUs, NCCL
// communicators (engine/backend/cuda/nccl_collective.h), enqueued on the rank's stream.
#include <cstdint>

namespace rose {

enum class CollectiveType { kF32, kBF16, kF16 };

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // buffer (count,) summed over the ranks, in place. `stream`: the rank's cudaStream_t (NCCL);
  // ignored on the CPU.
  virtual void all_reduce_sum(void* buffer, int64_t count, CollectiveType type, void* stream) = 0;
  // recv (size, count) = every rank's send (count,), in rank order.
  virtual void all_gather(const void* send, void* recv, int64_t count, CollectiveType type,
                          void* stream) = 0;
  // Another rank failed in the middle of a step: make this rank's calls that wait for it, now or
  // later, end with an error instead of waiting forever. Callable from any thread; the
  // collective stays unusable afterwards. Default: nothing to wake.
  virtual void abort() {}
};

// The collectives one pure-decode step of `rows` sequences runs on a tensor-parallel backend, and
// each call's time measured standalone, outside any step, at that step's sizes
// (Backend::time_collectives): the mean over back-to-back calls after a few warm-up calls.
struct CollectiveTiming {
  int ranks = 0;
  int rows = 0;                  // the step's rows (a CUDA graph's padded batch), each all-reduced
  int all_reduces_per_step = 0;  // two per layer: after the o and the down projections
  int64_t all_reduce_bytes = 0;  // one call's buffer (rows x hidden in the activation dtype)
  double all_reduce_s = 0;       // one call
  int all_gathers_per_step = 0;  // of the sampled rows' logits
  int64_t all_gather_bytes = 0;  // one call's send buffer (each rank's logits, fp32)
  double all_gather_s = 0;       // one call
  int iterations = 0;            // timed calls of each
  // True where the step fuses each all-reduce with the add-norm that consumes it (the peer
  // kernel): all_reduce_s is then the fused kernel's time less the plain add-norm's, the
  // exchange's cost in the step, not a separate all-reduce's.
  bool fused_add_norm = false;

  double step_s() const {
    return all_reduces_per_step * all_reduce_s + all_gathers_per_step * all_gather_s;
  }
  // NCCL's bus bandwidth of an all-reduce (nccl-tests' busBw): 2 (N-1)/N x bytes / time, GB/s;
  // the traffic over each rank's slowest link, comparable with the link's own bandwidth.
  double all_reduce_bus_gbps() const {
    if (all_reduce_s <= 0 || ranks < 2) return 0;
    return 2.0 * (ranks - 1) / ranks * double(all_reduce_bytes) / all_reduce_s / 1e9;
  }
};

}  // namespace rose
