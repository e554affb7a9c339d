#pragma once
// Device allocations made at construction and freed together when the backend goes away: the
// weights, the workspaces, the KV pool. Nothing is freed one at a time, so a plain list suffices.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/check.cuh"

namespace rose {

// Alignment (and smallest size) of every allocation: a zero-byte buffer still gets a valid pointer.
constexpr int64_t kDeviceAlign = 256;

class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { release(); }

  void* alloc(int64_t bytes) {
    void* ptr = nullptr;
    ROSE_CUDA_CHECK(cudaMalloc(&ptr, static_cast<size_t>(std::max<int64_t>(bytes, kDeviceAlign))));
    ptrs_.push_back(ptr);
    return ptr;
  }
  template <typename T>
  T* alloc_as(int64_t bytes) {
    return static_cast<T*>(alloc(bytes));
  }
  // Frees everything on the current device; errors are ignored (destructors never throw).
  void release() noexcept {
    for (void* ptr : ptrs_) cudaFree(ptr);
    ptrs_.clear();
  }

 private:
  std::vector<void*> ptrs_;
};

}  // namespace rose
