#pragma once
// The step timeline probe's device side (builds configured with -DROSEINFER_TRACE_PROBE=ON; in
// the others every call here compiles to nothing, so the kernels keep their code and registers).
// Thread 0 of each thread block of a probed kernel stamps %globaltimer at its entry, when its PDL
// wait returns, when its input is ready and at its exit into a ring of records; each .cu that
// includes this has a ring of its own (no relocatable device code), which its trace_probe::dump_*
// function (trace_probe.h) writes out. scripts/timeline.py reads the file
// (results/2026-11-30-step-timeline says what it showed). Included from .cu files only.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/trace_probe.h"

#ifndef ROSEINFER_TRACE_PROBE
#define ROSEINFER_TRACE_PROBE 0
#endif

namespace rose {
namespace trace_probe {
namespace {

#if ROSEINFER_TRACE_PROBE

// One thread block's stamps (ns of %globaltimer, which advances in 256 ns steps on the H200) and
// what it was: tag (the kernel family's own code), in (its input width), its grid size, its index
// in the grid and the SM it ran on.
struct Record {
  unsigned long long entry, waited, ready, exit;
  int tag, in, grid, block, smid, pad[3];
};
constexpr unsigned long long kCapacity = 1ull << 16;  // the last 65,536 blocks of each unit
__device__ Record g_records[kCapacity];
__device__ unsigned long long
    g_next;  // records written so far (the ring's next slot mod kCapacity)

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Stamps {
  unsigned long long entry = 0, waited = 0, ready = 0;
  __device__ __forceinline__ void start() { entry = now_ns(); }
  __device__ __forceinline__ void wait_done() { waited = ready = now_ns(); }
  __device__ __forceinline__ void input_ready() { ready = now_ns(); }
  // Thread 0 only: the block's record, with the exit time now.
  __device__ __forceinline__ void finish(int tag, int in) const {
    if (threadIdx.x != 0) return;
    Record r;
    r.entry = entry;
    r.waited = waited;
    r.ready = ready;
    r.exit = now_ns();
    r.tag = tag;
    r.in = in;
    r.grid = int(gridDim.x * gridDim.y * gridDim.z);
    r.block = int((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x);
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    r.smid = int(smid);
    r.pad[0] = r.pad[1] = r.pad[2] = 0;
    g_records[atomicAdd(&g_next, 1ull) % kCapacity] = r;
  }
};

// A barrier before a kernel's finish, so its exit stamp is its last warp's (probe builds only).
__device__ __forceinline__ void block_barrier() { __syncthreads(); }

// This unit's ring as text, one line a record, oldest first: unit tag in grid block smid entry
// waited ready exit. False (with *error) when a copy fails.
inline bool write_ring(std::FILE* f, const char* unit, std::string* error) {
  unsigned long long next = 0;
  cudaError_t status = cudaMemcpyFromSymbol(&next, g_next, sizeof(next));
  std::vector<Record> records(kCapacity);
  if (status == cudaSuccess) {
    status = cudaMemcpyFromSymbol(records.data(), g_records, sizeof(Record) * kCapacity);
  }
  if (status != cudaSuccess) {
    *error = std::string(unit) + " records: " + cudaGetErrorString(status);
    return false;
  }
  const unsigned long long n = next < kCapacity ? next : kCapacity;
  for (unsigned long long k = 0; k < n; ++k) {
    const Record& r = records[(next - n + k) % kCapacity];
    std::fprintf(f, "%s %d %d %d %d %d %llu %llu %llu %llu\n", unit, r.tag, r.in, r.grid, r.block,
                 r.smid, r.entry, r.waited, r.ready, r.exit);
  }
  return true;
}

#else  // the probe compiled out

struct Stamps {
  __device__ __forceinline__ void start() {}
  __device__ __forceinline__ void wait_done() {}
  __device__ __forceinline__ void input_ready() {}
  __device__ __forceinline__ void finish(int, int) const {}
};
__device__ __forceinline__ void block_barrier() {}
inline bool write_ring(std::FILE*, const char*, std::string*) { return true; }

#endif

}  // namespace
}  // namespace trace_probe
}  // namespace rose
