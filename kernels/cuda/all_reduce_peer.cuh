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
// Every rank adds the same values in the same order, so all ranks get the same bits.
#include <cuda_runtime_api.h>

#include <cstdint>

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
  int rank;
  int size;
};

// buffer (count,) of `type`, summed over the ranks in place. count * element size must be a
// multiple of 16 bytes and at most slot_bytes (peer_all_reduce.h checks).
void launch_peer_all_reduce(const PeerAllReduceArgs& args, void* buffer, int64_t count,
                            PeerReduceType type, cudaStream_t stream);

}  // namespace rose
