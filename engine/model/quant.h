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

// Whether `quantize` writes this type: Q8_0, Q4_0, Q4_K and Q6_K.
bool quantize_supported(GgmlType type);

// Quantizes src.size() elements (a multiple of the block size) into src.size() / block_elems
// blocks of `type` at `dst` (for --quantize on presets and safetensors models, and tests).
//   Q8_0, Q4_0: ggml's reference quantizers (quantize_row_q8_0_ref / q4_0_ref), reproduced bit for
//     bit (tests/fixtures/gguf/quantize_ref.gguf, written by the gguf package): d = amax / 127 and
//     q = round(x / d) half away from zero (|error| <= d/2 + 127 |d - fp16(d)| < 0.57 d while d is
//     a normal fp16); Q4_0 takes d = the signed value of largest magnitude / -8 and q = min(15,
//     trunc(x / d + 8.5))
//     (|error| <= d/2, but a full step d for elements near -max, which clip at q = 15).
//   Q4_K: our own fit, simpler than ggml's iterative search: per 32-element sub-block, the min is
//     min(0, min x) and the step (max x + min') / 15; the eight mins and steps are coded as 6-bit
//     multiples of fp16 dmin and d chosen so the largest fits (rounded up), mins to nearest and
//     steps up, so no element clips beyond rounding. |error| <= max(dl/2, dmin/2) per element, dl =
//     d sc the sub-block's coded step (a little over range/15).
//   Q6_K: our own fit, symmetric: per 16-element sub-block the step is amax / 31 (so q = round(x /
//     step) stays in [-32, 31]), coded as an int8 multiple (rounded up) of the fp16 d that lets the
//     largest fit in 127. |error| <= dl/2 per element, dl = d sc (a little over amax/31).
// Non-finite inputs give blocks with unspecified but finite-or-not values; no UB.
void quantize(GgmlType type, std::span<const float> src, uint8_t* dst);

}  // namespace rose
