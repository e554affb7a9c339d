// fp32 -> ggml blocks (rose::quantize, engine/model/quant.cpp): Q8_0 and Q4_0 against the bytes the
// Python gguf package writes for the same matrix (tests/fixtures/gguf/quantize_ref.gguf, written
// by scripts/make_quantize_fixture.py; gguf.quants follows ggml's reference quantizers), and all
// four types round-tripped through the reference dequantizer within the error bounds quant.h
// states.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/model/quant.h"
#include "engine/model/safetensors.h"

using namespace rose;

namespace {

std::vector<uint8_t> quantized(GgmlType type, const std::vector<float>& x) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  std::vector<uint8_t> bytes(x.size() / size_t(traits.block_elems) * size_t(traits.block_bytes));
  quantize(type, x, bytes.data());
  return bytes;
}

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  const std::vector<uint8_t> bytes = quantized(type, x);
  std::vector<float> y(x.size());
  dequantize(type, bytes.data(), y);
  return y;
}

float half_field(const uint8_t* p) {
  float value;
  convert_to_f32(Dtype::kF16, p, std::span<float>(&value, 1));
  return value;
}

// Random normal rows at several magnitudes (weights are ~0.02; activations and outliers larger).
std::vector<float> normal_rows(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count);
  const float scales[] = {0.02f, 1.0f, 37.0f, 0.01f};  // Q8_0's d stays a normal fp16
  for (size_t i = 0; i < count; ++i) x[i] = normal(rng) * scales[(i / 512) % 4];
  return x;
}

}  // namespace

TEST_CASE("Q8_0 and Q4_0 write the gguf package's bytes (ggml's reference quantizers)") {
  const GgufFile file = GgufFile::open("tests/fixtures/gguf/quantize_ref.gguf");
  const GgufTensor& input = file.tensor("input");
  std::vector<float> x(size_t(input.numel()));
  file.read_f32(input, x);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    const GgmlTypeTraits& traits = ggml_type_traits(type);
    CAPTURE(traits.name);
    const GgufTensor& want = file.tensor(traits.name);
    REQUIRE(want.type == type);
    const std::vector<uint8_t> got = quantized(type, x);
    REQUIRE(got.size() == want.bytes);
    int64_t bad_blocks = 0;
    for (size_t b = 0; b < got.size() / size_t(traits.block_bytes); ++b) {
      const size_t at = b * size_t(traits.block_bytes);
      if (std::memcmp(got.data() + at, want.data + at, size_t(traits.block_bytes)) == 0) continue;
      if (bad_blocks++ < 3) MESSAGE(traits.name << ": block " << b << " differs");
    }
    CHECK(bad_blocks == 0);
  }
}

TEST_CASE("Q8_0 round trip: |error| < 0.57 d per block, d = amax / 127") {
  const std::vector<float> x = normal_rows(4096, 1);
  const std::vector<float> y = round_trip(GgmlType::kQ8_0, x);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = 32 * b + j;
      INFO("element " << i << " x " << x[i] << " y " << y[i]);
      REQUIRE(std::fabs(x[i] - y[i]) <= 0.57f * amax / 127);
    }
  }
}

TEST_CASE("Q4_0 round trip: |error| <= d (a full step only where -max clips), d = |max| / 8") {
  const std::vector<float> x = normal_rows(4096, 2);
  const std::vector<float> y = round_trip(GgmlType::kQ4_0, x);
  double sum_error = 0.0, sum_step = 0.0;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float d = amax / 8;
    for (size_t j = 0; j < 32; ++j) {
      const size_t i = 32 * b + j;
      INFO("element " << i << " x " << x[i] << " y " << y[i]);
      REQUIRE(std::fabs(x[i] - y[i]) <= 1.01f * d);
      sum_error += std::fabs(x[i] - y[i]);
      sum_step += d;
    }
  }
  // Rounding to nearest: the mean error is about a quarter step, far below the worst case.
  CHECK(sum_error / sum_step < 0.3);
}

namespace {

// The decoded steps of one Q4_K block: dl[j] = d sc_j and dmin (get_scale_min_k4's packing).
struct Q4kSteps {
  float dl[8];
  float dmin;
};
Q4kSteps q4k_steps(const uint8_t* block) {
  Q4kSteps s;
  const float d = half_field(block);
  s.dmin = half_field(block + 2);
  const uint8_t* q = block + 4;
  for (int j = 0; j < 8; ++j) {
    const int scale = j < 4 ? q[j] & 63 : (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    s.dl[j] = d * float(scale);
  }
  return s;
}

void check_q4_k(const std::vector<float>& x) {
  const std::vector<uint8_t> bytes = quantized(GgmlType::kQ4_K, x);
  std::vector<float> y(x.size());
  dequantize(GgmlType::kQ4_K, bytes.data(), y);
  for (size_t b = 0; b < x.size() / 256; ++b) {
    const Q4kSteps steps = q4k_steps(bytes.data() + 144 * b);
    float lo = 0.0f, hi = 0.0f;
    for (size_t e = 0; e < 256; ++e) {
      lo = std::min(lo, x[256 * b + e]);
      hi = std::max(hi, x[256 * b + e]);
    }
    for (size_t e = 0; e < 256; ++e) {
      const size_t i = 256 * b + e;
      const float err = std::fabs(x[i] - y[i]);
      INFO("block " << b << " element " << e << " x " << x[i] << " y " << y[i]);
      REQUIRE(std::isfinite(y[i]));
      // Half a coded step of its sub-block (or half a min step where the min rounded up), plus
      // fp32 rounding of the decode ...
      const float bound = 0.5f * std::max(steps.dl[e / 32], steps.dmin);
      REQUIRE(err <= bound * 1.0001f + 1e-6f * (hi - lo));
      // ... which is a little over half the block's range / 15, or half the smallest fp16 step
      // (2^-24) for blocks too small for normal fp16 scales.
      REQUIRE(err <= 0.6f * (hi - lo) / 15 + std::ldexp(1.0001f, -25));
    }
  }
}

// Four 256-element blocks of sub-blocks (sub_elems each, per_block to a block) of very different
// ranges in one block, all-negative, all-positive, constant and zero; the last block's values are
// small enough for subnormal fp16 steps.
std::vector<float> hard_sub_blocks(size_t sub_elems, size_t per_block, uint32_t seed) {
  std::vector<float> x(256 * 4);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t sub = i / sub_elems, kind = sub % per_block;
    const float scale = kind == 0 ? 1000.0f : kind == 1 ? 1e-3f : 1.0f;
    x[i] = uniform(rng) * scale;
    if (kind == 2) x[i] = -std::fabs(x[i]) - 0.5f;
    if (kind == 3) x[i] = std::fabs(x[i]) + 2.0f;
    if (kind == 4) x[i] = 0.25f;
    if (kind == 5) x[i] = 0.0f;
    if (sub >= 3 * per_block) x[i] = uniform(rng) * 1e-7f;
  }
  return x;
}

}  // namespace

TEST_CASE("Q4_K round trip: within half a coded step of each sub-block") {
  check_q4_k(normal_rows(8192, 3));
  check_q4_k(hard_sub_blocks(32, 8, 4));
  check_q4_k(std::vector<float>(256, 0.0f));
}

namespace {

// Q6_K: every element within half its sub-block's coded step d sc_j (sc_j the int8 at byte 192 +
// j, d the fp16 at 208), and that step between the sub-block's amax / 31 (so nothing clips) and
// one d more (sc_j is amax / 31 / d rounded up), up to fp32 rounding.
void check_q6_k(const std::vector<float>& x) {
  const std::vector<uint8_t> bytes = quantized(GgmlType::kQ6_K, x);
  std::vector<float> y(x.size());
  dequantize(GgmlType::kQ6_K, bytes.data(), y);
  for (size_t b = 0; b < x.size() / 256; ++b) {
    const uint8_t* block = bytes.data() + 210 * b;
    const float d = half_field(block + 208);
    float block_amax = 0.0f;
    for (size_t e = 0; e < 256; ++e) block_amax = std::max(block_amax, std::fabs(x[256 * b + e]));
    for (size_t j = 0; j < 16; ++j) {
      const float dl = d * float(int8_t(block[192 + j]));
      float amax = 0.0f;
      for (size_t l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[256 * b + 16 * j + l]));
      INFO("block " << b << " sub-block " << j << " amax " << amax << " dl " << dl);
      REQUIRE(dl >= 0.0f);
      REQUIRE(dl * 31 >= amax * 0.9999f);  // no element clips
      REQUIRE(dl <= (amax / 31 + d) * 1.0001f);
      for (size_t l = 0; l < 16; ++l) {
        const size_t i = 256 * b + 16 * j + l;
        INFO("element " << i << " x " << x[i] << " y " << y[i]);
        REQUIRE(std::isfinite(y[i]));
        REQUIRE(std::fabs(x[i] - y[i]) <= 0.5f * dl * 1.0001f + 1e-6f * block_amax);
      }
    }
  }
}

}  // namespace

TEST_CASE("Q6_K round trip: within half a coded step of each sub-block") {
  check_q6_k(normal_rows(8192, 5));
  check_q6_k(hard_sub_blocks(16, 16, 6));
  check_q6_k(std::vector<float>(256, 0.0f));
  // The layout: neighbouring elements 1 apart and each 64-element quarter at another scale, so an
  // element read back from another's bits or another sub-block's scale misses by far more than
  // half a step.
  std::vector<float> ramp(256);
  for (size_t e = 0; e < 256; ++e) ramp[e] = float(int(e % 64) - 32) * float(1 + e / 64);
  check_q6_k(ramp);
}

TEST_CASE("quantize: non-finite inputs give some blocks without undefined behaviour") {
  std::vector<float> x(256, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[40] = std::numeric_limits<float>::infinity();
  x[77] = -std::numeric_limits<float>::infinity();
  x[200] = 3e38f;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    CAPTURE(ggml_type_traits(type).name);
    CHECK(quantize_supported(type));
    CHECK(quantized(type, x).size() == 256 / size_t(ggml_type_traits(type).block_elems) *
                                           size_t(ggml_type_traits(type).block_bytes));
  }
  CHECK_FALSE(quantize_supported(GgmlType::kQ4_1));
  CHECK_FALSE(quantize_supported(GgmlType::kQ5_K));
}
