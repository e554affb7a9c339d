// Tokenizers built from GGUF-style tables (make_tokenizer(TokenizerVocab)) against the Hugging Face
// tokenizers library's ids in tests/fixtures/tokenizers, and the load time of a Llama-3-sized
// tokenizer.json. Run from the repository root (ctest does).
#include <doctest/doctest.h>
#include <simdjson.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/common/error.h"
#include "engine/tokenizer/nfc.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = "tests/fixtures/tokenizers";

// The tables a GGUF converter would write for a fixture's tokenizer.json: tokens by id, the
// added tokens as control tokens, "<0xNN>" as byte tokens, score = -id (the fixture's merges
// follow the merged token's id, as transformers' converter orders SentencePiece merges).
rose::TokenizerVocab vocab_from_fixture(const std::string& name, const std::string& model,
                                        const std::string& pre) {
  simdjson::dom::parser parser;
  const simdjson::dom::element root = parser.load((kFixtures / name / "tokenizer.json").string());
  rose::TokenizerVocab vocab;
  vocab.model = model;
  vocab.pre = pre;
  vocab.source = name + " as GGUF";
  for (auto [key, value] : root["model"]["vocab"].get_object()) {
    const auto id = static_cast<size_t>(int64_t(value));
    if (vocab.tokens.size() <= id) vocab.tokens.resize(id + 1);
    vocab.tokens[id] = std::string(key);
  }
  vocab.token_types.assign(vocab.tokens.size(), 1);
  for (simdjson::dom::element added : root["added_tokens"].get_array()) {
    const auto id = static_cast<size_t>(int64_t(added["id"]));
    if (vocab.tokens.size() <= id) {
      vocab.tokens.resize(id + 1);
      vocab.token_types.resize(id + 1, 1);
    }
    vocab.tokens[id] = std::string(std::string_view(added["content"]));
    vocab.token_types[id] = 3;
  }
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (model == "llama" && vocab.tokens[id].starts_with("<0x")) vocab.token_types[id] = 6;
    vocab.scores.push_back(-static_cast<float>(id));
  }
  for (simdjson::dom::element merge : root["model"]["merges"].get_array()) {
    if (merge.is_string()) {
      vocab.merges.emplace_back(std::string_view(merge));
    } else {
      vocab.merges.push_back(std::string(std::string_view(merge.at(0))) + " " +
                             std::string(std::string_view(merge.at(1))));
    }
  }
  if (model == "llama") {
    vocab.merges.clear();  // SentencePiece GGUF files carry scores, not merges
    vocab.unk_id = 0;
    vocab.bos_id = 1;
    vocab.eos_id = 2;
    vocab.token_types[0] = 2;
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
  }
  return vocab;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

std::vector<Case> fixture_cases(const std::string& name) {
  simdjson::dom::parser parser;
  const simdjson::dom::element root = parser.load((kFixtures / name / "expected.json").string());
  std::vector<Case> cases;
  for (simdjson::dom::element c : root["cases"].get_array()) {
    Case one{
        std::string(std::string_view(c["text"])), {}, std::string(std::string_view(c["decoded"]))};
    for (simdjson::dom::element id : c["ids"].get_array()) {
      one.ids.push_back(static_cast<int32_t>(int64_t(id)));
    }
    cases.push_back(std::move(one));
  }
  return cases;
}

// Returns how many strings were compared.
size_t check_against_fixture(const rose::Tokenizer& tokenizer, const std::string& name,
                             bool nfc_stable_only) {
  size_t compared = 0;
  for (const Case& c : fixture_cases(name)) {
    // GGUF byte-level vocabularies carry no normalizer (llama.cpp applies none).
    if (nfc_stable_only && rose::to_nfc(c.text) != c.text) continue;
    INFO("fixture ", name, ", text: \"", c.text, "\"");
    CHECK(tokenizer.encode(c.text) == c.ids);
    CHECK(tokenizer.decode(c.ids, false) == c.decoded);
    ++compared;
  }
  return compared;
}

std::string error_of(const rose::TokenizerVocab& vocab) {
  try {
    rose::make_tokenizer(vocab);
  } catch (const rose::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("GGUF-style byte-level vocabularies match the tokenizers library") {
  const std::vector<std::tuple<std::string, std::string, bool>> fixtures = {
      {"gpt2", "gpt2", false}, {"llama3", "llama-bpe", false}, {"qwen2", "qwen2", true}};
  for (const auto& [name, pre, nfc_stable_only] : fixtures) {
    const auto tokenizer = rose::make_tokenizer(vocab_from_fixture(name, "gpt2", pre));
    CHECK(check_against_fixture(*tokenizer, name, nfc_stable_only) > 50);
    CHECK_FALSE(tokenizer->adds_bos());
  }
}

TEST_CASE("GGUF-style SentencePiece vocabulary (scores, byte tokens) matches the library") {
  const auto tokenizer = rose::make_tokenizer(vocab_from_fixture("llama2", "llama", ""));
  CHECK(check_against_fixture(*tokenizer, "llama2", false) > 70);
  CHECK(tokenizer->adds_bos());
  CHECK(tokenizer->bos_id() == 1);
  CHECK(tokenizer->eos_id() == 2);
  const std::vector<int32_t> ids = tokenizer->encode("Hello world", true);
  CHECK(ids.front() == 1);
  CHECK(tokenizer->decode(ids) == "Hello world");
  CHECK(tokenizer->is_special(0));        // unknown
  CHECK(tokenizer->is_special(2));        // control
  CHECK_FALSE(tokenizer->is_special(3));  // a byte token
}

TEST_CASE("bad GGUF tokenizer tables give rose::Error naming the source and field") {
  const rose::TokenizerVocab good = vocab_from_fixture("gpt2", "gpt2", "gpt2");
  CHECK_NOTHROW(rose::make_tokenizer(good));
  struct Bad {
    std::string name;
    void (*change)(rose::TokenizerVocab&);
    std::string field;
  };
  const std::vector<Bad> bad = {
      {"model", [](rose::TokenizerVocab& v) { v.model = "bert"; }, "tokenizer.ggml.model"},
      {"pre", [](rose::TokenizerVocab& v) { v.pre = "mystery"; }, "tokenizer.ggml.pre"},
      {"no tokens", [](rose::TokenizerVocab& v) { v.tokens.clear(); }, "tokenizer.ggml.tokens"},
      {"types", [](rose::TokenizerVocab& v) { v.token_types.pop_back(); },
       "tokenizer.ggml.token_type"},
      {"scores", [](rose::TokenizerVocab& v) { v.scores.resize(3); }, "tokenizer.ggml.scores"},
      {"nan score", [](rose::TokenizerVocab& v) { v.scores[5] = NAN; }, "tokenizer.ggml.scores[5]"},
      {"merge unknown", [](rose::TokenizerVocab& v) { v.merges[3] = "zz qq"; },
       "tokenizer.ggml.merges[3]"},
      {"merge no space", [](rose::TokenizerVocab& v) { v.merges[0] = "ab"; },
       "tokenizer.ggml.merges[0]"},
      {"no merges", [](rose::TokenizerVocab& v) { v.merges.clear(); }, "tokenizer.ggml.merges"},
      {"bos", [](rose::TokenizerVocab& v) { v.bos_id = 1 << 20; }, "tokenizer.ggml.bos_token_id"},
      {"eos", [](rose::TokenizerVocab& v) { v.eos_id = -4; }, "tokenizer.ggml.eos_token_id"},
      {"spm scores",
       [](rose::TokenizerVocab& v) {
         v.model = "llama";
         v.scores.clear();
       },
       "tokenizer.ggml.scores"},
  };
  for (const Bad& b : bad) {
    INFO("case ", b.name);
    rose::TokenizerVocab vocab = good;
    b.change(vocab);
    const std::string message = error_of(vocab);
    INFO("message: ", message);
    CHECK(message.find("gpt2 as GGUF") != std::string::npos);
    CHECK(message.find(b.field) != std::string::npos);
  }
}

// ---- a Llama-3-sized tokenizer.json: 128k tokens, 280k merges ----

namespace {

// Tokens over printable ASCII (no quote, backslash or space, so no JSON escapes), each new one a
// known token plus one of the first 1000 (short) ones, merged from those two; then every other
// split of a token into two known tokens (the primary pair again too: a repeat keeps its later
// rank), until the merge count is reached.
std::string big_tokenizer_json(size_t vocab_size, size_t merge_count) {
  std::vector<std::string> tokens;
  std::unordered_set<std::string> known;
  for (char c = '!'; c <= '~'; ++c) {
    if (c == '"' || c == '\\') continue;
    tokens.emplace_back(1, c);
    known.insert(tokens.back());
  }
  const size_t alphabet = tokens.size();
  std::vector<std::pair<size_t, size_t>> merges;  // (left id, right id)
  std::mt19937_64 rng(42);
  while (tokens.size() < vocab_size) {
    const size_t left = rng() % tokens.size(),
                 right = rng() % std::min(tokens.size(), size_t{1000});
    std::string merged = tokens[left] + tokens[right];
    if (merged.size() > 16 || !known.insert(merged).second) continue;
    merges.emplace_back(left, right);
    tokens.push_back(std::move(merged));
  }
  std::unordered_map<std::string, size_t> id_of;
  for (size_t id = 0; id < tokens.size(); ++id) id_of[tokens[id]] = id;
  const size_t primary = merges.size();
  for (size_t id = alphabet; id < tokens.size() && merges.size() < merge_count; ++id) {
    for (size_t cut = 1; cut < tokens[id].size() && merges.size() < merge_count; ++cut) {
      auto left = id_of.find(tokens[id].substr(0, cut));
      auto right = id_of.find(tokens[id].substr(cut));
      if (left == id_of.end() || right == id_of.end()) continue;
      merges.emplace_back(left->second, right->second);
    }
  }
  REQUIRE(primary < merges.size());
  std::string json = R"({"added_tokens": [], "normalizer": null, "post_processor": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {)";
  for (size_t id = 0; id < tokens.size(); ++id) {
    json += fmt::format("{}\"{}\": {}", id ? ", " : "", tokens[id], id);
  }
  json += "}, \"merges\": [";
  for (size_t i = 0; i < merges.size(); ++i) {
    json += fmt::format("{}[\"{}\", \"{}\"]", i ? ", " : "", tokens[merges[i].first],
                        tokens[merges[i].second]);
  }
  return json + "]}}";
}

size_t merge_count(const std::string& json) {
  size_t count = 0;
  for (size_t at = json.find("\"merges\""); (at = json.find("[\"", at)) != std::string::npos;
       ++at) {
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("a 128k-token, 280k-merge tokenizer.json loads well under a second") {
  const std::string json = big_tokenizer_json(128000, 280000);
  // CPU time as well as wall time: on a shared machine the wall clock mostly measures the others.
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const auto tokenizer = rose::load_tokenizer_json_from_string(json, "big.json");
  const double cpu_seconds = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(fmt::format(
      "128k-token, {}-merge tokenizer.json ({:.1f} MB) loaded in {:.3f} s ({:.3f} s CPU)",
      merge_count(json), json.size() / 1e6, seconds, cpu_seconds));
  CHECK(tokenizer->vocab_size() == 128000);
  CHECK(!tokenizer->encode("Hello, world! 12345").empty());
  // Not a timing test (machines differ, sanitizers slow it): only a bound that no sane build
  // misses, so a quadratic loader still fails.
  CHECK(seconds < 10.0);
}
