#pragma once
// L2 eviction hints for global loads of bytes a kernel streams once (a decode step's weights), so
// they leave the L2 before the small data the next kernels reread. Included from .cu files only.
#include <cstdint>

namespace rose {

// An L2 cache policy (createpolicy) and the loads that carry it (ld.global.L2::cache_hint).
// evict_first: the lines these loads bring in are the first the L2 evicts, meant to keep a step's
// weight stream (GBs a step through a 50 MB L2) from pushing out the activations, the fp32
// residual and the norm weights between the kernels that write and read them (the reason it was
// tried; which reads got faster was not measured apart: results/2026-11-30-evict-first).
// evict_normal: the L2's default priority (comparisons; measured slower than plain loads in the
// dense GEMV, so not the same thing). The loads read memory nothing writes while the kernel runs.
struct StreamHint {
  uint64_t policy;

  __device__ __forceinline__ static StreamHint make(bool evict_first) {
    StreamHint hint;
    if (evict_first) {
      asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(hint.policy));
    } else {
      asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(hint.policy));
    }
    return hint;
  }

  // 16 bytes at a 16-byte aligned global address.
  __device__ __forceinline__ uint4 load(const uint4* p) const {
    uint4 v;
    asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "l"(policy));
    return v;
  }
  // 16 bytes at a 16-byte aligned global address through the read-only path (__ldg's).
  __device__ __forceinline__ uint4 load_read_only(const uint4* p) const {
    uint4 v;
    asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "l"(policy));
    return v;
  }
  // 4 bytes at a 4-byte aligned global address.
  __device__ __forceinline__ uint32_t load(const uint32_t* p) const {
    uint32_t v;
    asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
    return v;
  }
  // 2 bytes at a 2-byte aligned global address, zero-extended.
  __device__ __forceinline__ uint32_t load(const unsigned short* p) const {
    uint32_t v;
    asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
    return v;
  }
};

}  // namespace rose
