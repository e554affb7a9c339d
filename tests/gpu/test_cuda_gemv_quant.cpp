// The quantized GEMV (kernels/cuda/gemv_quant.cu) against the CPU reference: rose::dequantize
// (engine/model/quant.cpp) then a dot product in double, for Q8_0, Q4_0, Q4_1, Q4_K and Q6_K at
// the projection shapes of llama-1b (hidden 2048, intermediate 8192, qkv 3072) and SmolLM2-135M
// (hidden 576, intermediate 1536, qkv 960; 576 is not a multiple of 256, so the K-quants run only
// its in = 1536 down projection), n = 1..4, bf16 and fp16 activations. And batch invariance: row r
// of y is bit-identical for every n.
//
// Tolerance: the kernel sums the same products in fp32 in another order (per-slice fma chains,
// scales folded per block, a 32-lane tree, up to 4 warps); each partial sum is at most ~50
// roundings deep (in = 8192, one warp per feature), so |y - ref| <= 50 * 2^-24 * sum|w x|
// = 3e-6 sum|w x|; the check allows 1e-5 sum|w x| (plus half an ulp of the output dtype where y
// is bf16/fp16). For Q4_1 and Q4_K, |w| there is |scale part| + |offset part| (magnitudes()). The
// activations are multiples of 1/128 in [-1, 1], exact in both bf16 and fp16, so one reference
// serves both dtypes and their fp32 outputs must be equal bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/safetensors.h"
#include "kernels/cuda/gemv_quant.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;

namespace {

constexpr int kMaxRows = kGemvQuantMaxRows;

// Byte offsets of each block's fp16 scale fields.
std::vector<int> half_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
      return {0, 2};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

// Random blocks: random quant bytes, fp16 scales of either sign with magnitudes in [1e-3, 0.05]
// (finite, not huge: outputs stay well inside fp16's range).
std::vector<uint8_t> random_blocks(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const int64_t blocks = rows * cols / traits.block_elems;
  std::vector<uint8_t> bytes(size_t(blocks * traits.block_bytes));
  for (uint8_t& b : bytes) b = uint8_t(rng());
  std::uniform_real_distribution<float> magnitude(1e-3f, 0.05f);
  for (int64_t i = 0; i < blocks; ++i) {
    for (int offset : half_offsets(type)) {
      const float value = (rng() & 1 ? -1.0f : 1.0f) * magnitude(rng);
      const uint16_t bits = f32_to_f16(value);
      bytes[size_t(i * traits.block_bytes + offset)] = uint8_t(bits);
      bytes[size_t(i * traits.block_bytes + offset + 1)] = uint8_t(bits >> 8);
    }
  }
  return bytes;
}

struct Reference {
  std::vector<double> y;  // (rows, out)
  std::vector<double>
      abs_sum;  // (rows, out): sum |w x| (see magnitudes), the rounding error's scale
};

// The same blocks with every term of a value made positive: |d| for the scales, and for the types
// with an offset (Q4_1: d q + m, Q4_K: dl q - ml) the offset's sign flipped to add, so the
// dequantized value is |scale part| + |offset part|. The kernel sums the two parts separately
// (d sum(q x) + m sum(x)), so its rounding error scales with these, not with |w| (which may
// cancel).
std::vector<uint8_t> magnitudes(GgmlType type, std::vector<uint8_t> bytes) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  for (size_t at = 0; at < bytes.size(); at += size_t(traits.block_bytes)) {
    for (int offset : half_offsets(type)) bytes[at + size_t(offset) + 1] &= 0x7F;
    if (type == GgmlType::kQ4_K) bytes[at + 3] |= 0x80;  // dmin -> -|dmin|: dl q + |dmin| m
  }
  return bytes;
}

// y = x W^T in double from the dequantized weights; x (kMaxRows, in), W (out, in) blocks.
Reference reference(GgmlType type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                    int in, int out) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const int64_t row_bytes = in / traits.block_elems * traits.block_bytes;
  Reference ref{std::vector<double>(size_t(kMaxRows) * out),
                std::vector<double>(size_t(kMaxRows) * out)};
  const std::vector<uint8_t> w_magnitude = magnitudes(type, w);
  std::vector<float> row(static_cast<size_t>(in)), row_magnitude(static_cast<size_t>(in));
  for (int o = 0; o < out; ++o) {
    dequantize(type, w.data() + o * row_bytes, row);
    dequantize(type, w_magnitude.data() + o * row_bytes, row_magnitude);
    for (int r = 0; r < kMaxRows; ++r) {
      double sum = 0.0, abs_sum = 0.0;
      for (int i = 0; i < in; ++i) {
        const double xi = x[size_t(r) * in + i];
        sum += double(row[size_t(i)]) * xi;
        abs_sum += std::fabs(double(row_magnitude[size_t(i)]) * xi);
      }
      ref.y[size_t(r) * out + o] = sum;
      ref.abs_sum[size_t(r) * out + o] = abs_sum;
    }
  }
  return ref;
}

// Multiples of 1/128 in [-1, 1]: exact in bf16 and fp16.
std::vector<float> random_activations(size_t count, std::mt19937& rng) {
  std::vector<float> x(count);
  for (float& v : x) v = float(int(rng() % 257) - 128) / 128.0f;
  return x;
}

std::vector<uint16_t> to_bits(const std::vector<float>& x, DType dtype) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bits[i] = dtype == DType::kBF16 ? gputest::f32_to_bf16_bits(x[i]) : f32_to_f16(x[i]);
  }
  return bits;
}

float from_bits(uint16_t bits, DType dtype) {
  if (dtype == DType::kBF16) return gputest::bf16_bits_to_f32(bits);
  const uint8_t bytes[2] = {uint8_t(bits), uint8_t(bits >> 8)};
  float value;
  convert_to_f32(Dtype::kF16, bytes, std::span<float>(&value, 1));
  return value;
}

const char* dtype_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

// |got - ref| <= 1e-5 sum|w x| (+ out_ulp |ref| for a rounded output) for rows < n.
void check_rows(const std::vector<float>& got, const Reference& ref, int n, int out, float out_ulp,
                const std::string& what) {
  size_t misses = 0;
  double worst = 0.0;
  for (size_t i = 0; i < size_t(n) * out; ++i) {
    const double err = std::fabs(double(got[i]) - ref.y[i]);
    const double bound = 1e-5 * ref.abs_sum[i] + out_ulp * std::fabs(ref.y[i]) + 1e-30;
    worst = std::max(worst, err / (ref.abs_sum[i] + 1e-30));
    if (!(err <= bound) && misses++ < 5) {
      MESSAGE(what << ": element " << i << " got " << got[i] << " want " << ref.y[i]);
    }
  }
  INFO(what << ": worst error / sum|w x| " << worst);
  CHECK(misses == 0);
}

struct Shape {
  int in, out;
};

void check_type_shape(GgmlType type, Shape shape, std::mt19937& rng) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const std::string name = std::string(traits.name) + " in " + std::to_string(shape.in) + " out " +
                           std::to_string(shape.out);
  REQUIRE(gemv_quant_supported(uint32_t(type), 1, shape.in));
  const std::vector<uint8_t> w = random_blocks(type, shape.out, shape.in, rng);
  REQUIRE(int64_t(w.size()) == shape.out * gemv_quant_row_bytes(uint32_t(type), shape.in));
  const std::vector<float> x = random_activations(size_t(kMaxRows) * shape.in, rng);
  const Reference ref = reference(type, w, x, shape.in, shape.out);
  gputest::DeviceArray<uint8_t> w_dev(w);
  std::vector<float> f32_by_dtype[2];
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    const std::string what = name + " " + dtype_name(dtype);
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, dtype));
    gputest::DeviceArray<float> y_dev(size_t(kMaxRows) * shape.out);
    gputest::DeviceArray<uint16_t> yt_dev(size_t(kMaxRows) * shape.out);
    std::vector<float> full;
    std::vector<uint16_t> full_t;
    for (int n = kMaxRows; n >= 1; --n) {
      y_dev.poison();
      yt_dev.poison();
      launch_gemv_quant(x_dev.get(), w_dev.get(), uint32_t(type), y_dev.get(), n, shape.in,
                        shape.out, true, dtype, nullptr);
      launch_gemv_quant(x_dev.get(), w_dev.get(), uint32_t(type), yt_dev.get(), n, shape.in,
                        shape.out, false, dtype, nullptr);
      const std::vector<float> y = y_dev.download();
      const std::vector<uint16_t> yt = yt_dev.download();
      if (n == kMaxRows) {
        full = y;
        full_t = yt;
        check_rows(y, ref, n, shape.out, 0.0f, what + " f32 out");
        std::vector<float> yt_f(yt.size());
        for (size_t i = 0; i < yt.size(); ++i) yt_f[i] = from_bits(yt[i], dtype);
        check_rows(yt_f, ref, n, shape.out, dtype == DType::kBF16 ? 1.0f / 256 : 1.0f / 2048,
                   what + " " + dtype_name(dtype) + " out");
      } else {
        // Batch invariance: rows 0..n-1 equal the n = 4 launch's bit for bit, and nothing past
        // row n - 1 was written (still the 0xFF poison).
        INFO(what << " n " << n);
        CHECK(std::memcmp(y.data(), full.data(), size_t(n) * shape.out * 4) == 0);
        CHECK(std::memcmp(yt.data(), full_t.data(), size_t(n) * shape.out * 2) == 0);
        CHECK(std::isnan(y[size_t(n) * shape.out]));
      }
    }
    f32_by_dtype[dtype == DType::kBF16 ? 0 : 1] = full;
  }
  INFO(name << ": bf16 and fp16 activations hold the same values, so the fp32 results agree");
  CHECK(std::memcmp(f32_by_dtype[0].data(), f32_by_dtype[1].data(), f32_by_dtype[0].size() * 4) ==
        0);
}

constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                               GgmlType::kQ6_K};

bool is_k_quant(GgmlType type) { return type == GgmlType::kQ4_K || type == GgmlType::kQ6_K; }

}  // namespace

TEST_CASE("quantized GEMV: llama-1b shapes, all five types, n = 1..4, bf16 and fp16") {
  std::mt19937 rng(1);
  // qkv (2048 -> 3072), o (2048 -> 2048), gate|up (2048 -> 16384), down (8192 -> 2048).
  for (GgmlType type : kTypes) {
    for (Shape shape :
         {Shape{2048, 3072}, Shape{2048, 2048}, Shape{2048, 16384}, Shape{8192, 2048}})
      check_type_shape(type, shape, rng);
  }
}

TEST_CASE("quantized GEMV: SmolLM2-135M shapes (K-quants only where in % 256 == 0)") {
  std::mt19937 rng(2);
  for (GgmlType type : kTypes) {
    if (!is_k_quant(type)) {
      // qkv (576 -> 960), o (576 -> 576), gate|up (576 -> 3072).
      for (Shape shape : {Shape{576, 960}, Shape{576, 576}, Shape{576, 3072}})
        check_type_shape(type, shape, rng);
    } else {
      CHECK_FALSE(gemv_quant_supported(uint32_t(type), 1, 576));
    }
    check_type_shape(type, Shape{1536, 576}, rng);  // down
  }
}

TEST_CASE("quantized GEMV: ragged shapes (one block, partial block groups, odd out)") {
  std::mt19937 rng(3);
  for (GgmlType type : kTypes) {
    const int elems = gemv_quant_block_elems(uint32_t(type));
    for (Shape shape : {Shape{elems, 1}, Shape{elems, 5}, Shape{3 * elems, 7}, Shape{9 * elems, 13},
                        Shape{40 * elems, 3}}) {
      check_type_shape(type, shape, rng);
    }
  }
}

TEST_CASE("quantized GEMV: fused gate|up SiLU against the reference, rows invariant across n") {
  std::mt19937 rng(4);
  for (GgmlType type : kTypes) {
    for (Shape shape : {Shape{2048, 8192}, Shape{1536, 256}}) {
      const GgmlTypeTraits& traits = ggml_type_traits(type);
      CAPTURE(traits.name);
      CAPTURE(shape.in);
      const std::vector<uint8_t> w = random_blocks(type, 2 * shape.out, shape.in, rng);
      const std::vector<float> x = random_activations(size_t(kMaxRows) * shape.in, rng);
      const Reference ref = reference(type, w, x, shape.in, 2 * shape.out);  // gate | up columns
      gputest::DeviceArray<uint8_t> w_dev(w);
      for (DType dtype : {DType::kBF16, DType::kFP16}) {
        gputest::DeviceArray<uint16_t> x_dev(to_bits(x, dtype));
        gputest::DeviceArray<uint16_t> y_dev(size_t(kMaxRows) * shape.out);
        std::vector<uint16_t> full;
        for (int n = kMaxRows; n >= 1; --n) {
          launch_gemv_quant_silu_mul(x_dev.get(), w_dev.get(), uint32_t(type), y_dev.get(), n,
                                     shape.in, shape.out, dtype, nullptr);
          const std::vector<uint16_t> y = y_dev.download();
          if (n < kMaxRows) {
            CHECK(std::memcmp(y.data(), full.data(), size_t(n) * shape.out * 2) == 0);
            continue;
          }
          full = y;
          size_t misses = 0;
          for (int r = 0; r < n; ++r) {
            for (int o = 0; o < shape.out; ++o) {
              const size_t g = size_t(r) * 2 * shape.out + o, u = g + shape.out;
              const double gate = ref.y[g], up = ref.y[u];
              const double silu = gate / (1.0 + std::exp(-gate));
              const double want = silu * up;
              // silu' is within [-0.1, 1.1]: the gate's error moves silu by at most 1.1 times it.
              const double bound =
                  1.1 * std::fabs(up) * 1e-5 * ref.abs_sum[g] +
                  std::fabs(silu) * 1e-5 * ref.abs_sum[u] +
                  (dtype == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048) * std::fabs(want) +
                  1e-6 * (std::fabs(silu) + std::fabs(up));
              const double got = from_bits(y[size_t(r) * shape.out + o], dtype);
              // gate * up can pass fp16's largest finite value (65504): rounding then gives inf of
              // the same sign, which is the right answer (seen on the H100 with random scales).
              const bool fp16_overflow = dtype == DType::kFP16 && std::isinf(got) &&
                                         (got > 0) == (want > 0) &&
                                         std::fabs(want) + bound >= 65520.0;
              if (!(std::fabs(got - want) <= bound) && !fp16_overflow && misses++ < 5)
                MESSAGE(dtype_name(dtype)
                        << " row " << r << " feature " << o << " got " << got << " want " << want);
            }
          }
          CHECK(misses == 0);
        }
      }
    }
  }
}

TEST_CASE("quantized GEMV: the shape checks") {
  CHECK(gemv_quant_type_supported(uint32_t(GgmlType::kQ4_K)));
  CHECK_FALSE(gemv_quant_type_supported(uint32_t(GgmlType::kQ5_0)));
  CHECK_FALSE(gemv_quant_supported(uint32_t(GgmlType::kQ8_0), 5, 64));
  CHECK_FALSE(gemv_quant_supported(uint32_t(GgmlType::kQ8_0), 0, 64));
  CHECK_FALSE(gemv_quant_supported(uint32_t(GgmlType::kQ4_K), 1, 576));
  CHECK(gemv_quant_row_bytes(uint32_t(GgmlType::kQ6_K), 2048) == 8 * 210);
}

TEST_CASE("quantized GEMV: row ranges of different types fill one output through y_stride") {
  // A GGUF q | k | v (or gate | up) may mix types, e.g. Q4_K_M's Q4_K q and k beside a Q6_K v: each
  // range runs as its own launch into its columns of the shared output, whose rows are y_stride
  // apart. The result equals each range's own reference, and columns outside a range are left
  // alone.
  std::mt19937 rng(5);
  const int in = 512, out_a = 24, out_b = 40, total = out_a + out_b;
  const GgmlType type_a = GgmlType::kQ4_K, type_b = GgmlType::kQ6_K;
  const std::vector<uint8_t> w_a = random_blocks(type_a, out_a, in, rng);
  const std::vector<uint8_t> w_b = random_blocks(type_b, out_b, in, rng);
  const std::vector<float> x = random_activations(size_t(kMaxRows) * in, rng);
  const Reference ref_a = reference(type_a, w_a, x, in, out_a);
  const Reference ref_b = reference(type_b, w_b, x, in, out_b);
  gputest::DeviceArray<uint8_t> w_a_dev(w_a), w_b_dev(w_b);
  gputest::DeviceArray<uint16_t> x_dev(to_bits(x, DType::kBF16));
  gputest::DeviceArray<float> y_dev(size_t(kMaxRows) * total);
  for (int n = 1; n <= kMaxRows; ++n) {
    CAPTURE(n);
    y_dev.poison();
    launch_gemv_quant(x_dev.get(), w_a_dev.get(), uint32_t(type_a), y_dev.get(), n, in, out_a, true,
                      DType::kBF16, nullptr, total);
    launch_gemv_quant(x_dev.get(), w_b_dev.get(), uint32_t(type_b), y_dev.get() + out_a, n, in,
                      out_b, true, DType::kBF16, nullptr, total);
    const std::vector<float> y = y_dev.download();
    std::vector<float> got_a(size_t(n) * out_a), got_b(size_t(n) * out_b);
    for (int r = 0; r < n; ++r) {
      for (int o = 0; o < out_a; ++o) got_a[size_t(r) * out_a + o] = y[size_t(r) * total + o];
      for (int o = 0; o < out_b; ++o)
        got_b[size_t(r) * out_b + o] = y[size_t(r) * total + out_a + o];
    }
    check_rows(got_a, ref_a, n, out_a, 0.0f, "Q4_K range");
    check_rows(got_b, ref_b, n, out_b, 0.0f, "Q6_K range");
    if (n < kMaxRows) CHECK(std::isnan(y[size_t(n) * total]));  // row n was not written
  }
}
