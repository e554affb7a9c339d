// --quantize (engine/model/quantized_source.h): which tensors are quantized, that the stored
// blocks are quantize() of the original values and read_f32() their dequantization (so the CPU
// backend computes with exactly what the GPU keeps), and the usage errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/model/gguf_model.h"
#include "engine/model/presets.h"
#include "engine/model/quant.h"
#include "engine/model/quantized_source.h"

using namespace rose;

namespace {

std::vector<float> read_all(const WeightSource& source, const TensorSpec& spec) {
  std::vector<float> values(size_t(spec.numel()));
  source.read_f32(spec.name, values);
  return values;
}

}  // namespace

TEST_CASE("is_linear_matrix: projections and the lm_head; tok_emb only when tied") {
  ModelConfig config = open_model("tiny")->config();
  REQUIRE(config.tie_word_embeddings);
  for (const char* name : {"layers.0.qkv.weight", "layers.3.o.weight", "layers.1.up.weight",
                           "layers.2.down.weight", "lm_head.weight", "tok_emb"}) {
    CAPTURE(name);
    CHECK(is_linear_matrix(config, name));
  }
  for (const char* name : {"layers.0.qkv.bias", "layers.0.attn_norm.weight", "final_norm.weight",
                           "pos_emb", "layers.0.up.bias"}) {
    CAPTURE(name);
    CHECK_FALSE(is_linear_matrix(config, name));
  }
  config.tie_word_embeddings = false;
  CHECK_FALSE(is_linear_matrix(config, "tok_emb"));
}

TEST_CASE("parse_quantize_type: the four --quantize spellings") {
  CHECK(parse_quantize_type("q8_0") == GgmlType::kQ8_0);
  CHECK(parse_quantize_type("q4_0") == GgmlType::kQ4_0);
  CHECK(parse_quantize_type("q4_k") == GgmlType::kQ4_K);
  CHECK(parse_quantize_type("q6_k") == GgmlType::kQ6_K);
  CHECK_FALSE(parse_quantize_type("Q4_K"));
  CHECK_FALSE(parse_quantize_type("q4_1"));
}

TEST_CASE("quantize_weights: blocks are quantize() of the preset's values, read_f32 decodes them") {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const GgmlTypeTraits& traits = ggml_type_traits(type);
    const std::string type_name = traits.name;
    CAPTURE(type_name);
    const std::unique_ptr<WeightSource> plain = open_model("tiny");
    const std::unique_ptr<WeightSource> quantized = quantize_weights(open_model("tiny"), type);
    const ModelConfig& config = quantized->config();
    int blocks_checked = 0, dense = 0;
    for (const TensorSpec& spec : canonical_tensors(config)) {
      CAPTURE(spec.name);
      const std::vector<float> original = read_all(*plain, spec);
      const std::vector<float> got = read_all(*quantized, spec);
      const std::optional<std::vector<StoredPart>> parts = quantized->stored_parts(spec.name);
      // tiny's intermediate size 688 is not a whole number of 32- or 256-element blocks, so the
      // down projection (in = 688) stays dense, as do the norms.
      const bool expect_quantized =
          is_linear_matrix(config, spec.name) && spec.shape.back() % traits.block_elems == 0;
      CHECK(parts.has_value() == expect_quantized);
      if (!expect_quantized) {
        CHECK(std::memcmp(got.data(), original.data(), got.size() * 4) == 0);
        CHECK(quantized->synthetic(spec.name).has_value());  // still generated on the device
        ++dense;
        continue;
      }
      CHECK_FALSE(quantized->synthetic(spec.name).has_value());
      REQUIRE(parts->size() == 1);
      const StoredPart& part = parts->front();
      CHECK(part.type == type);
      CHECK(part.rows == spec.shape[0]);
      CHECK(part.cols == spec.shape[1]);
      CHECK(part.unpermute_heads == 0);
      std::vector<uint8_t> want(size_t(spec.numel() / traits.block_elems * traits.block_bytes));
      quantize(type, original, want.data());
      REQUIRE(part.bytes.size() == want.size());
      CHECK(std::memcmp(part.bytes.data(), want.data(), want.size()) == 0);
      std::vector<float> decoded(original.size());
      dequantize(type, want.data(), decoded);
      CHECK(std::memcmp(got.data(), decoded.data(), got.size() * 4) == 0);
      // Quantized, so not the original values (a uniform preset has no exactly representable
      // rows), but close: well inside the largest element.
      CHECK(std::memcmp(got.data(), original.data(), got.size() * 4) != 0);
      ++blocks_checked;
    }
    // tok_emb (tied lm_head) and qkv, o, up of 4 layers; down of 4 layers stays dense.
    CHECK(blocks_checked == 1 + 3 * config.num_layers);
    CHECK(dense > config.num_layers);
    CHECK(linear_weight_types(*quantized) == std::string(traits.name) + " x " +
                                                 std::to_string(1 + 3 * config.num_layers) +
                                                 ", dense x " + std::to_string(config.num_layers));
    CHECK(has_quantized_linear(*quantized));
    CHECK_FALSE(has_quantized_linear(*plain));
    CHECK(linear_weight_types(*plain) == "dense x " + std::to_string(1 + 4 * config.num_layers));
  }
}

TEST_CASE("quantize_weights: the blocks stay valid and are made once") {
  const std::unique_ptr<WeightSource> quantized =
      quantize_weights(open_model("tiny"), GgmlType::kQ8_0);
  const auto first = quantized->stored_parts("layers.0.qkv.weight");
  const auto again = quantized->stored_parts("layers.0.qkv.weight");
  REQUIRE(first);
  REQUIRE(again);
  CHECK(first->front().bytes.data() == again->front().bytes.data());
}

TEST_CASE("quantize_weights: a GGUF keeps its own types; unsupported types are refused") {
  CHECK_THROWS_WITH_AS(
      quantize_weights(open_gguf_weights("tests/fixtures/gguf/tiny_llama_quant.gguf"),
                       GgmlType::kQ8_0),
      doctest::Contains("a GGUF keeps its own types"), Error);
  CHECK_THROWS_WITH_AS(quantize_weights(open_model("tiny"), GgmlType::kQ5_K),
                       doctest::Contains("no quantizer"), Error);
  CHECK_THROWS_WITH_AS(
      quantize_weights(open_gguf_weights("tests/fixtures/gguf/tiny_llama_quant.gguf"),
                       *QuantizeScheme::parse("q4_k_m")),
      doctest::Contains("a GGUF keeps its own types"), Error);
  CHECK(QuantizeScheme::parse("q4_k_m")->types() ==
        std::vector<GgmlType>{GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0});
  CHECK(QuantizeScheme::single(GgmlType::kQ8_0).types() == std::vector<GgmlType>{GgmlType::kQ8_0});
}

TEST_CASE("use_more_bits: llama.cpp's layers for 4, 16 and 32 layers, counted by hand") {
  const auto picked = [](int num_layers) {
    std::vector<int> layers;
    for (int i = 0; i < num_layers; ++i) {
      if (use_more_bits(i, num_layers)) layers.push_back(i);
    }
    return layers;
  };
  // 4: n/8 = 0, so only i >= 3 and (i - 0) % 3 == 2.
  CHECK(picked(4) == std::vector<int>{2, 3});
  // 16: i < 2, i >= 14, and (i - 2) % 3 == 2: 4, 7, 10, 13.
  CHECK(picked(16) == std::vector<int>{0, 1, 4, 7, 10, 13, 14, 15});
  // 32 (llama-8b): i < 4, i >= 28, and (i - 4) % 3 == 2: 6, 9, ..., 27.
  CHECK(picked(32) == std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31});
}

TEST_CASE("QuantizeScheme: the spellings, and q4_k_m's type for each matrix and qkv row") {
  CHECK(QuantizeScheme::parse("q4_k")->name() == "q4_k");
  CHECK(QuantizeScheme::parse("q4_k_m")->name() == "q4_k_m");
  CHECK(QuantizeScheme::single(GgmlType::kQ6_K).name() == "q6_k");
  CHECK_FALSE(QuantizeScheme::parse("q4_k_s"));
  CHECK_FALSE(QuantizeScheme::parse("Q4_K_M"));
  const QuantizeScheme mix = *QuantizeScheme::parse("q4_k_m");
  const ModelConfig config = open_model("llama-1b")->config();  // 16 layers, q 2048, kv 512
  const int64_t H = config.hidden_size, qkv = config.qkv_dim(), kv = config.kv_dim();
  using Runs = std::vector<std::pair<int64_t, GgmlType>>;
  const auto runs = [&](const std::string& name, int64_t rows, int64_t cols) {
    Runs out;
    for (const QuantizedRun& run : mix.runs(config, name, rows, cols)) {
      out.emplace_back(run.rows, run.type);
    }
    return out;
  };
  CHECK(runs("tok_emb", config.vocab_size, H) == Runs{{config.vocab_size, GgmlType::kQ6_K}});
  // Layer 0 gets more bits: v's rows in Q6_K, after q and k's in Q4_K; layer 2 does not.
  CHECK(runs("layers.0.qkv.weight", qkv, H) ==
        Runs{{qkv - kv, GgmlType::kQ4_K}, {kv, GgmlType::kQ6_K}});
  CHECK(runs("layers.2.qkv.weight", qkv, H) == Runs{{qkv, GgmlType::kQ4_K}});
  CHECK(runs("layers.13.qkv.weight", qkv, H) ==
        Runs{{qkv - kv, GgmlType::kQ4_K}, {kv, GgmlType::kQ6_K}});
  CHECK(runs("layers.4.down.weight", H, 8192) == Runs{{H, GgmlType::kQ6_K}});
  CHECK(runs("layers.5.down.weight", H, 8192) == Runs{{H, GgmlType::kQ4_K}});
  CHECK(runs("layers.0.o.weight", H, H) == Runs{{H, GgmlType::kQ4_K}});
  CHECK(runs("layers.15.up.weight", 2 * 8192, H) == Runs{{2 * 8192, GgmlType::kQ4_K}});
  // Rows that are not whole 256-element blocks (SmolLM2's 576): the lm_head falls back to Q8_0,
  // as llama.cpp's does; the rest stay dense.
  CHECK(runs("lm_head.weight", 49152, 576) == Runs{{49152, GgmlType::kQ8_0}});
  CHECK(runs("layers.0.qkv.weight", 960, 576).empty());
  CHECK(runs("layers.0.attn_norm.weight", 1, H).empty());
  // A single type stores every matrix with whole blocks in it.
  CHECK(
      QuantizeScheme::single(GgmlType::kQ8_0).runs(config, "layers.0.qkv.weight", qkv, H).size() ==
      1);
}

TEST_CASE("quantize_weights q4_k_m: each run's blocks are quantize() of its rows") {
  const std::unique_ptr<WeightSource> plain = open_model("tiny");
  const std::unique_ptr<WeightSource> mixed =
      quantize_weights(open_model("tiny"), *QuantizeScheme::parse("q4_k_m"));
  const ModelConfig& config = mixed->config();
  REQUIRE(config.num_layers == 4);  // layers 2 and 3 get more bits
  CHECK(linear_weight_types(*mixed) == "Q4_K x 12, Q6_K x 3, dense x 4");
  for (const char* name : {"layers.3.qkv.weight", "layers.1.qkv.weight", "tok_emb"}) {
    CAPTURE(name);
    const std::vector<TensorSpec> specs = canonical_tensors(config);
    const TensorSpec spec = *std::find_if(specs.begin(), specs.end(),
                                          [&](const TensorSpec& t) { return t.name == name; });
    const std::vector<float> original = read_all(*plain, spec);
    const std::vector<float> got = read_all(*mixed, spec);
    const std::vector<StoredPart> parts = *mixed->stored_parts(name);
    const bool split = std::string(name) == "layers.3.qkv.weight";
    REQUIRE(parts.size() == (split ? 2u : 1u));
    int64_t row = 0;
    for (const StoredPart& part : parts) {
      const GgmlTypeTraits& traits = ggml_type_traits(part.type);
      const size_t first = size_t(row * part.cols), count = size_t(part.rows * part.cols);
      const std::span<const float> rows = std::span<const float>(original).subspan(first, count);
      std::vector<uint8_t> want(count / size_t(traits.block_elems) * size_t(traits.block_bytes));
      quantize(part.type, rows, want.data());
      REQUIRE(part.bytes.size() == want.size());
      CHECK(std::memcmp(part.bytes.data(), want.data(), want.size()) == 0);
      std::vector<float> decoded(count);
      dequantize(part.type, want.data(), decoded);
      CHECK(std::memcmp(got.data() + first, decoded.data(), count * 4) == 0);
      row += part.rows;
    }
    CHECK(row == spec.shape[0]);
    if (split) {
      CHECK(parts[0].type == GgmlType::kQ4_K);
      CHECK(parts[1].type == GgmlType::kQ6_K);
      CHECK(parts[1].rows == config.kv_dim());
    } else {
      CHECK(parts[0].type == (std::string(name) == "tok_emb" ? GgmlType::kQ6_K : GgmlType::kQ4_K));
    }
  }
}

TEST_CASE("CPU backend on --quantize weights: says what it dequantized") {
  const std::unique_ptr<WeightSource> quantized =
      quantize_weights(open_model("tiny"), GgmlType::kQ4_0);
  BackendOptions options;
  options.max_num_seqs = 4;
  options.max_num_batched_tokens = 64;
  options.num_kv_blocks = 16;
  const std::unique_ptr<Backend> backend = make_cpu_backend(*quantized, options);
  CHECK(backend->weight_types() == "fp32 (dequantized from Q4_0 x 13, dense x 4)");
  const std::unique_ptr<Backend> plain = make_cpu_backend(*open_model("tiny"), options);
  CHECK(plain->weight_types() == "fp32");
}
