// Built when CUDA or NCCL is missing: tensor parallel runs on the CPU only (its tests and CI).
#include "engine/common/error.h"
#include "engine/parallel/tensor_parallel_backend.h"

namespace rose {

std::unique_ptr<Backend> make_cuda_tensor_parallel_backend(const WeightSource&,
                                                           const BackendOptions&,
                                                           const std::vector<int>&) {
  fail(
      "--tensor-parallel on --device cuda: this roseinfer was built without NCCL (the CUDA "
      "toolkit's nccl.h and libnccl were not found at build time)");
}

}  // namespace rose
