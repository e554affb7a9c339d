#pragma once
// One checking macro for every CUDA runtime and cuBLAS call, and one for kernel launches. A failure
// throws rose::Error naming the statement, file and line (the CLI prints it; out-of-memory at start
// is the usual user-caused case). Includable from plain C++ and from .cu files.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace rose {

[[noreturn]] void cuda_fail(const char* error_text, const char* statement, const char* file,
                            int line);

inline void cuda_check(cudaError_t status, const char* statement, const char* file, int line) {
  if (status != cudaSuccess) cuda_fail(cudaGetErrorString(status), statement, file, line);
}

const char* cublas_status_text(cublasStatus_t status);

inline void cublas_check(cublasStatus_t status, const char* statement, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) cuda_fail(cublas_status_text(status), statement, file, line);
}

// True when p is not 16-byte aligned, as the kernels' 16-byte vector loads need (their launchers
// refuse such pointers with cuda_fail).
inline bool misaligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; }

}  // namespace rose

#define ROSE_CUDA_CHECK(stmt) ::rose::cuda_check((stmt), #stmt, __FILE__, __LINE__)
#define ROSE_CUBLAS_CHECK(stmt) ::rose::cublas_check((stmt), #stmt, __FILE__, __LINE__)
// After every kernel launch: a bad launch configuration shows here, not at the next sync.
#define ROSE_CUDA_CHECK_LAUNCH() \
  ::rose::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
