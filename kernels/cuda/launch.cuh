#pragma once
// Kernel launches with programmatic dependent launch (PDL, sm_90). A decode step at small batch is
// ~100 kernels of a few microseconds each, so the gap between one kernel's end and the next one's
// start is a large share of the step: with PDL the next kernel's blocks are scheduled while the
// previous kernel drains and start the moment it completes.
//
// Rule for every kernel launched through launch_kernel: call pdl_wait() before its first global
// memory access. Exceptions, each argued where it is made: weights and other constants of the run
// (the GEMVs' early loads and L2 prefetches), and data written two or more kernels back (the fused
// all-reduce add-norm's epoch and residual, all_reduce_peer.cu). griddepcontrol.wait returns once
// the preceding grid has completed and its writes are visible, so the kernel sees exactly what a
// plain stream-ordered launch would see (and none of its writes can race with the predecessor's
// reads). pdl_launch_dependents() lets the next kernel be scheduled early; it changes scheduling
// only, never what the kernels compute. ROSEINFER_CUDA_PDL=0 launches without the attribute (plain
// stream order), for comparison.
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"

namespace rose {

bool pdl_enabled();

// Lets `kernel` use `bytes` of dynamic shared memory on the current device (the opt-in that more
// than 48 KiB needs), once per kernel, device and size; safe from several threads. The first call
// for a kernel must come before stream capture (the graph cache runs a step eagerly first).
void allow_dynamic_shared_memory(const void* kernel, int bytes);

// Lets `kernel` launch in thread-block clusters of more than 8 blocks (the portable limit; sm_90
// allows 16) on the current device, once per kernel and device; the same rules as above.
void allow_non_portable_clusters(const void* kernel);

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute; checks the launch.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  config.attrs = attribute;
  config.numAttrs = 1;
  ROSE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

// launch_kernel for a kernel of thread-block clusters of `cluster` blocks (grid a multiple of it).
template <typename... Params, typename... Args>
void launch_cluster_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, dim3 cluster,
                           size_t smem, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[2];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  attribute[1].id = cudaLaunchAttributeClusterDimension;
  attribute[1].val.clusterDim.x = cluster.x;
  attribute[1].val.clusterDim.y = cluster.y;
  attribute[1].val.clusterDim.z = cluster.z;
  config.attrs = attribute;
  config.numAttrs = 2;
  ROSE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

}  // namespace rose
