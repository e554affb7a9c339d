#pragma once
// A tensor-parallel rank's row-parallel GEMV (o, down) storing its partial outputs straight into
// the peers' low-latency staging of the fused all-reduce add-norm (all_reduce_peer.cuh), as words
// that carry the exchange's epoch: the NVLink writes leave while the GEMV still runs, and the
// fused kernel then only reads, instead of loading the partial and sending it after the GEMV.
#include <cstdint>

namespace rose {

// Where rank `rank`'s rows go in its one peer's low-latency staging (two ranks only: with more,
// the GEMV's addresses of every peer, kept across its loop of feature groups, raised the one-wave
// kernel's registers), as the fused kernel reads a pushed call: element o of row r is the 8-byte
// word o of row r's block part,
//   peer_stage + (epoch & 1) * slot_bytes + rank * region_bytes + r * block_bytes,
// its low 16 bits the element's bits, its high 32 the epoch: block r's call count + 1 (row r is
// block r's, the low-latency exchange taking at most one row a block).
struct PeerPush {
  void* peer_stage = nullptr;        // the other rank's low-latency staging, peer-mapped
  const uint32_t* epochs = nullptr;  // (blocks,) the fused group's call counts on this rank
  int64_t slot_bytes = 0;
  int64_t region_bytes = 0;  // a source rank's region in a slot
  int64_t block_bytes = 0;   // a block's part of a region: a row's words
  int rank = 0;
  int size = 0;  // ranks: 2, or 0 for no push
};

#ifdef __CUDACC__
// The low-latency exchange's stores (a word the peer reads whole or not at all), here and in the
// fused kernel (all_reduce_peer.cu).
__device__ __forceinline__ void store_relaxed_system_u64(uint64_t* address, uint64_t value) {
  asm volatile("st.relaxed.sys.global.b64 [%0], %1;" ::"l"(address), "l"(value) : "memory");
}

// Row `row`'s epoch for its next exchange. Read before the GEMV lets its dependents launch (the
// caller stores it to shared memory and meets a barrier first): the fused kernel after the GEMV
// counts its call before its own PDL wait.
__device__ __forceinline__ uint32_t peer_push_epoch(const PeerPush& p, int row) {
  return __ldcg(p.epochs + row) + 1u;
}

// Output `o` of row `row` (its raw bits) with the epoch into the peer's staging.
__device__ __forceinline__ void peer_push_store(const PeerPush& p, uint32_t epoch, int row, int o,
                                                unsigned short bits) {
  const uint64_t word = uint64_t(bits) | uint64_t(epoch) << 32;
  char* part = static_cast<char*>(p.peer_stage) + int64_t(epoch & 1) * p.slot_bytes +
               int64_t(p.rank) * p.region_bytes + int64_t(row) * p.block_bytes;
  store_relaxed_system_u64(reinterpret_cast<uint64_t*>(part) + o, word);
}
#endif

}  // namespace rose
