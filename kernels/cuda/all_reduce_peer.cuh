#pragma once
// One-shot all-reduce between the GPUs of one process through peer memory (NVLink): each rank
// copies its buffer into its own staging slot, signals every peer, waits for their signals, then
// reads every rank's slot and sums them in rank order. At batch 1 a tensor-parallel step has two
// 8 KiB all-reduces per layer; NCCL takes ~8-10 us for each inside a CUDA graph
// (results/2026-11-24-tensor-parallel), most of it protocol latency, while this moves the same
// bytes after one flag exchange. The host side (which GPUs, which sizes) is
// engine/backend/cuda/peer_all_reduce.h.
//
// Why it is safe inside CUDA graphs and back to back:
// - Every call increments a per-block epoch kept in device memory, so replays need no host input;
//   every rank makes the same calls in the same order, so the epochs agree.
// - Block b always owns the same 16-byte vectors (index / kThreads % kBlocks == b), whatever the
//   count, and only block b of each rank writes or reads them.
// - Staging is double-buffered by epoch parity: a rank writes slot (e % 2) at epoch e only after
//   its block passed epoch e - 1's exchange, which each peer's block reaches only after it has
//   finished reading epoch e - 2 from that slot.
// - The fused add-norm's low-latency exchange keeps the epochs and the parity but has no flags:
//   each 8-byte word carries its epoch, and passing epoch e - 1's exchange means having read every
//   peer's words of e - 1. Where a GEMV pushed them (peer_push.cuh), the peer's GEMV wrote them
//   after the peer's fused call of e - 2 had completed, so the argument holds.
// Every rank adds the same values in the same order, so all ranks get the same bits.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/peer_push.cuh"

namespace rose {

constexpr int kPeerAllReduceMaxRanks = 8;
constexpr int kPeerAllReduceBlocks = 32;
constexpr int kPeerAllReduceThreads = 256;

enum class PeerReduceType { kF32, kBF16, kF16 };

// Pointers of one rank's call, all usable on its device (its own, or peers' through peer access).
struct PeerAllReduceArgs {
  // stages[r]: rank r's staging area, 2 slots of slot_bytes each.
  void* stages[kPeerAllReduceMaxRanks];
  // flags[r]: rank r's flags (kPeerAllReduceBlocks, kPeerAllReduceMaxRanks) uint32: [b][s] is the
  // last epoch rank s announced to rank r for block b.
  uint32_t* flags[kPeerAllReduceMaxRanks];
  uint32_t* epochs;  // (kPeerAllReduceBlocks,) this rank's per-block call counter
  int64_t slot_bytes;
  // The fused add-norm's low-latency exchange (launch_peer_all_reduce_add_norm): rank r's staging
  // of 8-byte words, 2 slots of low_latency_slot_bytes, zeroed before the first call (a word is
  // valid when its epoch, never 0, matches); null where the group has none. It takes calls of at
  // most low_latency_rows rows (and kPeerAllReduceBlocks) that fit.
  void* low_latency_stages[kPeerAllReduceMaxRanks];
  int64_t low_latency_slot_bytes;
  int low_latency_rows;
  int rank;
  int size;
  // Probes of the fused add-norm's exchange (ROSEINFER_CUDA_PEER_PROBE; 0 in every real run).
  // Timing probes, outputs wrong, times real: bit 1 skips the push of this rank's rows, bit 2
  // announces with a relaxed store (no release fence), bit 4 skips the flag exchange altogether.
  // Bit 8 (outputs right) reads the epoch and residual after the PDL wait, as before 2026-11-29.
  // Bits 16 and 32 (outputs right; the low-latency exchange, which the other bits turn off) let
  // the next kernel launch after the wait for the peers' words (16), or before this kernel's own
  // PDL wait (32), instead of right before the wait for the peers.
  int probe;
};

// buffer (count,) of `type`, summed over the ranks in place. count * element size must be a
// multiple of 16 bytes and at most slot_bytes (peer_all_reduce.h checks).
void launch_peer_all_reduce(const PeerAllReduceArgs& args, void* buffer, int64_t count,
                            PeerReduceType type, cudaStream_t stream);

// A tensor-parallel sub-layer's all-reduce fused with the add-norm that consumes it, one kernel
// instead of two (a batch-1 llama-8b step at TP=2 has 64 of each). norm.delta (num_rows, hidden)
// holds this rank's partial; every rank ends with launch_add_norm's result for delta = the ranks'
// partials summed in rank order in fp32 and rounded to the dtype: the bits of
// launch_peer_all_reduce followed by launch_add_norm.
//
// Unlike launch_peer_all_reduce it pushes: each rank stores its rows into every peer's staging
// (NVLink writes are posted; a read waits a round trip), announces them, and sums from its own
// memory. The group's slot of slot_bytes holds one region of slot_bytes / size bytes per source
// rank. Row r always belongs to block r % kPeerAllReduceBlocks, which alone writes and reads its
// regions, so the epochs' argument above holds row by row; use a group of its own (its own
// epochs), never one launch_peer_all_reduce also uses.
//
// With norm.row_index (the final norm: write_residual false), output row r sums and normalizes
// source row row_index[r]: only the gathered rows cross between the GPUs.
//
// At most args.low_latency_rows rows (peer_add_norm_is_low_latency) cross by the low-latency
// exchange instead, as NCCL's LL protocol does: each 8-byte word carries 4 bytes of the partial
// and the epoch, so a peer reads the rows as they land, with no release fence, flag or barrier
// (the flag exchange's fence alone cost ~34 us of a llama-8b TP=2 batch-1 step on two H200s,
// results/2026-11-29-tp-prefetch). Twice the bytes cross, in the group's own staging, so no word
// of the other layout can pass for a valid one. Same bits either way.
//
// Needs: norm.tok_emb null, hidden * element size a multiple of 16 and hidden at most
// kAddNormMaxHidden, num_rows * hidden * element size <= slot_bytes / size rounded down to 16
// (PeerAllReduce::fuses_add_norm checks).
//
// pushed: the row-parallel GEMV that wrote norm.delta also stored it into the peers at
// peer_push_target(args) (peer_push.cuh), so the rows are not sent again; only where
// peer_add_norm_takes_push.
void launch_peer_all_reduce_add_norm(const PeerAllReduceArgs& args, const AddNormArgs& norm,
                                     bool pushed, cudaStream_t stream);
// Whether launch_peer_all_reduce_add_norm takes `norm` by the low-latency exchange: no probe but
// 16 and 32, at most low_latency_rows rows, hidden at most 16 * kNormThreads (a thread keeps its
// partial in registers), and a row's words fit a block's part of a source's region of the
// low-latency slot.
bool peer_add_norm_is_low_latency(const PeerAllReduceArgs& args, const AddNormArgs& norm);
// Whether a GEMV may push norm.delta's rows (launch_peer_all_reduce_add_norm's pushed): two ranks,
// the low-latency exchange takes them, no gathered rows, and a row's words (8 bytes an element)
// fit a block's part.
bool peer_add_norm_takes_push(const PeerAllReduceArgs& args, const AddNormArgs& norm);
// Where a row-parallel GEMV stores this rank's partial for a pushed call (size 0: the group has no
// low-latency staging, or more than two ranks).
PeerPush peer_push_target(const PeerAllReduceArgs& args);

// Where each rank's columns go in a column gather: rank r's send buffer holds its (rows,
// count[r]) columns row-major (the lm_head's output), padded to chunk floats, and they land in
// every rank's recv rows (recv_stride floats each) at columns [begin[r], begin[r] + count[r]).
struct PeerColumnGather {
  int rows = 0;
  int64_t chunk = 0;  // floats a rank sends, the same on every rank, a multiple of 4 (16 bytes)
  int recv_stride = 0;
  int begin[kPeerAllReduceMaxRanks] = {};
  int count[kPeerAllReduceMaxRanks] = {};
};

// Tensor parallel's vocab-split logits put together on every rank in one kernel, in place of an
// NCCL all-gather and a copy of each rank's columns into place: send (chunk,) fp32 is this rank's
// shard; recv (rows, recv_stride) gets every rank's columns (the same bits on every rank). Pushes
// as launch_peer_all_reduce_add_norm does: this rank's chunk into its region of every peer's
// staging, one flag per block, then each rank places the peers' columns from its own memory (and
// its own straight from send). Block b owns the chunk's 16-byte vectors b * kPeerAllReduceThreads
// + t (mod kPeerAllReduceBlocks * kPeerAllReduceThreads), so the epochs' argument above holds;
// use a group of its own. Needs chunk * 4 <= slot_bytes / size rounded down to 16
// (PeerAllReduce::gathers_columns checks).
void launch_peer_all_gather_columns(const PeerAllReduceArgs& args, const float* send, float* recv,
                                    const PeerColumnGather& layout, cudaStream_t stream);

}  // namespace rose
