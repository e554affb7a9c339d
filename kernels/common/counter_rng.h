#pragma once
// Counter-based random numbers: value i of a stream depends only on (seed, i), so the CPU fills a
// preset's weights in a loop and the GPU in parallel with bit-identical results, and both backends
// draw the same sampling number for a token. Plain C++, host and device.
#include <cstdint>

#if defined(__CUDACC__)
#define ROSE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ROSE_HOST_DEVICE inline
#endif

namespace rose {

// splitmix64 finaliser: a good 64-bit mix of the counter.
ROSE_HOST_DEVICE uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits (exact in fp32).
ROSE_HOST_DEVICE float uniform01(uint64_t seed, uint64_t counter) {
  return static_cast<float>(mix64(seed ^ mix64(counter)) >> 40) * (1.0f / 16777216.0f);
}

// Uniform in [-scale, scale).
ROSE_HOST_DEVICE float synthetic_uniform(uint64_t seed, uint64_t index, float scale) {
  return (2.0f * uniform01(seed, index) - 1.0f) * scale;
}

}  // namespace rose
