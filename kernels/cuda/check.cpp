#include "kernels/cuda/check.cuh"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "kernels/common/error.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/launch.cuh"

namespace rose {

void cuda_fail(const char* error_text, const char* statement, const char* file, int line) {
  throw Error(fmt::format("CUDA error: {} in `{}` at {}:{}", error_text, statement, file, line));
}

bool pdl_enabled() { return kernel_switches().pdl; }

void allow_dynamic_shared_memory(const void* kernel, int bytes) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, int> allowed;  // the largest size opted in
  int device = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  int& done = allowed[{device, kernel}];
  if (done >= bytes) return;
  ROSE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done = bytes;
}

void allow_non_portable_clusters(const void* kernel) {
  static std::mutex mutex;
  static std::set<std::pair<int, const void*>> allowed;
  int device = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (!allowed.insert({device, kernel}).second) return;
  ROSE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

const char* cublas_status_text(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "unknown cuBLAS status";
  }
}

}  // namespace rose
