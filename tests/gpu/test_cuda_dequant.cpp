// GGUF blocks decoded on the device (kernels/cuda/dequant.cu, StoredUploader) against the CPU
// reference rose::dequantize, for all 13 types, both output dtypes and the q/k un-permutation,
// through the generic kernel and the staged kernels of the five step-time types.
// The decoders use the reference's fp32 operations in its order with no fma contraction, so the
// device result must equal the reference's fp32 value rounded to bf16/fp16 exactly (bit for bit).
// Then a quantized GGUF model must give the same logits on the CUDA backend whether its weights
// were decoded on the device or read as fp32 on the host.
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/stored_upload.h"
#include "engine/model/gguf_model.h"
#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "kernels/cuda/dequant.cuh"
#include "tests/gpu/gpu_test_util.h"
#include "tests/stored_parts.h"

using namespace rose;

namespace {

constexpr GgmlType kAllTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
    GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
};

// Byte offsets of each block's fp16 scale fields (ggml's block layouts, engine/model/quant.cpp).
std::vector<int> half_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kQ8_0:
      return {0};
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ2_K:
      return {80, 82};
    case GgmlType::kQ3_K:
      return {108};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

// A finite fp16 of either sign over exponents 0..20 (subnormals included), so scaled values
// span tiny to large without Inf or NaN.
uint16_t random_half(std::mt19937& rng) {
  const uint32_t r = rng();
  return uint16_t((r & 0x8000u) | (((r >> 10) % 21) << 10) | (r & 0x3FFu));
}

void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}

// Random blocks of `type` for rows x cols elements: random bytes with finite scale fields; float
// types hold finite values only (F32 from 2^-27 to 2^23, so fp16 output meets subnormals and
// overflow to Inf, which both sides round alike).
std::vector<uint8_t> random_blocks(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const int64_t blocks = rows * cols / traits.block_elems;
  std::vector<uint8_t> bytes(size_t(blocks * traits.block_bytes));
  for (uint8_t& b : bytes) b = uint8_t(rng());
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* block = bytes.data() + i * traits.block_bytes;
    if (type == GgmlType::kF16) put16(block, random_half(rng));
    if (type == GgmlType::kBF16 && ((block[1] & 0x7F) == 0x7F) && (block[0] & 0x80)) {
      block[1] &= 0xFE;  // exponent 0xFF (Inf/NaN) -> 0xFD
    }
    if (type == GgmlType::kF32) {
      const uint32_t r = rng();
      const uint32_t bits = (r & 0x80000000u) | ((100 + (r >> 8) % 51) << 23) | (rng() & 0x7FFFFFu);
      std::memcpy(block, &bits, 4);
    }
    for (int offset : half_offsets(type)) put16(block + offset, random_half(rng));
  }
  return bytes;
}

uint16_t round_to(DType dtype, float x) {
  if (dtype == DType::kBF16) return gputest::f32_to_bf16_bits(x);
  const __half h = __float2half_rn(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

// The CPU reference for parts laid out one after another: dequantize, un-permute
// (test::from_stored_parts), round.
std::vector<uint16_t> reference(const std::vector<StoredPart>& parts, DType dtype) {
  const std::vector<float> values = test::from_stored_parts(parts);
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = round_to(dtype, values[i]);
  return out;
}

void check_bits(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t misses = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (misses++ < 5)
      MESSAGE(what << ": element " << i << " got 0x" << std::hex << got[i] << " want 0x" << want[i]
                   << std::dec);
  }
  INFO(what);
  CHECK(misses == 0);
}

const char* dtype_name(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

}  // namespace

TEST_CASE(
    "device dequantization equals the CPU reference bit for bit: 13 types, un-permuted rows") {
  constexpr int64_t kRows = 16, kCols = 512, kChunkRows = 3;  // chunks of 3 rows: odd row_begin
  std::mt19937 rng(20261123);
  for (GgmlType type : kAllTypes) {
    const GgmlTypeTraits& traits = ggml_type_traits(type);
    CHECK(device_dequant_supported(uint32_t(type)));
    const std::vector<uint8_t> bytes = random_blocks(type, kRows, kCols, rng);
    const int64_t row_bytes = kCols / traits.block_elems * traits.block_bytes;
    gputest::DeviceArray<uint8_t> src(bytes);
    for (int heads : {0, 2, 4}) {
      for (DType dtype : {DType::kBF16, DType::kFP16}) {
        const StoredPart part{type, bytes, kRows, kCols, heads};
        gputest::DeviceArray<uint16_t> dst(size_t(kRows * kCols));
        for (int64_t row = 0; row < kRows; row += kChunkRows) {
          const int64_t rows = std::min(kChunkRows, kRows - row);
          launch_dequantize_rows(dst.get(), dtype, src.get() + row * row_bytes, uint32_t(type), row,
                                 rows, kRows, kCols, heads, nullptr);
        }
        const std::vector<uint16_t> want = reference({part}, dtype);
        const std::string what =
            std::string(traits.name) + " " + dtype_name(dtype) + " heads " + std::to_string(heads);
        check_bits(dst.download(), want, what);
        // The generic kernel, which the staged types (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) take only for
        // an unaligned destination: the same bits.
        dst.poison();
        launch_dequantize_rows_generic(dst.get(), dtype, src.get(), uint32_t(type), 0, kRows, kRows,
                                       kCols, heads, nullptr);
        check_bits(dst.download(), want, what + " generic");
      }
    }
  }
}

// The staged kernels (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K: the step-time decode of
// CudaBackend::dequantize) on shapes that reach all their cases: a llama-1b projection (more chunks
// than the grid holds, so each thread block loops and both staging buffers turn over), a few rows,
// cols a multiple of 32 but not of 256, and a last chunk cut short. Every decode is split at an odd
// row, so the second call has row_begin > 0 and its source another alignment; the small shapes
// also shift the whole source by 8, 4, 2 and 1 bytes, which selects each staging copy width.
TEST_CASE(
    "staged decoders equal the CPU reference bit for bit: shapes, row_begin, heads, alignment") {
  constexpr GgmlType kStagedTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                       GgmlType::kQ4_K, GgmlType::kQ6_K};
  struct Case {
    int64_t rows, cols;
    int heads;
  };
  std::mt19937 rng(20261124);
  for (GgmlType type : kStagedTypes) {
    const GgmlTypeTraits& traits = ggml_type_traits(type);
    const bool k_quant = traits.block_elems == 256;
    const Case cases[] = {
        {3072, 2048, 24},                // llama-1b's qkv, un-permuted in heads of 128 rows
        {3072, 2048, 0},                 // the same in place (the step-time call)
        {7, 256, 0},                     // one chunk, mostly empty
        {12, k_quant ? 768 : 608, 2},    // 608 = 19 x 32; heads of 6 rows
        {37, k_quant ? 2816 : 1376, 0},  // 11 K-blocks or 43 blocks a row: a short last chunk
    };
    for (const Case& c : cases) {
      const std::vector<uint8_t> bytes = random_blocks(type, c.rows, c.cols, rng);
      const int64_t row_bytes = c.cols / traits.block_elems * traits.block_bytes;
      const StoredPart part{type, bytes, c.rows, c.cols, c.heads};
      const std::vector<float> values = test::from_stored_parts({part});
      const int64_t split = (c.rows / 3) | 1;
      const std::vector<int> shifts =
          c.rows * c.cols > 100000 ? std::vector<int>{0} : std::vector<int>{0, 8, 4, 2, 1};
      for (int shift : shifts) {
        std::vector<uint8_t> shifted(size_t(shift), 0);
        shifted.insert(shifted.end(), bytes.begin(), bytes.end());
        gputest::DeviceArray<uint8_t> src(shifted);
        const uint8_t* blocks = src.get() + shift;
        for (DType dtype : {DType::kBF16, DType::kFP16}) {
          gputest::DeviceArray<uint16_t> dst(size_t(c.rows * c.cols));
          launch_dequantize_rows(dst.get(), dtype, blocks, uint32_t(type), 0, split, c.rows, c.cols,
                                 c.heads, nullptr);
          launch_dequantize_rows(dst.get(), dtype, blocks + split * row_bytes, uint32_t(type),
                                 split, c.rows - split, c.rows, c.cols, c.heads, nullptr);
          std::vector<uint16_t> want(values.size());
          for (size_t i = 0; i < values.size(); ++i) want[i] = round_to(dtype, values[i]);
          check_bits(dst.download(), want,
                     std::string(traits.name) + " " + dtype_name(dtype) + " " +
                         std::to_string(c.rows) + "x" + std::to_string(c.cols) + " heads " +
                         std::to_string(c.heads) + " shift " + std::to_string(shift));
        }
      }
    }
  }
}

TEST_CASE("StoredUploader: parts of several types through row chunks, both staging slots") {
  std::mt19937 rng(7);
  constexpr int64_t kCols = 512;
  const std::vector<uint8_t> q = random_blocks(GgmlType::kQ4_K, 32, kCols, rng);
  const std::vector<uint8_t> k = random_blocks(GgmlType::kQ8_0, 16, kCols, rng);
  const std::vector<uint8_t> v = random_blocks(GgmlType::kF16, 16, kCols, rng);
  const std::vector<StoredPart> parts = {{GgmlType::kQ4_K, q, 32, kCols, 4},
                                         {GgmlType::kQ8_0, k, 16, kCols, 2},
                                         {GgmlType::kF16, v, 16, kCols, 0}};
  REQUIRE(device_decodable(parts));
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    gputest::DeviceArray<uint16_t> dst(size_t(64 * kCols));
    // Staging for three F16 rows: every part takes several chunks, alternating the two slots.
    StoredUploader uploader(3 * kCols * 2, nullptr);
    uploader.upload(parts, dst.get(), dtype);
    uploader.finish();
    CHECK(uploader.bytes_uploaded() == int64_t(q.size() + k.size() + v.size()));
    check_bits(dst.download(), reference(parts, dtype),
               std::string("uploader ") + dtype_name(dtype));
  }
}

namespace {

// The same GGUF weights without stored_parts: the CUDA backend takes its host fp32 path.
class HostPathOnly : public WeightSource {
 public:
  explicit HostPathOnly(const WeightSource& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  void read_f32(const std::string& name, std::span<float> dst) const override {
    inner_.read_f32(name, dst);
  }

 private:
  const WeightSource& inner_;
};

constexpr int kBlockSize = 16;

// The last position's logits of `prompt` prefilled alone from block 0.
std::vector<float> prefill_logits(Backend& backend, const std::vector<int32_t>& prompt) {
  const int n = static_cast<int>(prompt.size());
  StepPlan plan;
  plan.clear();
  plan.token_ids = prompt;
  for (int i = 0; i < n; ++i) {
    plan.positions.push_back(i);
    plan.slot_mapping.push_back(i);
  }
  plan.query_start = {0, n};
  plan.context_lens = {n};
  plan.block_table_stride = (n + kBlockSize - 1) / kBlockSize;
  for (int b = 0; b < plan.block_table_stride; ++b) plan.block_tables.push_back(b);
  plan.do_sample = {1};
  plan.sampling = {SamplingParams{}};
  plan.sample_index = {0};
  plan.return_logits = true;
  StepOutput out;
  backend.execute(plan, out);
  const int vocab = backend.config().vocab_size;
  REQUIRE(out.logits.size() >= size_t(vocab));
  return {out.logits.begin(), out.logits.begin() + vocab};
}

void check_gguf_model(const char* path, const std::string& dtype) {
  CAPTURE(path);
  CAPTURE(dtype);
  const auto model = GgufModel::open(path);
  const auto weights = GgufModel::weights(model);
  for (const TensorSpec& spec : canonical_tensors(model->config())) {
    const auto parts = weights->stored_parts(spec.name);
    REQUIRE(parts);  // the device path is really taken
    CHECK(device_decodable(*parts));
  }
  BackendOptions options;
  options.block_size = kBlockSize;
  options.num_kv_blocks = 16;
  options.max_num_seqs = 4;
  options.max_num_batched_tokens = 64;
  options.max_model_len = 64;
  options.dtype = dtype;
  options.cuda_graphs = false;
  options.dequantize_weights = true;  // decoded at load, as the host path is (not kept in blocks)
  const HostPathOnly host_only(*weights);
  const std::unique_ptr<Backend> device_path = make_cuda_backend(*weights, options);
  const std::unique_ptr<Backend> host_path = make_cuda_backend(host_only, options);
  const std::unique_ptr<Backend> cpu = make_cpu_backend(*weights, options);
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(23);
  for (int32_t& t : prompt) t = int32_t(rng() % uint32_t(model->config().vocab_size));
  const std::vector<float> got = prefill_logits(*device_path, prompt);
  const std::vector<float> want = prefill_logits(*host_path, prompt);
  // Same bf16/fp16 weights, same kernels: the logits agree exactly.
  CHECK(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
  // And both stay near the fp32 CPU backend (the bound of test_cuda_backend and the fixtures).
  const std::vector<float> ref = prefill_logits(*cpu, prompt);
  float max_ref = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < ref.size(); ++i) {
    REQUIRE(std::isfinite(got[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
    max_diff = std::max(max_diff, std::abs(got[i] - ref[i]));
  }
  CAPTURE(max_ref);
  CHECK(max_diff <= 0.05f * max_ref);
}

}  // namespace

TEST_CASE("GGUF models: device-decoded weights give the host path's logits exactly") {
  for (const char* dtype : {"bf16", "fp16"}) {
    check_gguf_model("tests/fixtures/gguf/tiny_llama_quant.gguf", dtype);  // every type, q/k
    check_gguf_model("tests/fixtures/gguf/tiny_llama.gguf", dtype);        // F32, q/k
  }
}
