#pragma once
// reference.json of a model fixture (scripts/make_model_fixtures.py): transformers' fp32 logits and
// greedy tokens for a few prompts. Shared by the CPU parity test and the GPU fixture test.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rose::test {

struct Reference {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> last_logits;
  int all_position_prompt = -1;
  std::vector<std::vector<float>> all_position_logits;
  std::vector<std::vector<int32_t>> greedy;
  std::vector<float> rope_inv_freq;  // empty for GPT-2
};

inline simdjson::dom::array array_field(simdjson::dom::object obj, const char* key) {
  simdjson::dom::array array;
  REQUIRE_MESSAGE(!obj[key].get(array), "reference.json: missing array " << key);
  return array;
}

template <typename T>
inline std::vector<T> numbers(simdjson::dom::array array) {
  std::vector<T> out;
  for (simdjson::dom::element e : array) {
    double x = 0;
    REQUIRE(!e.get(x));
    out.push_back(static_cast<T>(x));
  }
  return out;
}

template <typename T>
inline std::vector<std::vector<T>> rows(simdjson::dom::array array) {
  std::vector<std::vector<T>> out;
  for (simdjson::dom::element e : array) {
    simdjson::dom::array row;
    REQUIRE(!e.get(row));
    out.push_back(numbers<T>(row));
  }
  return out;
}

inline Reference load_reference(const std::string& dir) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  REQUIRE_MESSAGE(!parser.load(dir + "/reference.json").get(root), "cannot read " << dir);
  simdjson::dom::object obj;
  REQUIRE(!root.get(obj));
  Reference ref;
  ref.prompts = rows<int32_t>(array_field(obj, "prompts"));
  ref.last_logits = rows<float>(array_field(obj, "last_logits"));
  ref.all_position_logits = rows<float>(array_field(obj, "all_position_logits"));
  ref.greedy = rows<int32_t>(array_field(obj, "greedy"));
  int64_t index = -1;
  REQUIRE(!obj["all_position_prompt"].get(index));
  ref.all_position_prompt = static_cast<int>(index);
  simdjson::dom::array inv_freq;
  if (!obj["rope_inv_freq"].get(inv_freq)) ref.rope_inv_freq = numbers<float>(inv_freq);
  REQUIRE(ref.prompts.size() == ref.last_logits.size());
  REQUIRE(ref.prompts.size() == ref.greedy.size());
  return ref;
}

}  // namespace rose::test
