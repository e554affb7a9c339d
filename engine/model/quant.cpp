#include "engine/model/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/common/error.h"
#include "engine/model/safetensors.h"

namespace rose {

namespace {

constexpr GgmlTypeTraits kTraits[] = {
    {GgmlType::kF32, "F32", 1, 4},       {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kBF16, "BF16", 1, 2},     {GgmlType::kQ4_0, "Q4_0", 32, 18},
    {GgmlType::kQ4_1, "Q4_1", 32, 20},   {GgmlType::kQ5_0, "Q5_0", 32, 22},
    {GgmlType::kQ5_1, "Q5_1", 32, 24},   {GgmlType::kQ8_0, "Q8_0", 32, 34},
    {GgmlType::kQ2_K, "Q2_K", 256, 84},  {GgmlType::kQ3_K, "Q3_K", 256, 110},
    {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210},
};

// Names of the ids we know of but cannot read, so errors say what the file holds.
const char* unsupported_type_name(uint32_t id) {
  switch (id) {
    case 9:
      return "Q8_1";
    case 15:
      return "Q8_K";
    case 16:
      return "IQ2_XXS";
    case 17:
      return "IQ2_XS";
    case 18:
      return "IQ3_XXS";
    case 19:
      return "IQ1_S";
    case 20:
      return "IQ4_NL";
    case 21:
      return "IQ3_S";
    case 22:
      return "IQ2_S";
    case 23:
      return "IQ4_XS";
    case 24:
      return "I8";
    case 25:
      return "I16";
    case 26:
      return "I32";
    case 27:
      return "I64";
    case 28:
      return "F64";
    case 29:
      return "IQ1_M";
    case 34:
      return "TQ1_0";
    case 35:
      return "TQ2_0";
    case 39:
      return "MXFP4";
    default:
      return "unknown";
  }
}

float half_at(const uint8_t* p) {
  float value;
  convert_to_f32(Dtype::kF16, p, std::span<float>(&value, 1));
  return value;
}

// 32-element blocks: the low nibble of byte j is element j, the high nibble element j + 16.
void dequantize_q4(const uint8_t* block, bool has_min, float* y) {
  const float d = half_at(block);
  const float m = has_min ? half_at(block + 2) : 0.0f;
  const uint8_t* qs = block + (has_min ? 4 : 2);
  const int offset = has_min ? 0 : 8;  // Q4_0 is symmetric around 8
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float((qs[j] & 0x0F) - offset) + m;
    y[j + 16] = d * float((qs[j] >> 4) - offset) + m;
  }
}

// Q5_0 / Q5_1: a 4-bit nibble as in Q4 plus a fifth bit, bit j of the u32 qh for element j.
void dequantize_q5(const uint8_t* block, bool has_min, float* y) {
  const float d = half_at(block);
  const float m = has_min ? half_at(block + 2) : 0.0f;
  const uint8_t* p = block + (has_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  const int offset = has_min ? 0 : 16;
  for (int j = 0; j < 16; ++j) {
    const int low = (qs[j] & 0x0F) | int((qh >> j) & 1u) << 4;
    const int high = (qs[j] >> 4) | int((qh >> (j + 16)) & 1u) << 4;
    y[j] = d * float(low - offset) + m;
    y[j + 16] = d * float(high - offset) + m;
  }
}

void dequantize_q8_0(const uint8_t* block, float* y) {
  const float d = half_at(block);
  for (int j = 0; j < 32; ++j) y[j] = d * float(int8_t(block[2 + j]));
}

// Q2_K: scales[16] (scale low nibble, min high nibble; one per 16 elements), qs[64], d, dmin.
// Each 128-element half reads 32 bytes of qs four times at shifts 0, 2, 4, 6.
void dequantize_q2_k(const uint8_t* block, float* y) {
  const uint8_t* scales = block;
  const uint8_t* qs = block + 16;
  const float d = half_at(block + 80);
  const float dmin = half_at(block + 82);
  int group = 0;
  for (int half = 0; half < 2; ++half, qs += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part, ++group) {
        const float scale = d * float(scales[group] & 0x0F);
        const float min = dmin * float(scales[group] >> 4);
        for (int l = 0; l < 16; ++l) *y++ = scale * float((qs[16 * part + l] >> shift) & 3) - min;
      }
    }
  }
}

// Q3_K: hmask[32], qs[64], scales[12] (sixteen 6-bit values, low nibbles in bytes 0-7, high two
// bits in bytes 8-11), d. A clear hmask bit subtracts 4 from the 2-bit value.
void dequantize_q3_k(const uint8_t* block, float* y) {
  const uint8_t* hmask = block;
  const uint8_t* qs = block + 32;
  const uint8_t* packed = block + 96;
  const float d = half_at(block + 108);
  int scales[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 0x0F : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = (low | high << 4) - 32;
  }
  int group = 0;
  int mask_bit = 0;
  for (int half = 0; half < 2; ++half, qs += 32) {
    for (int shift = 0; shift < 8; shift += 2, ++mask_bit) {
      for (int part = 0; part < 2; ++part, ++group) {
        const float scale = d * float(scales[group]);
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * part + l;
          const int q = ((qs[i] >> shift) & 3) - (((hmask[i] >> mask_bit) & 1) ? 0 : 4);
          *y++ = scale * float(q);
        }
      }
    }
  }
}

// Q4_K / Q5_K: eight sub-blocks of 32, each with a 6-bit scale and min packed in 12 bytes.
void scale_min_k4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: d, dmin, scales[12], qs[128]; Q5_K adds qh[32] before qs, whose bits 2c / 2c+1 give the
// fifth bit of the low / high nibbles of chunk c.
void dequantize_q45_k(const uint8_t* block, bool five_bit, float* y) {
  const float d = half_at(block);
  const float dmin = half_at(block + 2);
  const uint8_t* packed = block + 4;
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + (five_bit ? 48 : 16);
  for (int chunk = 0; chunk < 4; ++chunk, qs += 32) {
    for (int nibble = 0; nibble < 2; ++nibble) {
      int scale, min;
      scale_min_k4(2 * chunk + nibble, packed, &scale, &min);
      const float dl = d * float(scale);
      const float ml = dmin * float(min);
      for (int l = 0; l < 32; ++l) {
        int q = nibble ? qs[l] >> 4 : qs[l] & 0x0F;
        if (five_bit && ((qh[l] >> (2 * chunk + nibble)) & 1)) q += 16;
        *y++ = dl * float(q) - ml;
      }
    }
  }
}

// Q6_K: ql[128], qh[64], int8 scales[16], d. Two halves of 128 elements.
void dequantize_q6_k(const uint8_t* block, float* y) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(block + 192);
  const float d = half_at(block + 208);
  for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
  }
}

// ---- fp32 -> blocks ----

void put_half(uint8_t* p, uint16_t bits) {
  p[0] = uint8_t(bits);
  p[1] = uint8_t(bits >> 8);
}

float half_value(uint16_t bits) {
  const uint8_t bytes[2] = {uint8_t(bits), uint8_t(bits >> 8)};
  return half_at(bytes);
}

// The smallest fp16 not below v (v >= 0), so a scale chosen from it never falls short of v.
uint16_t half_at_least(float v) {
  uint16_t bits = f32_to_f16(v);
  if (half_value(bits) < v && bits < 0x7C00u) ++bits;  // positive halves are ordered by their bits
  return bits;
}

// ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d). The clamp changes no finite
// result (|x id| <= 127 up to rounding) but keeps a NaN from reaching the int conversion.
void quantize_q8_0(const float* x, uint8_t* block) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(block, f32_to_f16(d));
  for (int j = 0; j < 32; ++j) {
    const float t = std::fmin(std::fmax(x[j] * id, -127.0f), 127.0f);
    block[2 + j] = uint8_t(int8_t(std::round(t)));
  }
}

// ggml's quantize_row_q4_0_ref: d = (the value of largest magnitude, first one on ties) / -8 and
// q = min(15, trunc(x / d + 8.5)), so that value codes as 0 and its negation clips at 15.
void quantize_q4_0(const float* x, uint8_t* block) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(block, f32_to_f16(d));
  auto code = [id](float v) {
    return uint8_t(std::fmin(std::fmax(v * id + 8.5f, 0.0f), 15.0f));  // truncates, as ggml's cast
  };
  for (int j = 0; j < 16; ++j) block[2 + j] = uint8_t(code(x[j]) | code(x[j + 16]) << 4);
}

// Q4_K, our own fit (quant.h): each 32-element sub-block j spans [lo_j, hi_j] = [min(0, min x),
// max(0, max x)]; its min offset -lo_j is coded as m_j dmin (to nearest), then its step as sc_j d,
// rounded up from (hi_j + m_j dmin) / 15 so the top element needs no clipping. dmin and d are the
// smallest fp16 values that let the largest offset / step fit in 6 bits.
void quantize_q4_k(const float* x, uint8_t* block) {
  float offset[8], top[8];
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);  // NaN compares false and is skipped
      hi = std::max(hi, x[32 * j + l]);
    }
    offset[j] = -lo;
    top[j] = hi;
  }
  const uint16_t dmin_bits = half_at_least(*std::max_element(offset, offset + 8) / 63);
  const float dmin = half_value(dmin_bits);
  int min_code[8], scale_code[8];
  float ml[8], step[8];
  for (int j = 0; j < 8; ++j) {
    min_code[j] = dmin > 0.0f ? int(std::fmin(std::round(offset[j] / dmin), 63.0f)) : 0;
    ml[j] = dmin * float(min_code[j]);  // as the decoder computes it
    step[j] = std::max(0.0f, (top[j] + ml[j]) / 15);
  }
  const uint16_t d_bits = half_at_least(*std::max_element(step, step + 8) / 63);
  const float d = half_value(d_bits);
  for (int j = 0; j < 8; ++j) {
    const float ratio = d > 0.0f ? std::ceil(step[j] / d) : 0.0f;
    scale_code[j] = int(std::fmin(std::fmax(ratio, 0.0f), 63.0f));
  }
  put_half(block, d_bits);
  put_half(block + 2, dmin_bits);
  // The packing get_scale_min_k4 reads (scale_min_k4 above): sub-blocks 0-3 in the low 6 bits of
  // bytes 0-3 (scale) and 4-7 (min); 4-7 in the nibbles of bytes 8-11 plus the top 2 bits of 0-7.
  uint8_t* packed = block + 4;
  for (int j = 0; j < 4; ++j) {
    packed[j] = uint8_t(scale_code[j] | (scale_code[j + 4] >> 4) << 6);
    packed[j + 4] = uint8_t(min_code[j] | (min_code[j + 4] >> 4) << 6);
    packed[j + 8] = uint8_t((scale_code[j + 4] & 0x0F) | (min_code[j + 4] & 0x0F) << 4);
  }
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float dl = d * float(scale_code[j]);
    for (int l = 0; l < 32; ++l) {
      const float t = dl > 0.0f ? (x[32 * j + l] + ml[j]) / dl : 0.0f;
      q[32 * j + l] = uint8_t(std::round(std::fmin(std::fmax(t, 0.0f), 15.0f)));
    }
  }
  // Chunk c's 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high ones.
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l)
      block[16 + 32 * c + l] = uint8_t(q[64 * c + l] | q[64 * c + 32 + l] << 4);
  }
}

// Q6_K, our own fit (quant.h): each 16-element sub-block j is coded symmetrically, q in [-32, 31];
// its step, at least amax_j / 31 so no element clips, is sc_j d with sc_j an int8 rounded up and d
// the smallest fp16 that lets the largest step fit in 127. Stored as q + 32 in 6 bits.
void quantize_q6_k(const float* x, uint8_t* block) {
  float step[16];
  for (int j = 0; j < 16; ++j) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));  // NaN skipped
    step[j] = amax / 31;
  }
  const uint16_t d_bits = half_at_least(*std::max_element(step, step + 16) / 127);
  const float d = half_value(d_bits);
  uint8_t q[256];  // q + 32, 0..63
  for (int j = 0; j < 16; ++j) {
    const float ratio = d > 0.0f ? std::ceil(step[j] / d) : 0.0f;
    const int scale_code = int(std::fmin(std::fmax(ratio, 0.0f), 127.0f));  // NaN -> 0
    block[192 + j] = uint8_t(int8_t(scale_code));
    const float dl = d * float(scale_code);
    for (int l = 0; l < 16; ++l) {
      const float t = dl > 0.0f ? x[16 * j + l] / dl : 0.0f;
      q[16 * j + l] = uint8_t(int(std::round(std::fmin(std::fmax(t, -32.0f), 31.0f))) + 32);
    }
  }
  // The layout dequantize_q6_k reads: in half h, for l < 32, elements 128h + l + 32k (k = 0..3)
  // keep their low nibbles in ql[64h + l] (k = 0, 2) and ql[64h + l + 32] (k = 1, 3) and their top
  // 2 bits in qh[32h + l] at bits 2k; sub-block j's scale is byte 192 + j; d is bytes 208-209.
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* e = q + 128 * h + l;
      ql[64 * h + l] = uint8_t((e[0] & 0x0F) | (e[64] & 0x0F) << 4);
      ql[64 * h + l + 32] = uint8_t((e[32] & 0x0F) | (e[96] & 0x0F) << 4);
      qh[32 * h + l] =
          uint8_t(e[0] >> 4 | (e[32] >> 4) << 2 | (e[64] >> 4) << 4 | (e[96] >> 4) << 6);
    }
  }
  put_half(block + 208, d_bits);
}

}  // namespace

bool quantize_supported(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_K ||
         type == GgmlType::kQ6_K;
}

void quantize(GgmlType type, std::span<const float> src, uint8_t* dst) {
  ROSE_ASSERT(quantize_supported(type));
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  ROSE_ASSERT(int64_t(src.size()) % traits.block_elems == 0);
  const int64_t blocks = int64_t(src.size()) / traits.block_elems;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* x = src.data() + b * traits.block_elems;
    uint8_t* block = dst + b * traits.block_bytes;
    if (type == GgmlType::kQ8_0) {
      quantize_q8_0(x, block);
    } else if (type == GgmlType::kQ4_0) {
      quantize_q4_0(x, block);
    } else if (type == GgmlType::kQ4_K) {
      quantize_q4_k(x, block);
    } else {
      quantize_q6_k(x, block);
    }
  }
}

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id) {
  for (const GgmlTypeTraits& traits : kTraits) {
    if (uint32_t(traits.type) == type_id) return traits;
  }
  return std::nullopt;
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) {
  for (const GgmlTypeTraits& traits : kTraits) {
    if (traits.type == type) return traits;
  }
  ROSE_ASSERT(false);
  return kTraits[0];
}

const char* ggml_type_name(uint32_t type_id) {
  if (auto traits = ggml_type_traits(type_id)) return traits->name;
  return unsupported_type_name(type_id);
}

void dequantize(GgmlType type, const uint8_t* src, std::span<float> dst) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  ROSE_ASSERT(int64_t(dst.size()) % traits.block_elems == 0);
  switch (type) {
    case GgmlType::kF32:
      convert_to_f32(Dtype::kF32, src, dst);
      return;
    case GgmlType::kF16:
      convert_to_f32(Dtype::kF16, src, dst);
      return;
    case GgmlType::kBF16:
      convert_to_f32(Dtype::kBF16, src, dst);
      return;
    default:
      break;
  }
  const int64_t blocks = int64_t(dst.size()) / traits.block_elems;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = src + b * traits.block_bytes;
    float* y = dst.data() + b * traits.block_elems;
    switch (type) {
      case GgmlType::kQ4_0:
        dequantize_q4(block, false, y);
        break;
      case GgmlType::kQ4_1:
        dequantize_q4(block, true, y);
        break;
      case GgmlType::kQ5_0:
        dequantize_q5(block, false, y);
        break;
      case GgmlType::kQ5_1:
        dequantize_q5(block, true, y);
        break;
      case GgmlType::kQ8_0:
        dequantize_q8_0(block, y);
        break;
      case GgmlType::kQ2_K:
        dequantize_q2_k(block, y);
        break;
      case GgmlType::kQ3_K:
        dequantize_q3_k(block, y);
        break;
      case GgmlType::kQ4_K:
        dequantize_q45_k(block, false, y);
        break;
      case GgmlType::kQ5_K:
        dequantize_q45_k(block, true, y);
        break;
      case GgmlType::kQ6_K:
        dequantize_q6_k(block, y);
        break;
      default:
        ROSE_ASSERT(false);
    }
  }
}

}  // namespace rose
