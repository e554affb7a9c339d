#pragma once
// How a block normalises its input, named once for the model description (engine/model/config.h)
// and the norm kernels (kernels/cuda/norm.cuh), so the model's answer can be passed to a kernel
// as it is. Plain C++17: nvcc includes it.

namespace rose {

// LayerNorm: mean and variance, weight and bias. RMSNorm: root mean square, weight only.
enum class NormKind { kLayerNorm, kRmsNorm };

}  // namespace rose
