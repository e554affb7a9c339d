#pragma once
// A tensor-parallel collective that puts the vocab-split logits together in one peer-memory
// kernel (launch_peer_all_gather_columns) instead of an NCCL all-gather and a copy of each rank's
// columns into place. The CUDA backend finds it on its collective, as it finds AddNormReducer,
// and keeps the all-gather where it does not take a step's rows.
#include <cuda_runtime_api.h>

#include "kernels/cuda/all_reduce_peer.cuh"

namespace rose {

class LogitsGatherer {
 public:
  virtual ~LogitsGatherer() = default;
  // Whether all_gather_logits takes `layout`. Every rank decides alike: the answer depends only
  // on the shapes.
  virtual bool gathers_logits(const PeerColumnGather& layout) const = 0;
  // shard (layout.chunk,) fp32 holds this rank's columns of the logits (rows, its count)
  // row-major; logits (rows, recv_stride) gets every rank's, enqueued on `stream`. Every rank
  // must make the same calls.
  virtual void all_gather_logits(const float* shard, float* logits, const PeerColumnGather& layout,
                                 cudaStream_t stream) = 0;
};

}  // namespace rose
