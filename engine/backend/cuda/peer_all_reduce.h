#pragma once
// Tensor parallel's small all-reduces through peer memory (one-shot:
// kernels/cuda/all_reduce_peer.cuh) instead of NCCL, whose protocol latency (~8-10 us a call in a
// graph) decides a batch-1 step's cost. The NCCL collective (nccl_collective.h) sends a call here
// when handles() says so, and every rank decides alike because the decision depends only on the
// count and type.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/parallel/collective.h"
#include "kernels/cuda/all_reduce_peer.cuh"
#include "kernels/cuda/norm.cuh"

namespace rose {

// The largest all-reduce (bytes per rank) sent through peer memory:
// ROSEINFER_CUDA_PEER_ALL_REDUCE_BYTES, default 512 KiB; 0 sends every call to NCCL.
int64_t peer_all_reduce_max_bytes();
// The most rows for which tensor parallel fuses a peer-memory all-reduce with the add-norm after
// it (PeerAllReduce::Use::kAddNorm): ROSEINFER_CUDA_FUSED_ALL_REDUCE=N, 0 keeping two kernels (for
// comparison). Default 32, one row per block of the fused kernel: on two H200s it won 7% of a
// llama-8b batch-1 step and 3-4% at 16 rows, and lost 1% at 64, where a block takes two rows
// (results/2026-11-29-tp-fused-norm).
int fused_all_reduce_max_rows();
// The most rows the fused all-reduce add-norm sends by its low-latency exchange (8-byte words each
// carrying its epoch, no flags: launch_peer_all_reduce_add_norm):
// ROSEINFER_CUDA_PEER_LOW_LATENCY_ROWS=N (0-32), 0 keeping the flag exchange. Default 32.
int peer_low_latency_rows();
// The largest logits gather (bytes per rank) done through peer memory
// (PeerAllReduce::Use::kGather): ROSEINFER_CUDA_PEER_GATHER_BYTES, default 2 MiB (8 rows of
// llama-8b's vocab shard); 0 keeps NCCL's all-gather and the copies into place.
int64_t peer_gather_max_bytes();

class PeerAllReduce {
 public:
  // What a group's calls are: its epochs and staging serve one kernel's layout, never both.
  enum class Use {
    kSum,      // all_reduce_sum
    kAddNorm,  // all_reduce_add_norm (a region per source rank in each slot)
    kGather,   // all_gather_columns (a region per source rank in each slot)
  };
  struct Group;  // every rank's staging, flags and epochs, freed when the last rank goes
  // One per rank, rank r on devices[r], each taking calls of up to max_bytes per rank. A device may
  // repeat (ranks sharing one GPU, for tests). Empty when two of the devices cannot reach each
  // other's memory (no peer access): the caller keeps NCCL for everything. A kAddNorm group sends
  // up to low_latency_rows rows by the low-latency exchange (peer_low_latency_rows() when unset).
  static std::vector<std::unique_ptr<PeerAllReduce>> make_group(
      const std::vector<int>& devices, int64_t max_bytes, Use use = Use::kSum,
      std::optional<int> low_latency_rows = std::nullopt);
  PeerAllReduce(std::shared_ptr<Group> group, int rank);

  // Whether all_reduce_sum takes (count, type): whole 16-byte vectors, at most max_bytes.
  bool handles(int64_t count, CollectiveType type) const;
  // buffer (count,) summed over the ranks in place, in rank order in fp32 (every rank gets the
  // same bits), enqueued on `stream` (capturable). Every rank must make the same calls.
  void all_reduce_sum(void* buffer, int64_t count, CollectiveType type, cudaStream_t stream) const;

  // Whether all_reduce_add_norm takes `norm` (a kAddNorm group; launch_peer_all_reduce_add_norm's
  // needs: its rows of whole 16-byte vectors, at most max_bytes, no embedding; gathered rows only
  // where the residual is not written back, as in the final norm).
  bool fuses_add_norm(const AddNormArgs& norm) const;
  // norm.delta (num_rows, hidden), this rank's partial, all-reduced and consumed by the add-norm
  // in one kernel: the bits of all_reduce_sum(delta) followed by launch_add_norm(norm).
  // pushed: delta's rows are already in the peers' low-latency staging (a GEMV stored them at
  // push_target(); only where takes_push(norm)).
  void all_reduce_add_norm(const AddNormArgs& norm, bool pushed, cudaStream_t stream) const;
  // Whether all_reduce_add_norm sends `norm`'s rows by the low-latency exchange.
  bool is_low_latency(const AddNormArgs& norm) const;
  // Whether a GEMV may push `norm.delta`'s rows for all_reduce_add_norm (pushed = true): two
  // ranks, the low-latency exchange takes them, no gathered rows, and a row's words (8 bytes an
  // element) fit a block's part of the staging.
  bool takes_push(const AddNormArgs& norm) const;
  // Where a GEMV stores this rank's partial for the next all_reduce_add_norm (a kAddNorm group
  // with a low-latency staging; size 0 otherwise).
  PeerPush push_target() const;

  // Whether all_gather_columns takes `layout` (a kGather group; a chunk of whole 16-byte vectors
  // and at most max_bytes holding every rank's rows, whose columns fit recv's rows).
  bool gathers_columns(const PeerColumnGather& layout) const;
  // launch_peer_all_gather_columns on this rank's stream: every rank's columns into recv.
  void all_gather_columns(const float* send, float* recv, const PeerColumnGather& layout,
                          cudaStream_t stream) const;

 private:
  std::shared_ptr<Group> group_;
  PeerAllReduceArgs args_;  // this rank's kernel arguments: every call passes the same pointers
};

}  // namespace rose
