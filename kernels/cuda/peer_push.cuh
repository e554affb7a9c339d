#pragma once
// A tensor-parallel rank's row-parallel GEMV (o, down) storing its partial outputs straight into
// the peers' staging of the fused all-reduce add-norm (all_reduce_peer.cuh), where that kernel
// would otherwise push them itself after the GEMV: the NVLink writes then leave while the GEMV
// still runs, instead of on the exchange's path (a load of the partial, the writes, and the
// release fence's wait for them).
#include <cstdint>

namespace rose {

constexpr int kPeerPushMaxRanks = 8;  // kPeerAllReduceMaxRanks (checked in all_reduce_peer.cu)

// Where rank `rank`'s rows go in every peer's staging, as launch_peer_all_reduce_add_norm reads
// them: row r of the next exchange at stages[peer] + parity * slot_bytes + rank * region_bytes +
// r * hidden elements, where parity is that exchange's epoch & 1 and the epoch is block
// (r % blocks)'s call count + 1.
struct PeerPush {
  void* stages[kPeerPushMaxRanks] =
      {};                            // every rank's staging (2 slots of slot_bytes), peer-mapped
  const uint32_t* epochs = nullptr;  // (blocks,) the fused group's call counts on this rank
  int64_t slot_bytes = 0;
  int64_t region_bytes = 0;  // a source rank's region in a slot
  int blocks = 0;            // the fused kernel's most blocks (kPeerAllReduceBlocks)
  int rank = 0;
  int size = 0;  // ranks; 0: no push
};

#ifdef __CUDACC__
// The slot parity of row `row`'s next exchange. The fused kernel writes its block's count only
// after its own PDL wait, i.e. after this GEMV completed, so any read in the GEMV sees the count
// of the exchange before.
__device__ __forceinline__ uint32_t peer_push_parity(const PeerPush& p, int row) {
  return (__ldcg(p.epochs + row % p.blocks) + 1u) & 1u;
}

// Output `o` of row `row` (a row of `hidden` elements of T) into every peer's staging.
template <typename T>
__device__ __forceinline__ void peer_push_store(const PeerPush& p, uint32_t parity, int row,
                                                int hidden, int o, T value) {
  for (int peer = 0; peer < p.size; ++peer) {
    if (peer == p.rank) continue;
    char* slot = static_cast<char*>(p.stages[peer]) + int64_t(parity) * p.slot_bytes;
    T* rows = reinterpret_cast<T*>(slot + int64_t(p.rank) * p.region_bytes);
    rows[int64_t(row) * hidden + o] = value;
  }
}
#endif

}  // namespace rose
