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
};

}  // namespace rose
