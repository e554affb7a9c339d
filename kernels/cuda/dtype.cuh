#pragma once
// The storage type of weights, activations and the KV cache on the GPU (accumulation is fp32).
// Launchers take void pointers plus this tag and dispatch to a template instantiation once.
#include <cstddef>

namespace rose {

enum class DType { kBF16, kFP16 };

inline size_t dtype_size(DType) { return 2; }

}  // namespace rose
