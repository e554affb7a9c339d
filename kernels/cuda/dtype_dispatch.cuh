#pragma once
// Maps the runtime DType tag to the element type once, so a launcher names its kernel a single
// time instead of repeating the launch in an if/else per type. Included from .cu files only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/dtype.cuh"

namespace rose {

template <typename T>
struct ElementTag {
  using type = T;
};

// Calls fn(ElementTag<T>{}) with T = __nv_bfloat16 or __half; the caller recovers T as
// `typename decltype(tag)::type` (the .cu files build as C++17: no template lambdas).
template <typename Fn>
void dispatch_dtype(DType dtype, Fn&& fn) {
  if (dtype == DType::kBF16) {
    fn(ElementTag<__nv_bfloat16>{});
  } else {
    fn(ElementTag<__half>{});
  }
}

}  // namespace rose
