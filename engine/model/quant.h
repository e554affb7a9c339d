#pragma once
// ggml tensor types (the ids GGUF files store): block geometry, names, and the plain C++
// dequantization every backend can fall back on (the CPU reference).
#include <cstdint>
#include <optional>
#include <span>

#include "kernels/common/ggml_type.h"

namespace rose {

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;     // ggml's spelling: "Q4_K", "F16", ...
  int64_t block_elems;  // elements per block (1 for float types)
  int64_t block_bytes;  // bytes per block
};

// The traits of a stored type id, or nullopt for ids we cannot dequantize (IQ*, retired ids...).
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);
// A name for any id, known or not ("IQ2_XXS", "type 4 (retired)", ...), for error messages.
const char* ggml_type_name(uint32_t type_id);

// Dequantizes dst.size() elements (a multiple of the block size) from `src`, which holds
// dst.size() / block_elems blocks of `type`.
void dequantize(GgmlType type, const uint8_t* src, std::span<float> dst);

}  // namespace rose
