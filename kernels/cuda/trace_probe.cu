// The step timeline probe's file (trace_probe.h).
#include <cuda_runtime.h>

#include <cerrno>
#include <cstring>

#include "kernels/cuda/trace_probe.h"

#ifndef ROSEINFER_TRACE_PROBE
#define ROSEINFER_TRACE_PROBE 0
#endif

namespace rose {
namespace trace_probe {

bool built() { return ROSEINFER_TRACE_PROBE != 0; }

bool write_file(const std::string& path, std::string* error) {
  const cudaError_t synced = cudaDeviceSynchronize();
  if (synced != cudaSuccess) {
    *error = std::string("synchronize: ") + cudaGetErrorString(synced);
    return false;
  }
  const std::string partial = path + ".tmp";
  std::FILE* f = std::fopen(partial.c_str(), "w");
  if (f == nullptr) {
    *error = partial + ": " + std::strerror(errno);
    return false;
  }
  bool ok = dump_gemv_quant(f, error) && dump_attention_decode(f, error) && dump_norm(f, error) &&
            dump_sampling(f, error);
  if (std::fclose(f) != 0 && ok) {
    *error = partial + ": " + std::strerror(errno);
    ok = false;
  }
  if (ok && std::rename(partial.c_str(), path.c_str()) != 0) {
    *error = path + ": " + std::strerror(errno);
    ok = false;
  }
  if (!ok) std::remove(partial.c_str());
  return ok;
}

}  // namespace trace_probe
}  // namespace rose
