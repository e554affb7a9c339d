#pragma once
// A tensor-parallel collective that can fuse the all-reduce of a row-parallel projection (o, down)
// with the add-norm that consumes it: one kernel instead of two, 64 fewer launches in a batch-1
// llama-8b step at TP=2. The CUDA backend finds it on its collective (a dynamic_cast: collectives
// without it, such as a test's, keep the all-reduce and the add-norm kernels) and falls back to
// them for any add-norm the collective does not fuse.
#include <cuda_runtime_api.h>

#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/peer_push.cuh"

namespace rose {

class AddNormReducer {
 public:
  virtual ~AddNormReducer() = default;
  // Whether all_reduce_add_norm takes `norm` (its rows, hidden size and dtype). Every rank
  // decides alike: the answer depends only on the shapes.
  virtual bool fuses_add_norm(const AddNormArgs& norm) const = 0;
  // norm.delta (num_rows, hidden), this rank's partial, summed over the ranks, then
  // launch_add_norm(norm) with that sum as delta, enqueued on `stream`. Every rank must make the
  // same calls.
  // pushed: a GEMV already stored delta's rows at push_target() (every rank alike; only where
  // takes_push(norm)).
  virtual void all_reduce_add_norm(const AddNormArgs& norm, bool pushed, cudaStream_t stream) = 0;
  // Where a row-parallel GEMV may store this rank's partial for the next all_reduce_add_norm
  // (peer_push.cuh); size 0 where no GEMV can push.
  virtual PeerPush push_target() const { return {}; }
  // Whether all_reduce_add_norm(norm, pushed = true) is allowed.
  virtual bool takes_push(const AddNormArgs&) const { return false; }
};

}  // namespace rose
