// Built only without nvcc: the CUDA backend is absent, and --device auto falls back to the CPU.
#include "engine/backend/backend.h"
#include "engine/common/error.h"

namespace rose {

bool cuda_available(std::string* why_not) {
  if (why_not)
    *why_not = "this roseinfer was built without CUDA (nvcc was not found at build time)";
  return false;
}

int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(const WeightSource&, const BackendOptions&) {
  fail("--device cuda: this roseinfer was built without CUDA (nvcc was not found at build time)");
}

}  // namespace rose
