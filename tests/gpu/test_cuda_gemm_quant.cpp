// The quantized tensor-core GEMM (kernels/cuda/gemm_quant.cu) against CPU references, for Q8_0,
// Q4_0, Q4_1, Q4_K and Q6_K at the projection shapes of llama-1b (qkv 3072x2048, o 2048x2048,
// gate|up 16384x2048, down 2048x8192), llama-8b (qkv 6144x4096, gate|up trimmed to 5000x4096,
// down 4096x14336) and SmolLM2-135M (in 576 for the 32-element types, 576 x 1536 for all: 576 is
// not a multiple of 256), bf16 and fp16 activations, fp32 and dtype outputs; batch invariance
// (row r of y bit-identical for n = 1, 8, 9, 16, 33, 64, 100, 256 and 512, and for every compiled
// tile shape); exact decoding (an identity x reads the decoded weights back, bit for bit against
// launch_dequantize_rows); row ranges of two types filling one output through y_stride; split-K
// (the rule's slice counts at those shapes, and forced counts 1..6 with even and uneven slices:
// within the bound, the same bits for every n and tile at a fixed count, the same bits when the
// workspace holds fewer rows than n, the counters left zero).
//
// The reference. The kernel multiplies W_T = the weights dequantized by rose::dequantize
// (engine/model/quant.cpp) and rounded to the activation dtype T (what launch_dequantize_rows
// writes) by x, on mma.sync m16n8k16 with fp32 accumulation. So the reference is y = sum W_T x in
// double, with x multiples of 1/128 in [-1, 1] (exact in bf16 and fp16). Error bound:
//   - the products W_T x are exact in fp32 (8 x 8 or 11 x 11 significant bits);
//   - k is cut into P slices (split-K, P = gemm_quant_splits; P = 1: no split). Each slice's sum is
//     one fp32 accumulator updated by its in_p / 16 mma steps, each adding 16 products. The tensor
//     core aligns the 16 products and the accumulator to the largest exponent and keeps a fixed
//     number of bits (at least fp32's 24), truncating the rest, then normalizes, again truncating:
//     a step's error is at most a few units of 2^-23 times the largest magnitude among its inputs,
//     which is at most S = sum |W_T x| over the whole row (the accumulator's magnitude never
//     exceeds the running sum of its slice's |terms|, a part of S). We allow 2 such units
//     (2^-22 S) per step: over all slices, sum_p in_p / 16 = in / 16 steps;
//   - the P partials are then added in slice order in fp32: P - 1 adds, each rounding to nearest
//     (2^-24 relative) a sum whose magnitude is at most S, so at most (P - 1) 2^-24 S more;
//   - so |y_gpu - y| <= (in / 16 + 16 + (P - 1) / 4) 2^-22 S, the 16 extra steps a margin (at
//     in = 14336 and P = 4, 2.2e-4 S; the worst seen is printed, and is orders of magnitude below:
//     truncation errors mostly cancel and S is a loose scale). A bf16/fp16 output adds its
//     rounding, half an ulp: 2^-8 |y| (bf16) or 2^-11 |y| (fp16, plus 2^-25 absolute for
//     subnormals).
// The dtype output is also checked bit for bit against the fp32 output rounded on the host (the
// kernel rounds the same accumulator).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/safetensors.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/gemm_quant.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;

namespace {

constexpr int kMaxRows = 512;
constexpr int kRowCounts[] = {1, 8, 9, 16, 33, 64, 100, 256};  // checked against kMaxRows' rows
// Rows of the n = kMaxRows product checked against the reference: every position class of the
// tile shapes' 16-, 32-, 64- and 128-row activation tiles, and the last row.
constexpr int kCheckedRows[] = {0,  1,   2,   7,   8,   9,   15,  31,  33,  63,
                                64, 100, 127, 200, 255, 256, 300, 383, 450, 511};

constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                               GgmlType::kQ6_K};

// The split-K workspace of every launch below (as the backend's: zeroed once, shared by all
// launches): 64 MiB (63 of them partials), so kMaxRows rows of slices x out up to 32256 run in
// one launch (the rule's is at most gemm_quant_max_split_cols: 16896 on 132 SMs).
constexpr int64_t kWorkspaceBytes = int64_t(64) << 20;
void* workspace() {
  static gputest::DeviceArray<uint8_t> bytes(std::vector<uint8_t>(size_t(kWorkspaceBytes), 0));
  return bytes.get();
}

// launch_gemm_quant on the shared workspace, on the default stream.
void gemm(const void* x, const uint8_t* w, GgmlType type, void* y, int n, int in, int out,
          bool f32_out, DType dtype, int y_stride = 0) {
  launch_gemm_quant(x, w, uint32_t(type), y, n, in, out, f32_out, dtype, workspace(),
                    kWorkspaceBytes, nullptr, y_stride);
}

// Sets the forced slice count for its lifetime (0: the rule), then restores the rule.
struct ForcedSplit {
  explicit ForcedSplit(int splits) { set_gemm_quant_split(splits); }
  ~ForcedSplit() { set_gemm_quant_split(0); }
};

bool is_k_quant(GgmlType type) { return type == GgmlType::kQ4_K || type == GgmlType::kQ6_K; }

const char* dtype_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

// Runs body(begin, end) over [0, count) on all cores (the references of the larger shapes).
template <typename Body>
void parallel_for(int count, Body body) {
  const int threads = int(std::max(1u, std::min(32u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  const int per = (count + threads - 1) / threads;
  for (int i = 0; i < threads; ++i) {
    const int begin = i * per, end = std::min(count, begin + per);
    if (begin < end) pool.emplace_back(body, begin, end);
  }
  for (std::thread& thread : pool) thread.join();
}

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
// (finite, and outputs stay well inside fp16's range).
std::vector<uint8_t> random_blocks(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const int64_t blocks = rows * cols / traits.block_elems;
  std::vector<uint8_t> bytes(size_t(blocks * traits.block_bytes));
  for (uint8_t& b : bytes) b = uint8_t(rng());
  std::uniform_real_distribution<float> magnitude(1e-3f, 0.05f);
  for (int64_t i = 0; i < blocks; ++i) {
    for (int offset : half_offsets(type)) {
      const uint16_t bits = f32_to_f16((rng() & 1 ? -1.0f : 1.0f) * magnitude(rng));
      bytes[size_t(i * traits.block_bytes + offset)] = uint8_t(bits);
      bytes[size_t(i * traits.block_bytes + offset + 1)] = uint8_t(bits >> 8);
    }
  }
  return bytes;
}

// The blocks on the device, kGemmQuantWeightPadding zero bytes longer (the kernel's contract).
gputest::DeviceArray<uint8_t> upload_blocks(std::vector<uint8_t> blocks) {
  blocks.resize(blocks.size() + kGemmQuantWeightPadding, 0);
  return gputest::DeviceArray<uint8_t>(blocks);
}

int64_t row_bytes(GgmlType type, int in) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  return in / traits.block_elems * traits.block_bytes;
}

float from_bits(uint16_t bits, DType dtype) {
  if (dtype == DType::kBF16) return gputest::bf16_bits_to_f32(bits);
  const uint8_t bytes[2] = {uint8_t(bits), uint8_t(bits >> 8)};
  float value;
  convert_to_f32(Dtype::kF16, bytes, std::span<float>(&value, 1));
  return value;
}

uint16_t to_bits(float value, DType dtype) {
  return dtype == DType::kBF16 ? gputest::f32_to_bf16_bits(value) : f32_to_f16(value);
}

std::vector<uint16_t> to_bits(const std::vector<float>& x, DType dtype) {
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = to_bits(x[i], dtype);
  return bits;
}

// The weights as the kernel multiplies them: rose::dequantize's fp32 values rounded to dtype.
std::vector<float> dequantized(GgmlType type, const std::vector<uint8_t>& w, int in, int out,
                               DType dtype) {
  std::vector<float> values(size_t(out) * size_t(in));
  parallel_for(out, [&](int begin, int end) {
    for (int o = begin; o < end; ++o) {
      std::span<float> row(values.data() + size_t(o) * size_t(in), size_t(in));
      dequantize(type, w.data() + o * row_bytes(type, in), row);
      for (float& v : row) v = from_bits(to_bits(v, dtype), dtype);
    }
  });
  return values;
}

// Multiples of 1/128 in [-1, 1]: exact in bf16 and fp16.
std::vector<float> random_activations(int rows, int in, std::mt19937& rng) {
  std::vector<float> x(size_t(rows) * size_t(in));
  for (float& v : x) v = float(int(rng() % 257) - 128) / 128.0f;
  return x;
}

struct Reference {
  std::vector<double> y, abs_sum;  // (rows.size(), out): sum W_T x and sum |W_T x|
};

Reference reference(const std::vector<float>& w, const std::vector<float>& x,
                    const std::vector<int>& rows, int in, int out) {
  Reference ref{std::vector<double>(rows.size() * size_t(out)),
                std::vector<double>(rows.size() * size_t(out))};
  parallel_for(out, [&](int begin, int end) {
    for (int o = begin; o < end; ++o) {
      const float* wo = w.data() + size_t(o) * size_t(in);
      for (size_t i = 0; i < rows.size(); ++i) {
        const float* xr = x.data() + size_t(rows[i]) * size_t(in);
        double y = 0.0, abs_sum = 0.0;
        for (int k = 0; k < in; ++k) {
          const double term = double(wo[k]) * double(xr[k]);
          y += term;
          abs_sum += std::fabs(term);
        }
        ref.y[i * size_t(out) + size_t(o)] = y;
        ref.abs_sum[i * size_t(out) + size_t(o)] = abs_sum;
      }
    }
  });
  return ref;
}

// The bound of the file's header on |y_gpu - y| / sum |W_T x| for fp32 outputs, P = splits.
double accumulation_bound(int in, int splits) {
  return (in / 16.0 + 16.0 + (splits - 1) / 4.0) * std::ldexp(1.0, -22);
}

// Rows `rows` of got (n, y_stride) fp32, columns [0, out), against ref; returns the worst error /
// sum |W_T x|.
double check_rows(const std::vector<float>& got, int y_stride, const Reference& ref,
                  const std::vector<int>& rows, int in, int out, int splits,
                  const std::string& what) {
  const double rel = accumulation_bound(in, splits);
  size_t misses = 0;
  double worst = 0.0;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int o = 0; o < out; ++o) {
      const size_t at = i * size_t(out) + size_t(o);
      const double value = got[size_t(rows[i]) * size_t(y_stride) + size_t(o)];
      const double err = std::fabs(value - ref.y[at]);
      worst = std::max(worst, err / (ref.abs_sum[at] + 1e-30));
      if (!(err <= rel * ref.abs_sum[at] + 1e-30) && misses++ < 5) {
        MESSAGE(what << ": row " << rows[i] << " column " << o << " got " << value << " want "
                     << ref.y[at] << " (sum |w x| " << ref.abs_sum[at] << ")");
      }
    }
  }
  INFO(what << ": worst error / sum|w x| " << worst << ", bound " << rel);
  CHECK(misses == 0);
  return worst;
}

// dtype outputs equal the fp32 outputs rounded on the host, bit for bit (rows < n, columns < out).
void check_rounded(const std::vector<uint16_t>& got, const std::vector<float>& f32, int n, int out,
                   int y_stride, DType dtype, const std::string& what) {
  size_t misses = 0;
  for (int r = 0; r < n; ++r) {
    for (int o = 0; o < out; ++o) {
      const size_t at = size_t(r) * size_t(y_stride) + size_t(o);
      if (got[at] != to_bits(f32[at], dtype) && misses++ < 5) {
        MESSAGE(what << ": row " << r << " column " << o << " got bits " << got[at]
                     << " fp32 result " << f32[at]);
      }
    }
  }
  CHECK(misses == 0);
}

struct Shape {
  int in, out;
};

// One type and shape: n = kMaxRows against the reference (kCheckedRows, both dtypes, fp32 and
// dtype outputs), every n of kRowCounts bit-identical to it on rows < n, nothing written past n.
void check_shape(GgmlType type, Shape shape, std::mt19937& rng) {
  const int in = shape.in, out = shape.out;
  const int splits = gemm_quant_splits(uint32_t(type), in, out);
  const std::string name = std::string(ggml_type_traits(type).name) + " in " + std::to_string(in) +
                           " out " + std::to_string(out) + " splits " + std::to_string(splits);
  REQUIRE(gemm_quant_supported(uint32_t(type), in));
  const std::vector<uint8_t> w = random_blocks(type, out, in, rng);
  const std::vector<float> x = random_activations(kMaxRows, in, rng);
  const std::vector<int> rows(std::begin(kCheckedRows), std::end(kCheckedRows));
  gputest::DeviceArray<uint8_t> w_dev = upload_blocks(w);
  gputest::DeviceArray<float> y_dev(size_t(kMaxRows) * size_t(out));
  gputest::DeviceArray<uint16_t> yt_dev(size_t(kMaxRows) * size_t(out));
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    const std::string what = name + " " + dtype_name(dtype);
    const Reference ref = reference(dequantized(type, w, in, out, dtype), x, rows, in, out);
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, dtype));
    gemm(x_dev.get(), w_dev.get(), type, y_dev.get(), kMaxRows, in, out, true, dtype);
    gemm(x_dev.get(), w_dev.get(), type, yt_dev.get(), kMaxRows, in, out, false, dtype);
    const std::vector<float> full = y_dev.download();
    const std::vector<uint16_t> full_t = yt_dev.download();
    const double worst = check_rows(full, out, ref, rows, in, out, splits, what);
    MESSAGE(what << ": worst error / sum|w x| " << worst << " (bound "
                 << accumulation_bound(in, splits) << ")");
    check_rounded(full_t, full, kMaxRows, out, out, dtype, what + " dtype out");
    for (int n : kRowCounts) {
      INFO(what << " n " << n << " (tile "
                << gemm_quant_tile_name(gemm_quant_chosen_tile(uint32_t(type), n, in, out)) << ")");
      y_dev.poison();
      yt_dev.poison();
      gemm(x_dev.get(), w_dev.get(), type, y_dev.get(), n, in, out, true, dtype);
      gemm(x_dev.get(), w_dev.get(), type, yt_dev.get(), n, in, out, false, dtype);
      const std::vector<float> y = y_dev.download();
      const std::vector<uint16_t> yt = yt_dev.download();
      CHECK(std::memcmp(y.data(), full.data(), size_t(n) * size_t(out) * 4) == 0);
      CHECK(std::memcmp(yt.data(), full_t.data(), size_t(n) * size_t(out) * 2) == 0);
      CHECK(std::isnan(y[size_t(n) * size_t(out)]));  // row n untouched (the 0xFF poison)
      CHECK(yt[size_t(n) * size_t(out)] == 0xFFFF);
    }
  }
}

// x = the identity (n = in rows): y[r][o] = W_T[o][r] exactly (one product w * 1, the others
// exact zeros), so the kernel must read back launch_dequantize_rows' values, for every tile shape.
// Catches any mismatch between the decoded A fragments' k order and x's.
void check_identity(GgmlType type, Shape shape, std::mt19937& rng) {
  const int in = shape.in, out = shape.out;
  const std::string name = std::string(ggml_type_traits(type).name) + " in " + std::to_string(in) +
                           " out " + std::to_string(out);
  const std::vector<uint8_t> w = random_blocks(type, out, in, rng);
  gputest::DeviceArray<uint8_t> w_dev = upload_blocks(w);
  std::vector<float> identity(size_t(in) * size_t(in), 0.0f);
  for (int r = 0; r < in; ++r) identity[size_t(r) * size_t(in) + size_t(r)] = 1.0f;
  gputest::DeviceArray<float> y_dev(size_t(in) * size_t(out));
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    // The device decoder's bits, and the CPU reference rounded to dtype: the same values.
    gputest::DeviceArray<uint16_t> decoded_dev(size_t(out) * size_t(in));
    launch_dequantize_rows(decoded_dev.get(), dtype, w_dev.get(), uint32_t(type), 0, out, out, in,
                           0, nullptr);
    const std::vector<uint16_t> decoded = decoded_dev.download();
    const std::vector<float> host = dequantized(type, w, in, out, dtype);
    size_t decode_misses = 0;
    for (size_t i = 0; i < decoded.size(); ++i) {
      const float value = from_bits(decoded[i], dtype);
      if (!(value == host[i])) ++decode_misses;
    }
    CHECK(decode_misses == 0);
    gputest::DeviceArray<uint16_t> x_dev(to_bits(identity, dtype));
    // Every tile unsplit, and split in 2 and 3 slices where k has that many 256-element steps
    // (one product is w, the rest exact zeros, so any slicing still reads w back exactly).
    const int steps = (in + kGemmQuantSliceElems - 1) / kGemmQuantSliceElems;
    for (int splits = 1; splits <= std::min(3, steps); ++splits) {
      const ForcedSplit forced(splits);
      for (int tile = -1; tile < gemm_quant_tile_count(); ++tile) {
        set_gemm_quant_tile(tile);
        INFO(name << " " << dtype_name(dtype) << " tile " << gemm_quant_tile_name(tile)
                  << " splits " << splits);
        y_dev.poison();
        gemm(x_dev.get(), w_dev.get(), type, y_dev.get(), in, in, out, true, dtype);
        const std::vector<float> y = y_dev.download();
        size_t misses = 0;
        for (int r = 0; r < in; ++r) {
          for (int o = 0; o < out; ++o) {
            const float want = from_bits(decoded[size_t(o) * size_t(in) + size_t(r)], dtype);
            const float got = y[size_t(r) * size_t(out) + size_t(o)];
            if (!(got == want) && misses++ < 5)
              MESSAGE("row " << r << " column " << o << " got " << got << " want " << want);
          }
        }
        CHECK(misses == 0);
      }
      set_gemm_quant_tile(-1);
    }
  }
}

}  // namespace

TEST_CASE("quantized GEMM: an identity x reads back launch_dequantize_rows' values, every tile") {
  std::mt19937 rng(11);
  for (GgmlType type : kTypes) {
    const int elems = int(ggml_type_traits(type).block_elems);
    // One block; three blocks and 7 rows; a long row whose last 64-element sub-step and last
    // 256-element copy are partial for the 32-element types (1120 = 4 x 256 + 96).
    std::vector<Shape> shapes = {Shape{elems, 1}, Shape{3 * elems, 7}};
    shapes.push_back(is_k_quant(type) ? Shape{1024, 200} : Shape{1120, 200});
    for (Shape shape : shapes) check_identity(type, shape, rng);
  }
}

TEST_CASE("quantized GEMM: llama-1b shapes, all five types, bf16 and fp16, batch invariance") {
  std::mt19937 rng(1);
  for (GgmlType type : kTypes) {
    for (Shape shape :
         {Shape{2048, 3072}, Shape{2048, 2048}, Shape{2048, 16384}, Shape{8192, 2048}})
      check_shape(type, shape, rng);
  }
}

TEST_CASE("quantized GEMM: llama-8b shapes (gate|up trimmed to 5000 rows)") {
  std::mt19937 rng(2);
  for (Shape shape : {Shape{4096, 6144}, Shape{4096, 5000}, Shape{14336, 4096}})
    check_shape(GgmlType::kQ4_K, shape, rng);
  check_shape(GgmlType::kQ6_K, Shape{14336, 4096}, rng);
  check_shape(GgmlType::kQ8_0, Shape{14336, 4096}, rng);
  check_shape(GgmlType::kQ4_0, Shape{4096, 5000}, rng);
  check_shape(GgmlType::kQ4_1, Shape{4096, 6144}, rng);
}

TEST_CASE("quantized GEMM: SmolLM2-135M shapes (K-quants only where in % 256 == 0)") {
  std::mt19937 rng(3);
  for (GgmlType type : kTypes) {
    if (!is_k_quant(type)) {
      // qkv (576 -> 960), o (576 -> 576), gate|up (576 -> 3072).
      for (Shape shape : {Shape{576, 960}, Shape{576, 576}, Shape{576, 3072}})
        check_shape(type, shape, rng);
    } else {
      CHECK_FALSE(gemm_quant_supported(uint32_t(type), 576));
    }
    check_shape(type, Shape{1536, 576}, rng);  // down
  }
}

TEST_CASE("quantized GEMM: every tile shape gives the same bits") {
  std::mt19937 rng(4);
  const GgmlType type = GgmlType::kQ6_K;
  const int in = 1536, out = 1000, n = 300;
  const std::vector<uint8_t> w = random_blocks(type, out, in, rng);
  const std::vector<float> x = random_activations(n, in, rng);
  gputest::DeviceArray<uint8_t> w_dev = upload_blocks(w);
  gputest::DeviceArray<uint16_t> x_dev(to_bits(x, DType::kBF16));
  gputest::DeviceArray<float> y_dev(size_t(n) * size_t(out));
  // in 1536: six 256-element steps, so 4 slices are uneven (1, 2, 1, 2 steps).
  for (int splits : {1, 2, 4, 6}) {
    const ForcedSplit forced(splits);
    std::vector<float> first;
    for (int tile = 0; tile < gemm_quant_tile_count(); ++tile) {
      set_gemm_quant_tile(tile);
      gemm(x_dev.get(), w_dev.get(), type, y_dev.get(), n, in, out, true, DType::kBF16);
      const std::vector<float> y = y_dev.download();
      if (tile == 0) {
        first = y;
      } else {
        INFO("splits " << splits << " tile " << gemm_quant_tile_name(tile));
        CHECK(std::memcmp(y.data(), first.data(), y.size() * 4) == 0);
      }
    }
    set_gemm_quant_tile(-1);
  }
}

TEST_CASE("quantized GEMM: launch_dequantize_rows + a plain fp32 product agree within the bound") {
  // The path the kernel replaces: decode on the device, then an fp32 product (here on the host,
  // summing in order: its own error is at most in 2^-24 sum |w x|).
  std::mt19937 rng(5);
  const int in = 2048, out = 333, n = 40;
  for (GgmlType type : kTypes) {
    const std::vector<uint8_t> w = random_blocks(type, out, in, rng);
    const std::vector<float> x = random_activations(n, in, rng);
    gputest::DeviceArray<uint8_t> w_dev = upload_blocks(w);
    gputest::DeviceArray<uint16_t> decoded_dev(size_t(out) * size_t(in));
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, DType::kBF16));
    gputest::DeviceArray<float> y_dev(size_t(n) * size_t(out));
    launch_dequantize_rows(decoded_dev.get(), DType::kBF16, w_dev.get(), uint32_t(type), 0, out,
                           out, in, 0, nullptr);
    gemm(x_dev.get(), w_dev.get(), type, y_dev.get(), n, in, out, true, DType::kBF16);
    const std::vector<uint16_t> decoded = decoded_dev.download();
    const std::vector<float> y = y_dev.download();
    const double rel = accumulation_bound(in, gemm_quant_splits(uint32_t(type), in, out)) +
                       in * std::ldexp(1.0, -24);
    size_t misses = 0;
    for (int r = 0; r < n; ++r) {
      for (int o = 0; o < out; ++o) {
        float sum = 0.0f;
        double abs_sum = 0.0;
        for (int k = 0; k < in; ++k) {
          const float wk = gputest::bf16_bits_to_f32(decoded[size_t(o) * in + size_t(k)]);
          const float xk = x[size_t(r) * in + size_t(k)];
          sum += wk * xk;
          abs_sum += std::fabs(double(wk) * xk);
        }
        const double err = std::fabs(double(y[size_t(r) * out + size_t(o)]) - sum);
        if (!(err <= rel * abs_sum + 1e-30) && misses++ < 5)
          MESSAGE(ggml_type_traits(type).name << " row " << r << " column " << o << " got "
                                              << y[size_t(r) * out + size_t(o)] << " want " << sum);
      }
    }
    CHECK(misses == 0);
  }
}

TEST_CASE("quantized GEMM: row ranges of different types fill one output through y_stride") {
  // Q4_K_M's q and k (Q4_K) beside a Q6_K v: one launch per range into its columns of the shared
  // output, whose rows are y_stride apart; each range matches its own reference, every column of
  // rows < n is written, row n is not.
  std::mt19937 rng(6);
  const int in = 512, out_a = 24, out_b = 40, total = out_a + out_b, rows = 200;
  const GgmlType type_a = GgmlType::kQ4_K, type_b = GgmlType::kQ6_K;
  const std::vector<uint8_t> w_a = random_blocks(type_a, out_a, in, rng);
  const std::vector<uint8_t> w_b = random_blocks(type_b, out_b, in, rng);
  const std::vector<float> x = random_activations(rows, in, rng);
  std::vector<int> all_rows(rows);
  for (int r = 0; r < rows; ++r) all_rows[size_t(r)] = r;
  gputest::DeviceArray<uint8_t> w_a_dev = upload_blocks(w_a), w_b_dev = upload_blocks(w_b);
  // The rule (no split at in 512), then 2 slices: the two ranges' launches share the workspace.
  for (const auto& [dtype, splits] :
       {std::pair{DType::kBF16, 0}, std::pair{DType::kFP16, 0}, std::pair{DType::kBF16, 2}}) {
    const ForcedSplit forced(splits);
    const Reference ref_a =
        reference(dequantized(type_a, w_a, in, out_a, dtype), x, all_rows, in, out_a);
    const Reference ref_b =
        reference(dequantized(type_b, w_b, in, out_b, dtype), x, all_rows, in, out_b);
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, dtype));
    gputest::DeviceArray<float> y_dev(size_t(rows) * total);
    for (int n : {9, 33, 100, rows - 1}) {
      CAPTURE(n);
      CAPTURE(splits);
      y_dev.poison();
      gemm(x_dev.get(), w_a_dev.get(), type_a, y_dev.get(), n, in, out_a, true, dtype, total);
      gemm(x_dev.get(), w_b_dev.get(), type_b, y_dev.get() + out_a, n, in, out_b, true, dtype,
           total);
      const std::vector<float> y = y_dev.download();
      std::vector<float> got_b(y.size());
      std::copy(y.begin() + out_a, y.end(), got_b.begin());  // row r, column o at r * total + o
      const std::vector<int> checked(all_rows.begin(), all_rows.begin() + n);
      Reference part_a = ref_a, part_b = ref_b;  // rows < n of the references
      part_a.y.resize(size_t(n) * out_a);
      part_a.abs_sum.resize(size_t(n) * out_a);
      part_b.y.resize(size_t(n) * out_b);
      part_b.abs_sum.resize(size_t(n) * out_b);
      check_rows(y, total, part_a, checked, in, out_a,
                 gemm_quant_splits(uint32_t(type_a), in, out_a), "Q4_K range");
      check_rows(got_b, total, part_b, checked, in, out_b,
                 gemm_quant_splits(uint32_t(type_b), in, out_b), "Q6_K range");
      CHECK(std::isnan(y[size_t(n) * total]));
    }
  }
}

TEST_CASE("quantized GEMM: split-K at forced slice counts: the bound, and one result per count") {
  // Each count (up to the 256-element steps of k) against the reference within its bound, and
  // different bits from the unsplit sum somewhere (a kernel that ignored its slices would not
  // change the order of the adds); then at that count every tile and n gives the same bits, and so
  // do launches on a workspace that holds only 16 or 48 rows (n runs in pieces); the dtype output
  // is the fp32 one rounded. Every launch shares the workspace, so a counter left non-zero would
  // make a later launch add the wrong partials.
  struct Case {
    GgmlType type;
    int in, out;
  };
  std::mt19937 rng(7);
  const int n = 300;
  // Q8_0 in 1120: five steps, the last partial (96 elements); Q4_K in 2048: eight steps.
  for (const Case c : {Case{GgmlType::kQ8_0, 1120, 333}, Case{GgmlType::kQ4_K, 2048, 200}}) {
    const std::vector<uint8_t> w = random_blocks(c.type, c.out, c.in, rng);
    const std::vector<float> x = random_activations(n, c.in, rng);
    std::vector<int> rows;
    for (int r : kCheckedRows)
      if (r < n) rows.push_back(r);
    rows.push_back(n - 1);
    const Reference ref =
        reference(dequantized(c.type, w, c.in, c.out, DType::kBF16), x, rows, c.in, c.out);
    gputest::DeviceArray<uint8_t> w_dev = upload_blocks(w);
    gputest::DeviceArray<uint16_t> x_dev(to_bits(x, DType::kBF16));
    gputest::DeviceArray<float> y_dev(size_t(n) * size_t(c.out));
    gputest::DeviceArray<uint16_t> yt_dev(size_t(n) * size_t(c.out));
    const int steps = (c.in + kGemmQuantSliceElems - 1) / kGemmQuantSliceElems;
    std::vector<float> unsplit;
    for (int splits : {1, 2, 3, 5, 8}) {
      if (splits > steps) continue;
      const ForcedSplit forced(splits);
      const std::string what = std::string(ggml_type_traits(c.type).name) + " in " +
                               std::to_string(c.in) + " splits " + std::to_string(splits);
      INFO(what);
      REQUIRE(gemm_quant_splits(uint32_t(c.type), c.in, c.out) == splits);
      gemm(x_dev.get(), w_dev.get(), c.type, y_dev.get(), n, c.in, c.out, true, DType::kBF16);
      gemm(x_dev.get(), w_dev.get(), c.type, yt_dev.get(), n, c.in, c.out, false, DType::kBF16);
      const std::vector<float> full = y_dev.download();
      check_rows(full, c.out, ref, rows, c.in, c.out, splits, what);
      check_rounded(yt_dev.download(), full, n, c.out, c.out, DType::kBF16, what + " dtype out");
      if (splits == 1) {
        unsplit = full;
      } else {
        size_t differing = 0;
        for (size_t i = 0; i < full.size(); ++i) differing += full[i] != unsplit[i];
        CHECK(differing > 0);
      }
      for (int tile = -1; tile < gemm_quant_tile_count(); ++tile) {
        set_gemm_quant_tile(tile);
        for (int rows_n : {9, 16, 33, 100}) {
          INFO("tile " << gemm_quant_tile_name(tile) << " n " << rows_n);
          y_dev.poison();
          gemm(x_dev.get(), w_dev.get(), c.type, y_dev.get(), rows_n, c.in, c.out, true,
               DType::kBF16);
          const std::vector<float> y = y_dev.download();
          CHECK(std::memcmp(y.data(), full.data(), size_t(rows_n) * size_t(c.out) * 4) == 0);
          CHECK(std::isnan(y[size_t(rows_n) * size_t(c.out)]));
        }
      }
      set_gemm_quant_tile(-1);
      if (splits == 1) continue;
      // Own workspaces (zeroed): a workspace's layout follows from its size, so these sizes
      // must not share the file's.
      for (int fit : {16, 48}) {
        INFO("a workspace of " << fit << " rows");
        const int64_t bytes = gemm_quant_workspace_bytes(splits, fit, c.out);
        gputest::DeviceArray<uint8_t> small(std::vector<uint8_t>(size_t(bytes), 0));
        y_dev.poison();
        launch_gemm_quant(x_dev.get(), w_dev.get(), uint32_t(c.type), y_dev.get(), n, c.in, c.out,
                          true, DType::kBF16, small.get(), bytes, nullptr);
        const std::vector<float> y = y_dev.download();
        CHECK(std::memcmp(y.data(), full.data(), y.size() * 4) == 0);
      }
      // Fewer than 16 rows, or none: refused, not run.
      int64_t too_small = gemm_quant_workspace_bytes(splits, 16, c.out);
      while (gemm_quant_workspace_fits(too_small, splits, 16, c.out)) too_small -= 256;
      REQUIRE(too_small > 0);
      gputest::DeviceArray<uint8_t> small(std::vector<uint8_t>(size_t(too_small), 0));
      CHECK_THROWS(launch_gemm_quant(x_dev.get(), w_dev.get(), uint32_t(c.type), y_dev.get(), n,
                                     c.in, c.out, true, DType::kBF16, small.get(), too_small,
                                     nullptr));
      CHECK_THROWS(launch_gemm_quant(x_dev.get(), w_dev.get(), uint32_t(c.type), y_dev.get(), n,
                                     c.in, c.out, true, DType::kBF16, nullptr, 0, nullptr));
    }
  }
}

TEST_CASE("quantized GEMM: the split rule depends on the shape only, and bounds the workspace") {
  // The rule's counts at the llama shapes on 132 SMs (H100): tiles of 32 columns x slices within
  // 4 x 132 = 528; the first split needs slices of 1024 elements of k, the next ones 2048.
  CHECK(gemm_quant_split_k(2048, 3072, 132) == 2);   // llama-1b qkv: 96 tiles
  CHECK(gemm_quant_split_k(2048, 2048, 132) == 2);   // o: 64 tiles, k 2048
  CHECK(gemm_quant_split_k(2048, 16384, 132) == 1);  // gate|up: 512 tiles
  CHECK(gemm_quant_split_k(8192, 2048, 132) == 4);   // down: 64 tiles, slices of 2048
  CHECK(gemm_quant_split_k(4096, 6144, 132) == 2);   // llama-8b qkv: 192 tiles
  CHECK(gemm_quant_split_k(4096, 4096, 132) == 2);   // o: a third slice would be 1024 long
  CHECK(gemm_quant_split_k(14336, 4096, 132) == 4);  // down: 128 tiles
  CHECK(gemm_quant_split_k(4096, 28672, 132) == 1);  // gate|up
  CHECK(gemm_quant_split_k(1536, 576, 132) == 1);    // SmolLM2 down: k too short
  CHECK(gemm_quant_split_k(32768, 512, 132) == 16);  // at most 16
  for (int in : {1024, 2048, 4096, 8192, 14336}) {
    for (int out : {32, 100, 576, 2048, 4096, 6144, 16384}) {
      const int splits = gemm_quant_split_k(in, out, 132);
      if (splits > 1) {
        CHECK(gemm_quant_workspace_fits(gemm_quant_workspace_bound(64, 132), splits, 64, out));
      }
    }
  }
}

TEST_CASE("quantized GEMM: the shape checks") {
  CHECK(gemm_quant_supported(uint32_t(GgmlType::kQ8_0), 32));
  CHECK(gemm_quant_supported(uint32_t(GgmlType::kQ4_1), 576));
  CHECK_FALSE(gemm_quant_supported(uint32_t(GgmlType::kQ4_K), 576));
  CHECK_FALSE(gemm_quant_supported(uint32_t(GgmlType::kQ6_K), 0));
  CHECK_FALSE(gemm_quant_supported(uint32_t(GgmlType::kQ5_0), 64));
  CHECK_FALSE(gemm_quant_supported(uint32_t(GgmlType::kF16), 64));
  CHECK(gemm_quant_tile_count() >= 1);
}
