// The GGUF reader and the ggml dequantizers. Dequantization is checked type by type against the
// Python gguf package (tests/fixtures/gguf/quant_types.gguf, written by
// scripts/make_gguf_fixtures.py); hostile files are built here byte by byte, and each must give
// an error naming the file and the field, never a crash.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/model/gguf_model.h"
#include "engine/model/quant.h"
#include "tests/stored_parts.h"
#include "tests/test_util.h"

namespace {

using rose::GgufFile;
using rose::test::contains;
using rose::test::error_of;

struct TensorInfoSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;
};

// Writes GGUF bytes field by field, so a test can break any one of them.
class Builder {
 public:
  void u8(uint8_t v) { bytes.push_back(v); }
  void u32(uint32_t v) { append(&v, 4); }
  void u64(uint64_t v) { append(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    append(s.data(), s.size());
  }
  void header(uint32_t version, uint64_t tensors, uint64_t kvs) {
    u32(0x46554747);
    u32(version);
    u64(tensors);
    u64(kvs);
  }
  void kv_u32(const std::string& key, uint32_t v) {
    str(key);
    u32(4);
    u32(v);
  }
  void kv_string(const std::string& key, const std::string& v) {
    str(key);
    u32(8);
    str(v);
  }
  void tensor(const TensorInfoSpec& t) {
    str(t.name);
    u32(uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) u64(d);
    u32(t.type);
    u64(t.offset);
  }
  void pad(size_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
  }
  void zeros(size_t n) { bytes.resize(bytes.size() + n, 0); }

  std::vector<uint8_t> bytes;

 private:
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
};

// A valid file: tensor "a" F32 [8] at 0, tensor "b" Q8_0 [32, 2] at 32; 100 data bytes.
std::vector<TensorInfoSpec> valid_tensors() { return {{"a", {8}, 0, 0}, {"b", {32, 2}, 8, 32}}; }

std::vector<uint8_t> build(const std::vector<TensorInfoSpec>& tensors, uint32_t version = 3) {
  Builder b;
  b.header(version, tensors.size(), 2);
  b.kv_string("general.architecture", "test");
  b.kv_u32("general.alignment", 32);
  for (const TensorInfoSpec& t : tensors) b.tensor(t);
  b.pad(32);
  b.zeros(100);
  return b.bytes;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { GgufFile::parse(bytes, "model.gguf"); });
}

}  // namespace

TEST_CASE("dequantization matches the gguf package, type by type") {
  const GgufFile file = GgufFile::open("tests/fixtures/gguf/quant_types.gguf");
  const char* types[] = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                         "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};
  for (const char* type : types) {
    CAPTURE(type);
    const rose::GgufTensor& stored = file.tensor(std::string("q.") + type);
    const rose::GgufTensor& expected = file.tensor(std::string("expected.") + type);
    CHECK(std::string(rose::ggml_type_name(uint32_t(stored.type))) == type);
    REQUIRE(stored.dims == expected.dims);
    std::vector<float> got(size_t(stored.numel())), want(size_t(expected.numel()));
    file.read_f32(stored, got);
    file.read_f32(expected, want);
    float max_ref = 0.0f, max_diff = 0.0f;
    for (size_t i = 0; i < want.size(); ++i) {
      max_ref = std::max(max_ref, std::abs(want[i]));
      max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
    }
    CAPTURE(max_diff);
    CHECK(max_ref > 0.0f);
    // Both sides are fp32 products of the same halves and integers; only rounding order differs.
    CHECK(max_diff <= 1e-6f * max_ref);
  }
}

TEST_CASE("a valid file parses: metadata, tensor ranges, typed reads") {
  const std::vector<uint8_t> bytes = build(valid_tensors());
  const GgufFile file = GgufFile::parse(bytes, "model.gguf");
  CHECK(file.version() == 3);
  CHECK(file.alignment() == 32);
  CHECK(file.get_string("general.architecture") == "test");
  CHECK(file.get_uint("general.alignment") == 32);
  REQUIRE(file.tensors().size() == 2);
  CHECK(file.tensor("b").bytes == 68);
  CHECK(file.tensor("b").rows() == 2);
  CHECK(contains(error_of([&] { file.get_uint("general.architecture"); }),
                 "model.gguf: metadata 'general.architecture' must be an integer, got string"));
  CHECK(contains(error_of([&] { file.get_float("x.y"); }), "missing metadata 'x.y'"));
  CHECK(contains(error_of([&] { file.tensor("c"); }), "model.gguf: missing tensor 'c'"));
  CHECK(!file.find_string("absent"));
}

TEST_CASE("every truncation of a valid file is an error") {
  const std::vector<uint8_t> bytes = build(valid_tensors());
  for (size_t n = 0; n < bytes.size(); ++n) {
    CAPTURE(n);
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + long(n));
    CHECK(contains(parse_error(prefix), "model.gguf: "));
  }
}

TEST_CASE("header errors: magic, version, counts") {
  std::vector<uint8_t> bytes = build(valid_tensors());
  bytes[0] = 'X';
  CHECK(contains(parse_error(bytes), "model.gguf: not a GGUF file"));
  CHECK(contains(parse_error(build(valid_tensors(), 1)), "GGUF version 1 is not supported"));
  CHECK(contains(parse_error(build(valid_tensors(), 4)), "GGUF version 4 is not supported"));
  CHECK(contains(parse_error(build(valid_tensors(), 3u << 24)), "big-endian"));
  Builder huge_kvs;
  huge_kvs.header(3, 0, uint64_t(1) << 60);
  huge_kvs.zeros(64);
  CHECK(contains(parse_error(huge_kvs.bytes), "kv_count 1152921504606846976 cannot fit"));
  Builder huge_tensors;
  huge_tensors.header(3, uint64_t(1) << 62, 0);
  huge_tensors.zeros(64);
  CHECK(contains(parse_error(huge_tensors.bytes), "tensor_count 4611686018427387904 cannot fit"));
}

TEST_CASE("metadata errors: string lengths, arrays, types, duplicates, alignment") {
  auto one_kv = [](const std::function<void(Builder&)>& write_kv) {
    Builder b;
    b.header(3, 0, 1);
    write_kv(b);
    b.zeros(32);
    return parse_error(b.bytes);
  };
  CHECK(contains(one_kv([](Builder& b) { b.u64(uint64_t(1) << 62); }),
                 "metadata key #0: string length 4611686018427387904 exceeds"));
  CHECK(contains(one_kv([](Builder& b) {
                   b.str("k");
                   b.u32(8);
                   b.u64(~uint64_t(0));
                 }),
                 "metadata 'k': string length"));
  CHECK(contains(one_kv([](Builder& b) {
                   b.str("k");
                   b.u32(9);
                   b.u32(4);
                   b.u64(uint64_t(1) << 40);
                 }),
                 "metadata 'k': array count 1099511627776 exceeds"));
  CHECK(contains(one_kv([](Builder& b) {
                   b.str("k");
                   b.u32(9);
                   b.u32(8);
                   b.u64(1000);
                 }),
                 "metadata 'k': 1000 strings cannot fit"));
  CHECK(contains(one_kv([](Builder& b) {
                   b.str("k");
                   b.u32(9);
                   b.u32(9);
                   b.u64(1);
                 }),
                 "nested arrays are not supported"));
  CHECK(contains(one_kv([](Builder& b) {
                   b.str("k");
                   b.u32(13);
                 }),
                 "metadata 'k' type: unknown value type 13"));
  CHECK(contains(one_kv([](Builder& b) {
                   b.str("k");
                   b.u32(7);
                   b.u8(2);
                 }),
                 "bool value 2 is neither 0 nor 1"));
  CHECK(contains(one_kv([](Builder& b) { b.kv_u32("", 1); }), "metadata key #0 is empty"));
  CHECK(contains(one_kv([](Builder& b) { b.kv_u32("general.alignment", 24); }),
                 "'general.alignment' = 24 is not a power of two"));
  CHECK(contains(one_kv([](Builder& b) { b.kv_string("general.alignment", "32"); }),
                 "'general.alignment' must be u32, got string"));
  Builder twice;
  twice.header(3, 0, 2);
  twice.kv_u32("a.b", 1);
  twice.kv_u32("a.b", 2);
  CHECK(contains(parse_error(twice.bytes), "model.gguf: metadata key 'a.b' appears twice"));
}

TEST_CASE("tensor errors: alignment, overlap, range, types, blocks, dims, duplicates") {
  auto with = [](const std::function<void(std::vector<TensorInfoSpec>&)>& edit) {
    std::vector<TensorInfoSpec> tensors = valid_tensors();
    edit(tensors);
    return parse_error(build(tensors));
  };
  CHECK(contains(with([](auto& t) { t[1].offset = 33; }),
                 "model.gguf: tensor 'b': offset 33 is not a multiple of alignment 32"));
  CHECK(contains(with([](auto& t) { t[1].offset = 0; }), "overlaps tensor"));
  CHECK(contains(with([](auto& t) { t[1].offset = 64; }),
                 "tensor 'b': bytes [64, 132) run past the end of the data section (100 bytes)"));
  CHECK(contains(with([](auto& t) { t[1].type = 99; }),
                 "tensor 'b': tensor type 99 (unknown) is not supported"));
  CHECK(contains(with([](auto& t) { t[1].type = 16; }), "tensor type 16 (IQ2_XXS)"));
  CHECK(contains(with([](auto& t) { t[1].type = 4; }), "tensor type 4 (unknown)"));
  CHECK(contains(with([](auto& t) {
                   t[1].dims = {30, 2};
                 }),
                 "tensor 'b': dimension 0 = 30 is not a multiple of the Q8_0 block size 32"));
  CHECK(contains(with([](auto& t) {
                   t[0].dims = {1, 1, 1, 1, 1};
                 }),
                 "tensor 'a': n_dims 5 is not in 1..4"));
  CHECK(contains(with([](auto& t) {
                   t[0].dims = {uint64_t(1) << 40, uint64_t(1) << 40};
                 }),
                 "tensor 'a': dimension 1 = 1099511627776 overflows"));
  CHECK(contains(with([](auto& t) { t[0].dims = {uint64_t(1) << 40}; }), "run past the end"));
  CHECK(contains(with([](auto& t) { t[1].name = t[0].name; }), "tensor 'a' appears twice"));
  CHECK(contains(with([](auto& t) { t[1].name.clear(); }), "tensor #1 has an empty name"));
  const std::string long_name(64, 'x');
  CHECK(contains(with([&](auto& t) { t[1].name = long_name; }), "over the limit"));
}

TEST_CASE("type traits cover the 13 types with ggml's block geometry") {
  CHECK(rose::ggml_type_traits(uint32_t(rose::GgmlType::kQ4_1))->block_bytes == 20);
  CHECK(rose::ggml_type_traits(uint32_t(rose::GgmlType::kQ6_K))->block_bytes == 210);
  CHECK(rose::ggml_type_traits(uint32_t(rose::GgmlType::kQ3_K))->block_elems == 256);
  CHECK(!rose::ggml_type_traits(15u));
  CHECK(std::string(rose::ggml_type_name(15u)) == "Q8_K");
}

TEST_CASE("tiny llama GGUF: config, vocab, and q/k rows un-permuted to Hugging Face order") {
  const auto model = rose::GgufModel::open("tests/fixtures/gguf/tiny_llama.gguf");
  const rose::ModelConfig& c = model->config();
  CHECK(c.arch == rose::Arch::kLlama);
  CHECK(c.num_layers == 1);
  CHECK(c.hidden_size == 32);
  CHECK(c.num_heads == 4);
  CHECK(c.num_kv_heads == 2);
  CHECK(c.head_dim == 8);
  CHECK(c.intermediate_size == 64);
  CHECK(c.vocab_size == 16);
  CHECK(c.tie_word_embeddings);
  CHECK(c.bos_token_id == 0);
  CHECK(model->end_ids() == std::vector<int>{1});
  const rose::TokenizerVocab vocab = model->vocab();
  CHECK(vocab.model == "gpt2");
  CHECK(vocab.pre == "smollm");
  CHECK(vocab.tokens.size() == 16);
  CHECK(vocab.tokens[3] == "t3");
  CHECK(vocab.token_types[0] == 3);
  CHECK(vocab.merges == std::vector<std::string>{"t 1"});
  CHECK(!vocab.add_bos);  // a gpt2 vocabulary without the key: llama.cpp's default
  CHECK(model->chat_template() == "{% for m in messages %}{{ m.content }}{% endfor %}");

  const auto weights = rose::GgufModel::weights(model);
  std::vector<float> qkv(size_t(c.qkv_dim() * c.hidden_size));
  weights->read_f32("layers.0.qkv.weight", qkv);
  const rose::GgufFile& file = model->file();
  std::vector<float> q(size_t(c.q_dim() * c.hidden_size)), k(size_t(c.kv_dim() * c.hidden_size));
  file.read_f32(file.tensor("reference.q_proj"), q);
  file.read_f32(file.tensor("reference.k_proj"), k);
  CHECK(std::equal(q.begin(), q.end(), qkv.begin()));
  CHECK(std::equal(k.begin(), k.end(), qkv.begin() + long(q.size())));
  std::vector<float> v(k.size());
  file.read_f32(file.tensor("blk.0.attn_v.weight"), v);
  CHECK(std::equal(v.begin(), v.end(), qkv.begin() + long(q.size() + k.size())));
  CHECK(contains(error_of([&] { weights->read_f32("lm_head.weight", v); }),
                 "has no canonical tensor 'lm_head.weight'"));
}

namespace {

// What a GPU backend does with stored_parts, on the CPU: dequantize each part with the reference
// and move its rows by unpermuted_row. It must give exactly read_f32's values.
void check_stored_parts_match_read_f32(const char* path) {
  CAPTURE(path);
  const auto model = rose::GgufModel::open(path);
  const auto weights = rose::GgufModel::weights(model);
  for (const rose::TensorSpec& spec : rose::canonical_tensors(model->config())) {
    CAPTURE(spec.name);
    const auto parts = weights->stored_parts(spec.name);
    REQUIRE(parts);
    std::vector<float> want(size_t(spec.numel()));
    weights->read_f32(spec.name, want);
    const std::vector<float> got = rose::test::from_stored_parts(*parts);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
  }
  CHECK(!weights->stored_parts("no.such.tensor"));
}

}  // namespace

TEST_CASE("stored parts: the GGUF blocks, rows and un-permutation that read_f32 decodes") {
  check_stored_parts_match_read_f32("tests/fixtures/gguf/tiny_llama.gguf");
  check_stored_parts_match_read_f32("tests/fixtures/gguf/tiny_llama_quant.gguf");

  const auto model = rose::GgufModel::open("tests/fixtures/gguf/tiny_llama_quant.gguf");
  const auto weights = rose::GgufModel::weights(model);
  const auto qkv = weights->stored_parts("layers.1.qkv.weight");
  REQUIRE(qkv);
  REQUIRE(qkv->size() == 3);
  const rose::GgufTensor& q = model->file().tensor("blk.1.attn_q.weight");
  CHECK((*qkv)[0].type == rose::GgmlType::kQ5_1);
  CHECK((*qkv)[0].bytes.data() == q.data);
  CHECK((*qkv)[0].bytes.size() == q.bytes);
  CHECK((*qkv)[0].rows == 256);
  CHECK((*qkv)[0].cols == 256);
  CHECK((*qkv)[0].unpermute_heads == 4);
  CHECK((*qkv)[1].type == rose::GgmlType::kQ2_K);
  CHECK((*qkv)[1].rows == 128);
  CHECK((*qkv)[1].unpermute_heads == 2);
  CHECK((*qkv)[2].type == rose::GgmlType::kQ3_K);
  CHECK((*qkv)[2].unpermute_heads == 0);
  const auto norm = weights->stored_parts("layers.1.mlp_norm.weight");
  REQUIRE(norm);
  CHECK((*norm)[0].type == rose::GgmlType::kBF16);
  CHECK((*norm)[0].rows == 1);
  CHECK((*norm)[0].cols == 256);
}

TEST_CASE("unpermuted_row: stored row h*hd + 2j + i goes to h*hd + i*hd/2 + j") {
  // 2 heads of 4 rows: stored 0..3 are (j, i) = (0,0) (0,1) (1,0) (1,1) -> 0 2 1 3.
  const std::vector<int64_t> want = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int64_t row = 0; row < 8; ++row) CHECK(rose::unpermuted_row(row, 8, 2) == want[row]);
  CHECK(rose::unpermuted_row(5, 8, 0) == 5);
}

TEST_CASE("model metadata errors name the file and the key") {
  const std::vector<uint8_t> bytes = build(valid_tensors());
  const GgufFile file = GgufFile::parse(bytes, "model.gguf");
  CHECK(contains(error_of([&] { rose::gguf_model_config(file); }),
                 "model.gguf: general.architecture 'test' is not supported"));
  CHECK(contains(error_of([&] { rose::read_gguf_vocab(file); }),
                 "model.gguf: missing metadata 'tokenizer.ggml.model'"));
}
