#pragma once
// The storage type of weights, activations and the KV cache on the GPU (accumulation is fp32).
// Launchers take void pointers plus this tag and dispatch to a template instantiation once.
#include <cstddef>

namespace rose {

enum class DType { kBF16, kFP16 };

// Bytes per element: every size the CUDA backend allocates (weights, workspaces, KV) is derived
// from this, so a wider or narrower storage type changes one line.
inline size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
    case DType::kFP16:
      return 2;
  }
  return 2;  // unreachable: every DType is listed above
}

}  // namespace rose
