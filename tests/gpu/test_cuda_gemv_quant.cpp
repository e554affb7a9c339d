// The quantized GEMV (kernels/cuda/gemv_quant.cu) against CPU references, for Q8_0, Q4_0, Q4_1,
// Q4_K and Q6_K at the projection shapes of llama-1b (hidden 2048, intermediate 8192, qkv 3072),
// llama-8b (hidden 4096, intermediate 14336, qkv 6144) and SmolLM2-135M (hidden 576, intermediate
// 1536, qkv 960; 576 is not a multiple of 256, so the K-quants run only its in = 1536 down
// projection), n = 1..kGemvQuantMaxRows, bf16 and fp16 activations; batch invariance (row r of y
// is bit-identical for every n); the fused gate|up SiLU; the direct kernel (every type)
// against the staged one, bit for bit, on every epilogue, and on NaN, inf and subnormal x (their
// x quantizations are laid out differently: quantize_sixteen, quantize_eight); the fused norm input
// and residual add against the add-norm kernel, bit for bit; the shape checks.
//
// Two references per output, both from the weights dequantized by rose::dequantize
// (engine/model/quant.cpp) and sums in double:
//   1. The kernel's own numerics, exactly: x quantized here by the rule gemv_quant.cuh documents
//      (per 32 elements amax, s = min(127.0f / amax, FLT_MAX), q = rintf(x * s clamped to +-127)
//      in fp32, d = amax / 127.0f; the GPU's __fdiv_rn / __fmul_rn / __float2int_rn give the same
//      q and d bit for bit), y = sum w (d q). What is left is fp32 rounding in the kernel: per lane
//      at most 2 in / 1024 accumulating fmas (in / 32 blocks of 32 over 32 lanes, two terms each
//      for Q4_1 / Q4_K; Q6_K's four 16-element terms per 64-element unit are as many), plus 5
//      levels of the warp tree and ~3 roundings per term (the scale product, the fma, the CPU's
//      dequantized w), each <= 2^-24 of the running sum of |terms|: (2 in / 1024 + 8) 2^-24
//      sum|w x'| in the worst case (3e-6 at in = 14336). The check allows twice that, and at least
//      1e-5 (Reference::rel_tol), times sum|w x'| (plus an ulp of the output dtype where y is
//      bf16/fp16). For Q4_1 and
//      Q4_K, |w| there is |scale part| + |offset part| (magnitudes()): the kernel sums the two
//      parts separately, so its rounding scales with them, not with |w| (which may cancel).
//   2. What a user sees, the unquantized x: |x - d q| <= d / 2 = amax / 254 per element, so
//      |y - sum w x| <= sum over blocks of (amax / 254) sum |w| (plus ~1e-7 relative for the
//      rounded s and d, and check 1's rounding): a rigorous bound, checked per output; the worst
//      ratio to it and to sum |w x| is printed.
// The activations are multiples of 1/128 in [-1, 1] (ties of x s at .5 occur, so the rounding
// rule is exercised), exact in bf16 and fp16, so one reference serves both dtypes and their fp32
// outputs must be equal bit for bit. One 32-element block per row is all zero (amax = 0).
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/safetensors.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/gemv_quant.cuh"
#include "kernels/cuda/gemv_quant_mma.cuh"
#include "kernels/cuda/norm.cuh"
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
  // All (rows, out).
  std::vector<double> y;         // sum w x' with x' = d q: the kernel's numerics, exactly
  std::vector<double> abs_sum;   // sum |w x'| (see magnitudes): the fp32 rounding error's scale
  std::vector<double> y_true;    // sum w x: the unquantized product
  std::vector<double> abs_true;  // sum |w x| (magnitudes)
  std::vector<double> x_bound;   // sum over blocks of amax / 254 * sum |w|: |y - y_true| <= it
  double rel_tol = 0.0;          // check 1's bound on |y_gpu - y| / abs_sum (see the top)
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

// x quantized as the kernel does (gemv_quant.cuh): per 32 consecutive elements of a row,
// amax = max |x|, s = 127 / amax, q = rint(x s) (round half to even: rintf in the default mode,
// __float2int_rn on the GPU), d = amax / 127, every step in fp32; zeros when amax = 0.
struct QuantizedX {
  std::vector<double> value;      // d q, exact in double
  std::vector<double> half_step;  // amax / 254 of the element's block: the bound on |x - d q|
};

QuantizedX quantize_like_kernel(const std::vector<float>& x) {
  QuantizedX qx{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (size_t block = 0; block < x.size(); block += 32) {
    float amax = 0.0f;
    for (size_t i = block; i < block + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = amax > 0.0f ? std::min(127.0f / amax, FLT_MAX) : 0.0f;
    const float d = amax / 127.0f;
    for (size_t i = block; i < block + 32; ++i) {
      const float product = x[i] * s;  // one fp32 multiply, as the kernel's __fmul_rn
      const int q = int(std::rint(std::clamp(product, -127.0f, 127.0f)));
      qx.value[i] = double(d) * q;
      qx.half_step[i] = double(amax) / 254.0;
    }
  }
  return qx;
}

// The references for x (rows, in) and W (out, in) blocks.
Reference reference(GgmlType type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                    int rows, int in, int out) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const int64_t row_bytes = in / traits.block_elems * traits.block_bytes;
  const size_t count = size_t(rows) * size_t(out);
  Reference ref{std::vector<double>(count), std::vector<double>(count), std::vector<double>(count),
                std::vector<double>(count), std::vector<double>(count)};
  ref.rel_tol = std::max(1e-5, 2.0 * (2.0 * in / 1024 + 8) * std::ldexp(1.0, -24));
  const QuantizedX qx = quantize_like_kernel(x);
  const std::vector<uint8_t> w_magnitude = magnitudes(type, w);
  std::vector<float> row(static_cast<size_t>(in)), row_magnitude(static_cast<size_t>(in));
  for (int o = 0; o < out; ++o) {
    dequantize(type, w.data() + o * row_bytes, row);
    dequantize(type, w_magnitude.data() + o * row_bytes, row_magnitude);
    for (int r = 0; r < rows; ++r) {
      const size_t x0 = size_t(r) * size_t(in);
      double y = 0.0, abs_sum = 0.0, y_true = 0.0, abs_true = 0.0, x_bound = 0.0;
      for (size_t i = 0; i < size_t(in); ++i) {
        const double wi = row[i], mi = std::fabs(double(row_magnitude[i]));
        y += wi * qx.value[x0 + i];
        abs_sum += mi * std::fabs(qx.value[x0 + i]);
        y_true += wi * double(x[x0 + i]);
        abs_true += mi * std::fabs(double(x[x0 + i]));
        x_bound += std::fabs(wi) * qx.half_step[x0 + i];
      }
      const size_t at = size_t(r) * size_t(out) + size_t(o);
      ref.y[at] = y;
      ref.abs_sum[at] = abs_sum;
      ref.y_true[at] = y_true;
      ref.abs_true[at] = abs_true;
      ref.x_bound[at] = x_bound;
    }
  }
  return ref;
}

// Multiples of 1/128 in [-1, 1]: exact in bf16 and fp16. In odd rows r, the 32-element block r * 7
// (mod the row's blocks) is all zero: the amax = 0 path.
std::vector<float> random_activations(int rows, int in, std::mt19937& rng) {
  std::vector<float> x(size_t(rows) * size_t(in));
  for (float& v : x) v = float(int(rng() % 257) - 128) / 128.0f;
  for (int r = 1; r < rows; r += 2) {
    const size_t block = size_t(r * 7 % (in / 32));
    for (size_t i = 0; i < 32; ++i) x[size_t(r) * size_t(in) + block * 32 + i] = 0.0f;
  }
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

// Rows < n of got (n, out) against both references (see the top of the file); out_ulp: the output
// dtype's relative rounding (0 for fp32 outputs).
void check_rows(const std::vector<float>& got, const Reference& ref, int n, int out, float out_ulp,
                const std::string& what) {
  size_t misses = 0, true_misses = 0;
  double worst = 0.0, worst_true_vs_bound = 0.0, worst_true_vs_abs = 0.0;
  for (size_t i = 0; i < size_t(n) * size_t(out); ++i) {
    const double err = std::fabs(double(got[i]) - ref.y[i]);
    const double bound = ref.rel_tol * ref.abs_sum[i] + out_ulp * std::fabs(ref.y[i]) + 1e-30;
    worst = std::max(worst, err / (ref.abs_sum[i] + 1e-30));
    if (!(err <= bound) && misses++ < 5) {
      MESSAGE(what << ": element " << i << " got " << got[i] << " want " << ref.y[i]);
    }
    const double err_true = std::fabs(double(got[i]) - ref.y_true[i]);
    // x_bound, plus check 1's allowance, plus ~2e-7 |w x| for the rounded s and d, plus the output
    // rounding of a value within x_bound of y_true.
    const double bound_true = ref.x_bound[i] * (1.0 + 1e-5) +
                              ref.rel_tol * (ref.abs_sum[i] + ref.abs_true[i]) +
                              out_ulp * (std::fabs(ref.y_true[i]) + ref.x_bound[i]) + 1e-30;
    worst_true_vs_bound = std::max(worst_true_vs_bound, err_true / (ref.x_bound[i] + 1e-30));
    worst_true_vs_abs = std::max(worst_true_vs_abs, err_true / (ref.abs_true[i] + 1e-30));
    if (!(err_true <= bound_true) && true_misses++ < 5) {
      MESSAGE(what << ": element " << i << " got " << got[i] << " unquantized-x product "
                   << ref.y_true[i] << " bound " << bound_true);
    }
  }
  const std::string stats = what + ": worst error / sum|w x'| " + std::to_string(worst) +
                            "; against unquantized x: worst error / bound " +
                            std::to_string(worst_true_vs_bound) + ", / sum|w x| " +
                            std::to_string(worst_true_vs_abs);
  if (out_ulp == 0.0f) MESSAGE(stats);
  INFO(stats);
  CHECK(misses == 0);
  CHECK(true_misses == 0);
}

// The fp32 outputs y and the dtype outputs yt (bits) of one launch, rows < n, against ref.
void check_outputs(const std::vector<float>& y, const std::vector<uint16_t>& yt,
                   const Reference& ref, int n, int out, DType dtype, const std::string& what) {
  check_rows(y, ref, n, out, 0.0f, what + " f32 out");
  std::vector<float> yt_f(yt.size());
  for (size_t i = 0; i < yt.size(); ++i) yt_f[i] = from_bits(yt[i], dtype);
  check_rows(yt_f, ref, n, out, dtype == DType::kBF16 ? 1.0f / 256 : 1.0f / 2048,
             what + " " + dtype_name(dtype) + " out");
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
  const std::vector<float> x = random_activations(kMaxRows, shape.in, rng);
  const Reference ref = reference(type, w, x, kMaxRows, shape.in, shape.out);
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
        check_outputs(y, yt, ref, n, shape.out, dtype, what);
      } else {
        // Batch invariance: rows 0..n-1 equal the n = kMaxRows launch's bit for bit (whatever
        // row-count instantiation and grid each n gets), and nothing past
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

// The fused gate|up SiLU (rows gate 0..out-1 | up out..2out-1) against the exact-numerics
// reference, and rows invariant across n.
void check_silu(GgmlType type, Shape shape, std::mt19937& rng) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  CAPTURE(traits.name);
  CAPTURE(shape.in);
  const std::vector<uint8_t> w = random_blocks(type, 2 * shape.out, shape.in, rng);
  const std::vector<float> x = random_activations(kMaxRows, shape.in, rng);
  // gate | up columns
  const Reference ref = reference(type, w, x, kMaxRows, shape.in, 2 * shape.out);
  gputest::DeviceArray<uint8_t> w_dev(w);
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, dtype));
    gputest::DeviceArray<uint16_t> y_dev(size_t(kMaxRows) * shape.out);
    std::vector<uint16_t> full;
    for (int n = kMaxRows; n >= 1; --n) {
      launch_gemv_quant_silu_mul(x_dev.get(), w_dev.get(), uint32_t(type), y_dev.get(), n, shape.in,
                                 shape.out, dtype, nullptr);
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
          const double bound = 1.1 * std::fabs(up) * ref.rel_tol * ref.abs_sum[g] +
                               std::fabs(silu) * ref.rel_tol * ref.abs_sum[u] +
                               (dtype == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048) * std::fabs(want) +
                               1e-6 * (std::fabs(silu) + std::fabs(up));
          const double got = from_bits(y[size_t(r) * shape.out + o], dtype);
          // gate * up can pass fp16's largest finite value (65504): rounding then gives inf of
          // the same sign, which is the right answer (seen on the H100 with random scales).
          const bool fp16_overflow = dtype == DType::kFP16 && std::isinf(got) &&
                                     (got > 0) == (want > 0) && std::fabs(want) + bound >= 65520.0;
          if (!(std::fabs(got - want) <= bound) && !fp16_overflow && misses++ < 5)
            MESSAGE(dtype_name(dtype)
                    << " row " << r << " feature " << o << " got " << got << " want " << want);
        }
      }
      CHECK(misses == 0);
    }
  }
}

// The int8 tensor-core GEMV (gemv_quant_mma.cuh), n = kGemvQuantMmaMaxRows down to 1:
// the same quantized x and so the same reference as the dp4a GEMV, with its own rounding bound
// (each output: one warp's in / 2048 blocks of 16 fmas in a row, then a sum of the 8 warps in
// order, plus ~3 roundings per term as above: (in / 128 + 11) 2^-24 sum|w x'|, doubled); rows
// invariant across n bit for bit, nothing written past row n - 1, and bf16 / fp16 activations of
// the same values give the same fp32 outputs. y_stride: out plus a gap that must stay untouched.
// Q4_K at 25-32 rows runs staged through shared memory (the default); its register path must give
// the same bits.
void check_mma_shape(GgmlType type, Shape shape, std::mt19937& rng) {
  constexpr int kRows = kGemvQuantMmaMaxRows;
  const std::string name = std::string("mma ") + ggml_type_traits(type).name + " in " +
                           std::to_string(shape.in) + " out " + std::to_string(shape.out);
  REQUIRE(gemv_quant_mma_supported(uint32_t(type), kRows, shape.in));
  const std::vector<uint8_t> w = random_blocks(type, shape.out, shape.in, rng);
  const std::vector<float> x = random_activations(kRows, shape.in, rng);
  Reference ref = reference(type, w, x, kRows, shape.in, shape.out);
  ref.rel_tol = std::max(1e-5, 2.0 * (shape.in / 128.0 + 11) * std::ldexp(1.0, -24));
  const int stride = shape.out + 3;
  gputest::DeviceArray<uint8_t> w_dev(w);
  gputest::DeviceArray<uint8_t> scratch(size_t(gemv_quant_mma_scratch_bytes(kRows, shape.in)));
  std::vector<float> f32_by_dtype[2];
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    const std::string what = name + " " + dtype_name(dtype);
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, dtype));
    gputest::DeviceArray<float> y_dev(size_t(kRows) * stride);
    gputest::DeviceArray<uint16_t> yt_dev(size_t(kRows) * stride);
    std::vector<float> full;
    std::vector<uint16_t> full_t;
    for (int n = kRows; n >= 1; --n) {
      y_dev.poison();
      yt_dev.poison();
      launch_gemv_quant_mma(x_dev.get(), w_dev.get(), uint32_t(type), y_dev.get(), n, shape.in,
                            shape.out, true, dtype, scratch.get(), nullptr, stride);
      launch_gemv_quant_mma(x_dev.get(), w_dev.get(), uint32_t(type), yt_dev.get(), n, shape.in,
                            shape.out, false, dtype, scratch.get(), nullptr, stride);
      const std::vector<float> y_strided = y_dev.download();
      const std::vector<uint16_t> yt_strided = yt_dev.download();
      if (type == GgmlType::kQ4_K && (n == 32 || n == 25)) {
        {
          const ScopedKernelSwitches registers(
              [](KernelSwitches& s) { s.gemv_quant_mma_staged = false; });
          launch_gemv_quant_mma(x_dev.get(), w_dev.get(), uint32_t(type), y_dev.get(), n, shape.in,
                                shape.out, true, dtype, scratch.get(), nullptr, stride);
        }
        INFO(what << " n " << n << ": the register path gives the staged path's bits");
        const std::vector<float> y_registers = y_dev.download();
        CHECK(std::memcmp(y_registers.data(), y_strided.data(), y_strided.size() * 4) == 0);
      }
      std::vector<float> y(size_t(n) * shape.out);
      std::vector<uint16_t> yt(size_t(n) * shape.out);
      for (int r = 0; r < n; ++r) {
        for (int o = 0; o < shape.out; ++o) {
          y[size_t(r) * shape.out + o] = y_strided[size_t(r) * stride + o];
          yt[size_t(r) * shape.out + o] = yt_strided[size_t(r) * stride + o];
        }
        INFO(what << " n " << n << ": the gap between rows is not written");
        CHECK(std::isnan(y_strided[size_t(r) * stride + shape.out]));
      }
      if (n < kRows) {
        INFO(what << " n " << n << ": nothing past row n - 1 is written");
        CHECK(std::isnan(y_strided[size_t(n) * stride]));
      }
      if (n == kRows) {
        full = y;
        full_t = yt;
        check_outputs(y, yt, ref, n, shape.out, dtype, what);
      } else {
        INFO(what << " n " << n << ": rows 0..n-1 equal the n = " << kRows
                  << " launch's bit for bit");
        CHECK(std::memcmp(y.data(), full.data(), y.size() * 4) == 0);
        CHECK(std::memcmp(yt.data(), full_t.data(), yt.size() * 2) == 0);
      }
    }
    f32_by_dtype[dtype == DType::kBF16 ? 0 : 1] = full;
  }
  INFO(name << ": bf16 and fp16 activations hold the same values, so the fp32 results agree");
  CHECK(std::memcmp(f32_by_dtype[0].data(), f32_by_dtype[1].data(), f32_by_dtype[0].size() * 4) ==
        0);
}

}  // namespace

TEST_CASE(
    "int8 tensor-core GEMV: llama-1b / llama-8b / SmolLM2 shapes and ragged ones, n = 1..32, Q4_K, "
    "Q6_K and the 32-element types") {
  std::mt19937 rng(7);
  // Q4_K: llama-1b qkv, o, gate|up, down; llama-8b qkv, down;
  // one block, fewer blocks than warps, an out that is no multiple of 16 or 32.
  for (Shape shape :
       {Shape{2048, 3072}, Shape{2048, 2048}, Shape{2048, 16384}, Shape{8192, 2048},
        Shape{4096, 6144}, Shape{14336, 4096}, Shape{256, 7}, Shape{768, 13}, Shape{2560, 8200}}) {
    check_mma_shape(GgmlType::kQ4_K, shape, rng);
  }
  // Q6_K (Q4_K_M's v rows, down and lm_head): llama-1b v and down, llama-8b v and down; one block,
  // an out that is no multiple of 16, and in 768 (630-byte rows: neighbouring rows' blocks differ
  // in alignment mod 4).
  for (Shape shape : {Shape{2048, 512}, Shape{8192, 2048}, Shape{4096, 1024}, Shape{14336, 4096},
                      Shape{256, 7}, Shape{768, 13}, Shape{2560, 8200}}) {
    check_mma_shape(GgmlType::kQ6_K, shape, rng);
  }
  // The 32-element types: llama-1b qkv, gate|up, down; SmolLM2-135M qkv and down (576 and 1536:
  // groups of 4 blocks that end part way); one block; an odd number of blocks.
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    for (Shape shape : {Shape{2048, 3072}, Shape{2048, 16384}, Shape{8192, 2048}, Shape{576, 960},
                        Shape{1536, 576}, Shape{32, 7}, Shape{96, 13}}) {
      check_mma_shape(type, shape, rng);
    }
  }
}

TEST_CASE("int8 tensor-core GEMV: the shape checks") {
  CHECK(gemv_quant_mma_supported(uint32_t(GgmlType::kQ4_K), 32, 256));
  CHECK_FALSE(gemv_quant_mma_supported(uint32_t(GgmlType::kQ4_K), 33, 256));
  CHECK_FALSE(gemv_quant_mma_supported(uint32_t(GgmlType::kQ4_K), 0, 256));
  CHECK_FALSE(gemv_quant_mma_supported(uint32_t(GgmlType::kQ4_K), 8, 576));
  CHECK(gemv_quant_mma_supported(uint32_t(GgmlType::kQ6_K), 8, 256));
  CHECK_FALSE(gemv_quant_mma_supported(uint32_t(GgmlType::kQ6_K), 8, 128));
  CHECK(gemv_quant_mma_supported(uint32_t(GgmlType::kQ8_0), 32, 576));
  CHECK(gemv_quant_mma_supported(uint32_t(GgmlType::kQ4_1), 1, 32));
  CHECK_FALSE(gemv_quant_mma_supported(uint32_t(GgmlType::kQ4_0), 1, 48));
  CHECK_FALSE(gemv_quant_mma_supported(uint32_t(GgmlType::kQ5_0), 1, 256));
  CHECK(gemv_quant_mma_scratch_bytes(9, 256) == 16 * 256 + 16 * 8 * 8);
}

TEST_CASE("quantized GEMV: llama-1b shapes, all five types, n = 1..8, bf16 and fp16") {
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

TEST_CASE("quantized GEMV: llama-8b shapes (Q4_K_M's Q4_K and Q6_K, Q8_0, Q4_0), n = 1..8") {
  std::mt19937 rng(6);
  // qkv (4096 -> 6144), o (4096 -> 4096), down (14336 -> 4096); gate|up below (fused SiLU).
  for (Shape shape : {Shape{4096, 6144}, Shape{4096, 4096}, Shape{14336, 4096}})
    check_type_shape(GgmlType::kQ4_K, shape, rng);
  check_type_shape(GgmlType::kQ6_K, Shape{14336, 4096}, rng);  // Q4_K_M's down in some layers
  check_type_shape(GgmlType::kQ8_0, Shape{14336, 4096}, rng);
  check_type_shape(GgmlType::kQ4_0, Shape{4096, 4096}, rng);
  check_silu(GgmlType::kQ4_K, Shape{4096, 14336}, rng);
}

TEST_CASE("quantized GEMV: rows past the shared memory budget run as several launches") {
  // in = 32768: 4 quantized rows fit the kernel's budget, so n = 5..8 runs as two launches; in =
  // 131072 (the largest supported) fits one row per launch. Results and invariance as always.
  std::mt19937 rng(7);
  check_type_shape(GgmlType::kQ8_0, Shape{32768, 37}, rng);
  check_type_shape(GgmlType::kQ4_K, Shape{32768, 64}, rng);
  check_type_shape(GgmlType::kQ4_0, Shape{131072, 5}, rng);
  CHECK(gemv_quant_supported(uint32_t(GgmlType::kQ4_0), kMaxRows, 131072));
  CHECK_FALSE(gemv_quant_supported(uint32_t(GgmlType::kQ4_0), 1, 131072 + 32));
}

TEST_CASE("quantized GEMV: fused gate|up SiLU against the reference, rows invariant across n") {
  std::mt19937 rng(4);
  for (GgmlType type : kTypes) {
    for (Shape shape : {Shape{2048, 8192}, Shape{1536, 256}}) check_silu(type, shape, rng);
  }
}

namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// One type at one shape, both dtypes, n = 1..8, each launch once on the direct kernel and once on
// the staged one: the product (fp32 and dtype out), the residual add, the norm-fused product, the
// gated SiLU and the norm-fused SiLU, byte for byte. The plain products read a matrix of exactly
// `out` rows (its own allocation, so compute-sanitizer sees a read past its last block), the SiLU
// the gate | up matrix of 2 out rows. Every output must also be written (no NaN poison left).
void check_direct_against_staged(GgmlType type, Shape shape, std::mt19937& rng) {
  CAPTURE(ggml_type_traits(type).name);
  CAPTURE(shape.in);
  CAPTURE(shape.out);
  const std::vector<uint8_t> w = random_blocks(type, 2 * shape.out, shape.in, rng);  // gate | up
  const std::vector<uint8_t> w_plain(
      w.begin(),
      w.begin() + std::ptrdiff_t(gemv_quant_row_bytes(uint32_t(type), shape.in)) * shape.out);
  const std::vector<float> x = random_activations(kMaxRows, shape.in, rng);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> norm_residual(size_t(kMaxRows) * shape.in),
      residual(size_t(kMaxRows) * shape.out);
  for (float& v : norm_residual) v = dist(rng) + 0.5f;
  for (float& v : residual) v = dist(rng);
  std::vector<float> norm_w(size_t(shape.in));
  for (float& v : norm_w) v = 0.5f + float(rng() % 128) / 128.0f;  // exact in bf16 and fp16
  gputest::DeviceArray<uint8_t> w_dev(w), w_plain_dev(w_plain);
  gputest::DeviceArray<float> norm_residual_dev(norm_residual);
  const uint32_t id = uint32_t(type);
  const char* const kOutputs[] = {"product fp32",       "product", "residual add",
                                  "norm-fused product", "SiLU",    "norm-fused SiLU"};
  constexpr int kOutputCount = 6;
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    CAPTURE(dtype_name(dtype));
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, dtype)), norm_w_dev(to_bits(norm_w, dtype));
    GemvFusion norm;
    norm.norm_residual = norm_residual_dev.get();
    norm.norm_weight = norm_w_dev.get();
    norm.norm_eps = 1e-5f;
    GemvFusion add;
    add.residual_add = true;
    for (int n = 1; n <= kMaxRows; ++n) {
      CAPTURE(n);
      const size_t count = size_t(n) * shape.out;
      std::vector<uint8_t> got[2][kOutputCount];  // [staged][output]
      for (int staged = 0; staged < 2; ++staged) {
        const ScopedKernelSwitches kernel(
            [&](KernelSwitches& s) { s.gemv_quant_direct = staged == 0; });
        gputest::DeviceArray<float> f32(count), residual_dev(residual);
        gputest::DeviceArray<uint16_t> product(count), normed(count), silu(count),
            normed_silu(count);
        launch_gemv_quant(x_dev.get(), w_plain_dev.get(), id, f32.get(), n, shape.in, shape.out,
                          true, dtype, nullptr);
        launch_gemv_quant(x_dev.get(), w_plain_dev.get(), id, product.get(), n, shape.in, shape.out,
                          false, dtype, nullptr);
        launch_gemv_quant(x_dev.get(), w_plain_dev.get(), id, residual_dev.get(), n, shape.in,
                          shape.out, false, dtype, nullptr, 0, add);
        launch_gemv_quant(nullptr, w_plain_dev.get(), id, normed.get(), n, shape.in, shape.out,
                          false, dtype, nullptr, 0, norm);
        launch_gemv_quant_silu_mul(x_dev.get(), w_dev.get(), id, silu.get(), n, shape.in, shape.out,
                                   dtype, nullptr);
        launch_gemv_quant_silu_mul(nullptr, w_dev.get(), id, normed_silu.get(), n, shape.in,
                                   shape.out, dtype, nullptr, norm);
        got[staged][0] = bytes_of(f32.download());
        got[staged][1] = bytes_of(product.download());
        got[staged][2] = bytes_of(residual_dev.download());  // rows n.. are untouched
        got[staged][3] = bytes_of(normed.download());
        got[staged][4] = bytes_of(silu.download());
        got[staged][5] = bytes_of(normed_silu.download());
      }
      for (int o = 0; o < kOutputCount; ++o) {
        CAPTURE(kOutputs[o]);
        CHECK(got[0][o] == got[1][o]);
      }
      // Written everywhere: no NaN poison left in the fp32 outputs, none in dtype (0xFFFF is NaN
      // in both bf16 and fp16, and the products here are finite).
      const std::vector<uint8_t>& f32 = got[0][0];
      bool poisoned = false;
      for (size_t i = 0; i < count; ++i) {
        float v;
        std::memcpy(&v, f32.data() + 4 * i, 4);
        poisoned = poisoned || std::isnan(v);
      }
      for (int o : {1, 3, 4, 5}) {
        for (size_t i = 0; i < count; ++i) {
          poisoned = poisoned || (got[0][o][2 * i] == 0xFF && got[0][o][2 * i + 1] == 0xFF);
        }
      }
      CHECK_FALSE(poisoned);
      CHECK(std::memcmp(got[0][2].data(), residual.data(), count * 4) != 0);  // the add happened
    }
  }
}

// Activations (rows, in) as dtype bits with the values quantize_sixteen's shortcuts must get right
// (kernels/cuda/quantize_int8.cuh), one kind a 32-element block of each row, the rest random:
// NaN among finite values, all NaN, +-inf, subnormals, the smallest normal (127 / amax past
// FLT_MAX in bf16: s = FLT_MAX), signed zeros, the largest finite value, and ties of x s at .5.
std::vector<uint16_t> special_activations(int rows, int in, DType dtype, std::mt19937& rng) {
  const bool bf16 = dtype == DType::kBF16;
  const uint16_t nan = bf16 ? 0x7FC1 : 0x7E01, inf = bf16 ? 0x7F80 : 0x7C00;
  const uint16_t largest = bf16 ? 0x7F7F : 0x7BFF, smallest_normal = bf16 ? 0x0080 : 0x0400;
  std::vector<float> random = random_activations(rows, in, rng);
  std::vector<uint16_t> bits = to_bits(random, dtype);
  for (int r = 0; r < rows; ++r) {
    uint16_t* row = bits.data() + size_t(r) * size_t(in);
    const int blocks = in / 32;
    const auto block = [&](int kind) { return row + 32 * ((kind + r) % blocks); };
    block(0)[5] = nan;  // NaN among finite values
    for (int i = 0; i < 32; ++i) block(1)[i] = uint16_t(nan | (i % 2 ? 0x8000 : 0));  // all NaN
    block(2)[3] = inf;                     // +inf: s = 0, inf * 0 = NaN
    block(3)[7] = uint16_t(inf | 0x8000);  // -inf
    for (int i = 0; i < 32; ++i) block(4)[i] = uint16_t(i | (i % 3 ? 0x8000 : 0));  // subnormals
    for (int i = 0; i < 32; ++i) block(5)[i] = i % 2 ? smallest_normal : 0;
    for (int i = 0; i < 32; ++i) block(6)[i] = i % 2 ? 0x8000 : 0;  // -0 and +0
    block(7)[9] = largest;
    block(7)[10] = uint16_t(largest | 0x8000);
  }
  return bits;
}

}  // namespace

// The direct kernel's x (quantize_sixteen: two lanes a 32-element block) against the staged
// kernel's (quantize_eight: four lanes a block) on the values quantize_sixteen's shortcuts rest on
// (special_activations): the same outputs byte for byte, NaN and inf included, for a K-quant and
// a 32-element type, one row and three, bf16 and fp16; and the outputs are not all finite (the
// special values reached the product). The test below runs both kernels on ordinary values.
TEST_CASE("quantized GEMV: x two lanes a block gives four lanes' bits, NaN and inf too") {
  std::mt19937 rng(5);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0}) {
    CAPTURE(ggml_type_traits(type).name);
    const Shape shape{2048, 96};
    const std::vector<uint8_t> w = random_blocks(type, shape.out, shape.in, rng);
    gputest::DeviceArray<uint8_t> w_dev(w);
    for (DType dtype : {DType::kBF16, DType::kFP16}) {
      CAPTURE(dtype_name(dtype));
      gputest::DeviceArray<uint16_t> x_dev(special_activations(3, shape.in, dtype, rng));
      for (int n : {1, 3}) {
        CAPTURE(n);
        std::vector<uint8_t> got[2];  // [direct]
        for (int direct = 0; direct < 2; ++direct) {
          const ScopedKernelSwitches kernel(
              [&](KernelSwitches& s) { s.gemv_quant_direct = direct == 1; });
          gputest::DeviceArray<float> y(size_t(n) * shape.out);
          launch_gemv_quant(x_dev.get(), w_dev.get(), uint32_t(type), y.get(), n, shape.in,
                            shape.out, true, dtype, nullptr);
          got[direct] = bytes_of(y.download());
        }
        CHECK(got[0] == got[1]);
        bool non_finite = false;
        for (size_t i = 0; i < got[1].size() / 4; ++i) {
          float v;
          std::memcpy(&v, got[1].data() + 4 * i, 4);
          non_finite = non_finite || !std::isfinite(v);
        }
        CHECK(non_finite);
      }
    }
  }
}

// Every type runs the direct kernel (Q6_K at one row; its n = 2..8 launches take the staged kernel
// both times); the staged kernel (kept for comparisons) computes the same operations in the same
// order. Both, every n, every epilogue, bit for bit, at llama-1b's shapes
// (in 2048 and 8192; out 4096: the two-block builds, and at one row with the norm input the
// two-block build of norm_quantize_one_row, against the staged kernel's norm_prologue),
// SmolLM2-135M's (in 576 and 1536; its 49152-wide vocabulary shrunk to an odd 4099), a matrix of
// one block per row with an odd out (Q4_0's, Q8_0's and Q6_K's 2-byte aligned blocks alternate
// between word aligned and not, down to the matrix's last block), and for Q8_0 an x too large for
// one launch of 8 rows (the rows split into launches).
TEST_CASE("quantized GEMV: the direct kernel (every type) gives the staged bits") {
  std::mt19937 rng(11);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (const Shape shape : {Shape{2048, 3072}, Shape{2048, 4096}, Shape{8192, 2048},
                              Shape{1536, 576}, Shape{256, 7}, Shape{512, 5}}) {
      check_direct_against_staged(type, shape, rng);
    }
  }
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ4_0, GgmlType::kQ8_0}) {
    for (const Shape shape : {Shape{2048, 3072}, Shape{8192, 2048}, Shape{576, 960},
                              Shape{576, 4099}, Shape{1536, 576}, Shape{32, 7}, Shape{96, 1}}) {
      check_direct_against_staged(type, shape, rng);
    }
  }
  check_direct_against_staged(GgmlType::kQ8_0, Shape{32768, 37}, rng);
}

TEST_CASE("quantized GEMV: the shape checks") {
  CHECK(gemv_quant_type_supported(uint32_t(GgmlType::kQ4_K)));
  CHECK_FALSE(gemv_quant_type_supported(uint32_t(GgmlType::kQ5_0)));
  CHECK(kMaxRows == 8);
  CHECK(gemv_quant_supported(uint32_t(GgmlType::kQ8_0), kMaxRows, 64));
  CHECK_FALSE(gemv_quant_supported(uint32_t(GgmlType::kQ8_0), kMaxRows + 1, 64));
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
  const std::vector<float> x = random_activations(kMaxRows, in, rng);
  const Reference ref_a = reference(type_a, w_a, x, kMaxRows, in, out_a);
  const Reference ref_b = reference(type_b, w_b, x, kMaxRows, in, out_b);
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

namespace {

// launch_add_norm's RMSNorm of rows (n, hidden) into `out` (n, hidden) in dtype; with delta, the
// residual first gains it (the residual add the next norm does).
void add_norm(float* residual, const void* delta, const void* weight, void* out, int n, int hidden,
              DType dtype) {
  AddNormArgs norm;
  norm.residual = residual;
  norm.delta = delta;
  norm.weight = weight;
  norm.out = out;
  norm.num_rows = n;
  norm.hidden = hidden;
  norm.eps = 1e-5f;
  norm.kind = NormKind::kRmsNorm;
  norm.dtype = dtype;
  launch_add_norm(norm, nullptr);
}

// One type at one shape, both dtypes, n = 1..8: the norm-fused product and fused gate|up SiLU
// against launch_add_norm followed by the plain kernels, and the residual-add epilogue against the
// plain product followed by launch_add_norm's residual add, bit for bit.
void check_fused(GgmlType type, Shape shape, std::mt19937& rng) {
  CAPTURE(ggml_type_traits(type).name);
  CAPTURE(shape.in);
  const std::vector<uint8_t> w = random_blocks(type, 2 * shape.out, shape.in, rng);
  const std::vector<uint8_t> w_o = random_blocks(type, shape.in, shape.out, rng);  // back to in
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> residual(size_t(kMaxRows) * shape.in);
  for (float& x : residual) x = dist(rng) + 0.5f;
  std::vector<float> norm_w(size_t(shape.in));
  for (float& x : norm_w) x = 0.5f + float(rng() % 128) / 128.0f;  // exact in bf16 and fp16
  gputest::DeviceArray<uint8_t> w_dev(w), w_o_dev(w_o);
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    CAPTURE(dtype_name(dtype));
    gputest::DeviceArray<uint16_t> norm_w_dev(to_bits(norm_w, dtype));
    for (int n = 1; n <= kMaxRows; ++n) {
      CAPTURE(n);
      gputest::DeviceArray<float> residual_dev(residual);
      gputest::DeviceArray<uint16_t> normed(size_t(n) * shape.in);
      add_norm(residual_dev.get(), nullptr, norm_w_dev.get(), normed.get(), n, shape.in, dtype);
      GemvFusion fused;
      fused.norm_residual = residual_dev.get();
      fused.norm_weight = norm_w_dev.get();
      fused.norm_eps = 1e-5f;
      gputest::DeviceArray<uint16_t> want(size_t(n) * shape.out), got(size_t(n) * shape.out);
      launch_gemv_quant(normed.get(), w_dev.get(), uint32_t(type), want.get(), n, shape.in,
                        shape.out, false, dtype, nullptr);
      launch_gemv_quant(nullptr, w_dev.get(), uint32_t(type), got.get(), n, shape.in, shape.out,
                        false, dtype, nullptr, 0, fused);
      const std::vector<uint16_t> y_want = want.download(), y_got = got.download();
      CHECK(std::memcmp(y_want.data(), y_got.data(), y_want.size() * 2) == 0);
      launch_gemv_quant_silu_mul(normed.get(), w_dev.get(), uint32_t(type), want.get(), n, shape.in,
                                 shape.out, dtype, nullptr);
      launch_gemv_quant_silu_mul(nullptr, w_dev.get(), uint32_t(type), got.get(), n, shape.in,
                                 shape.out, dtype, nullptr, fused);
      const std::vector<uint16_t> s_want = want.download(), s_got = got.download();
      CHECK(std::memcmp(s_want.data(), s_got.data(), s_want.size() * 2) == 0);

      // o / down: the product of `normed` (as any x) added to the residual.
      gputest::DeviceArray<uint16_t> delta(size_t(n) * shape.in), scratch(size_t(n) * shape.in);
      gputest::DeviceArray<float> residual_want(residual), residual_got(residual);
      launch_gemv_quant(normed.get(), w_o_dev.get(), uint32_t(type), delta.get(), n, shape.out,
                        shape.in, false, dtype, nullptr);
      add_norm(residual_want.get(), delta.get(), norm_w_dev.get(), scratch.get(), n, shape.in,
               dtype);
      GemvFusion add;
      add.residual_add = true;
      launch_gemv_quant(normed.get(), w_o_dev.get(), uint32_t(type), residual_got.get(), n,
                        shape.out, shape.in, false, dtype, nullptr, 0, add);
      const std::vector<float> r_want = residual_want.download(), r_got = residual_got.download();
      CHECK(std::memcmp(r_want.data(), r_got.data(), r_want.size() * 4) == 0);
      CHECK(std::memcmp(r_want.data(), residual.data(), size_t(n) * shape.in * 4) != 0);
    }
  }
}

}  // namespace

TEST_CASE("quantized GEMV: the fused norm input and residual add give the add-norm kernel's bits") {
  // A decode layer with fused norms (gemv_fusion.cuh): qkv and gate|up normalize the residual
  // stream themselves, o and down add their outputs to it. Every type at llama-1b's hidden 2048
  // (out 512 with in 512 back: a K-quant row is whole blocks either way), llama-8b's 4096 for
  // Q4_K_M's two types, SmolLM2's 576 for the 32-element types; Q4_K on both kernels.
  std::mt19937 rng(21);
  for (GgmlType type : kTypes) {
    check_fused(type, Shape{2048, 512}, rng);
    if (!is_k_quant(type)) check_fused(type, Shape{576, 96}, rng);
  }
  check_fused(GgmlType::kQ4_K, Shape{4096, 256}, rng);
  check_fused(GgmlType::kQ6_K, Shape{4096, 256}, rng);
  {
    const ScopedKernelSwitches staged([](KernelSwitches& s) { s.gemv_quant_direct = false; });
    check_fused(GgmlType::kQ4_K, Shape{2048, 512}, rng);
  }
  // Misaligned norm input and a residual add after the SiLU are refused.
  gputest::DeviceArray<uint8_t> w(size_t(8) * 34);
  gputest::DeviceArray<float> residual(64);
  GemvFusion misaligned;
  misaligned.norm_residual = residual.get() + 1;
  misaligned.norm_weight = w.get();
  CHECK_THROWS(launch_gemv_quant(nullptr, w.get(), uint32_t(GgmlType::kQ8_0), residual.get(), 1, 32,
                                 8, false, DType::kBF16, nullptr, 0, misaligned));
  GemvFusion add;
  add.residual_add = true;
  CHECK_THROWS(launch_gemv_quant_silu_mul(residual.get(), w.get(), uint32_t(GgmlType::kQ8_0),
                                          residual.get(), 1, 32, 4, DType::kBF16, nullptr, add));
}
