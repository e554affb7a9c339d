#pragma once
// RoPE's inverse frequencies from a model's config: computed once on the host, then handed to the
// kernels of either backend as a plain (head_dim / 2) array.
#include "engine/model/config.h"

namespace rose {

// RoPE inverse frequencies as transformers computes them in fp32: 1 / theta^(2i / head_dim), then
// the llama3 adjustment when scaling.type == "llama3" (long wavelengths divided by factor, the band
// between high_freq and low_freq wavelengths interpolated).
void rope_inv_freq(int head_dim, float theta, const RopeScaling& scaling,
                   float* inv_freq);  // (head_dim / 2,)

}  // namespace rose
