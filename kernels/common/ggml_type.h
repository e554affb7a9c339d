#pragma once
// The ggml tensor type ids, shared by the GGUF reader and its CPU dequantization (engine/model) and
// the CUDA decoders (kernels/cuda/dequant.cu), so the list is written once.
#include <cstdint>

namespace rose {

// ggml_type ids as stored in GGUF tensor infos (ggml docs/gguf.md). Only the ones we can read.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

}  // namespace rose
