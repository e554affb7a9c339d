// The CPU backend's step semantics (backend.h): a batched step mixing prefill chunks, decode
// tokens, cached context and blocks written by another sequence in the same step gives each
// sequence the logits it gets alone; chunked prefill equals one-shot prefill; bad plans throw
// rose::Error. Weights are random (a test-local WeightSource), for a GPT-2 and a Llama-family
// shape.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/model/weights.h"
#include "tests/random_weights.h"

namespace {

using rose::test::RandomWeights;  // norm weights near 1, the rest in [-0.2, 0.2)

rose::ModelConfig llama_config() {
  rose::ModelConfig c;
  c.arch = rose::Arch::kLlama;
  c.name = "test-llama";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  c.rope_scaling = {"llama3", 8.0f, 1.0f, 4.0f, 32};
  c.tie_word_embeddings = false;
  c.qkv_bias = true;
  return c;
}

rose::ModelConfig gpt2_config() {
  rose::ModelConfig c;
  c.arch = rose::Arch::kGpt2;
  c.name = "test-gpt2";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  c.tie_word_embeddings = true;
  return c;
}

constexpr int kBlockSize = 16;
constexpr int kStride = 8;  // block table columns: up to 128 tokens

rose::BackendOptions small_options() {
  rose::BackendOptions options;
  options.block_size = kBlockSize;
  options.num_kv_blocks = 64;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 128;
  return options;
}

// One request as a scheduler would track it: its tokens, its blocks, how many are in the cache.
struct Request {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int computed = 0;
  rose::SamplingParams sampling;
  uint64_t generated = 0;
};

// Hands out block ids in order, never reusing one.
struct BlockAllocator {
  int next = 0;
  void cover(Request& r, int length) {
    while (int(r.blocks.size()) * kBlockSize < length) r.blocks.push_back(next++);
  }
};

// Appends `n` of the request's not yet computed tokens to the plan.
void add_to_plan(rose::StepPlan& plan, Request& r, int n, bool sample) {
  if (plan.query_start.empty()) plan.query_start.push_back(0);
  plan.block_table_stride = kStride;
  for (int i = 0; i < n; ++i) {
    const int pos = r.computed + i;
    plan.token_ids.push_back(r.tokens.at(pos));
    plan.positions.push_back(pos);
    plan.slot_mapping.push_back(r.blocks.at(pos / kBlockSize) * kBlockSize + pos % kBlockSize);
  }
  r.computed += n;
  plan.query_start.push_back(plan.query_start.back() + n);
  plan.context_lens.push_back(r.computed);
  for (int b = 0; b < kStride; ++b) {
    plan.block_tables.push_back(b < int(r.blocks.size()) ? r.blocks[b] : -1);
  }
  plan.do_sample.push_back(sample ? 1 : 0);
  plan.sampling.push_back(r.sampling);
  plan.sample_index.push_back(r.generated);
}

std::vector<int32_t> random_tokens(int n, uint32_t seed, int vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = int32_t(rng() % uint32_t(vocab));
  return t;
}

std::vector<float> row(const rose::StepOutput& out, int s, int vocab) {
  return {out.logits.begin() + size_t(s) * vocab, out.logits.begin() + size_t(s + 1) * vocab};
}

// |a - b| <= 1e-5 * max|b| + 1e-6 everywhere (the batch does not change any reduction order, so
// this is loose; it leaves room for future blocking changes).
void check_logits_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  float max_ref = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(want[i]));
    max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
  }
  CHECK(max_ref > 0.1f);  // non-trivial logits
  CHECK(max_diff <= 1e-5f * max_ref + 1e-6f);
}

// Logits of a request run alone: its first `prefill` tokens in one step, then one step per token.
std::vector<std::vector<float>> solo_logits(const rose::ModelConfig& config,
                                            const std::vector<int32_t>& tokens, int prefill,
                                            std::vector<int32_t>* sampled = nullptr,
                                            rose::SamplingParams sampling = {}) {
  RandomWeights weights(config);
  auto backend = rose::make_cpu_backend(weights, small_options());
  BlockAllocator alloc;
  Request r{tokens, {}, 0, sampling, 0};
  alloc.cover(r, int(tokens.size()));
  std::vector<std::vector<float>> result;
  rose::StepOutput out;
  for (int step_len = prefill; r.computed < int(tokens.size()); step_len = 1) {
    rose::StepPlan plan;
    plan.return_logits = true;
    add_to_plan(plan, r, step_len, true);
    backend->execute(plan, out);
    result.push_back(out.logits);
    if (sampled) sampled->push_back(out.sampled[0]);
    ++r.generated;
  }
  return result;
}

}  // namespace

TEST_CASE("a mixed batched step gives every sequence the logits it gets alone") {
  for (const rose::ModelConfig& config : {llama_config(), gpt2_config()}) {
    CAPTURE(config.name);
    const int V = config.vocab_size;
    RandomWeights weights(config);
    auto backend = rose::make_cpu_backend(weights, small_options());
    CHECK(backend->num_kv_blocks() == 64);
    CHECK(backend->device_name().rfind("cpu (", 0) == 0);

    BlockAllocator alloc;
    Request a{random_tokens(20, 1, V)}, b{random_tokens(30, 2, V)}, c{random_tokens(17, 3, V)};
    // d shares c's first full block: in step 2 it reads the block c writes in that same step.
    Request d{c.tokens};
    d.tokens.resize(16);
    for (int32_t t : random_tokens(5, 4, V)) d.tokens.push_back(t);
    c.sampling = {0.8f, 20, 0.95f, 5};  // a sampled (not greedy) sequence
    for (Request* r : {&a, &b, &c}) alloc.cover(*r, 40);
    d.blocks = {c.blocks[0]};
    alloc.cover(d, 40);
    d.computed = 16;  // as if a prefix-cache hit on c's block

    rose::StepOutput out;
    std::vector<std::vector<float>> got_a, got_b, got_c, got_d;
    std::vector<int32_t> sampled_c;
    // Step 1: a's whole prompt, b's first chunk (no sample).
    {
      rose::StepPlan plan;
      plan.return_logits = true;
      add_to_plan(plan, a, 20, true);
      add_to_plan(plan, b, 10, false);
      backend->execute(plan, out);
      CHECK(out.sampled[1] == -1);
      const auto b_row = row(out, 1, V);
      CHECK(std::all_of(b_row.begin(), b_row.end(), [](float x) { return x == 0.0f; }));
      got_a.push_back(row(out, 0, V));
      a.tokens.push_back(out.sampled[0]);
      ++a.generated;
    }
    // Step 2: a decodes over its cached prompt, b's last chunk, c's prompt, d's tail over c's
    // block.
    {
      rose::StepPlan plan;
      plan.return_logits = true;
      add_to_plan(plan, a, 1, true);
      add_to_plan(plan, b, 20, true);
      add_to_plan(plan, c, 17, true);
      add_to_plan(plan, d, 5, true);
      REQUIRE(plan.num_tokens() == 43);
      backend->execute(plan, out);
      Request* reqs[] = {&a, &b, &c, &d};
      std::vector<std::vector<float>>* gots[] = {&got_a, &got_b, &got_c, &got_d};
      for (int s = 0; s < 4; ++s) {
        gots[s]->push_back(row(out, s, V));
        reqs[s]->tokens.push_back(out.sampled[s]);
        ++reqs[s]->generated;
      }
      sampled_c.push_back(out.sampled[2]);
    }
    // Step 3: everyone decodes.
    {
      rose::StepPlan plan;
      plan.return_logits = true;
      for (Request* r : {&a, &b, &c, &d}) add_to_plan(plan, *r, 1, true);
      REQUIRE(plan.is_pure_decode());
      backend->execute(plan, out);
      got_a.push_back(row(out, 0, V));
      got_b.push_back(row(out, 1, V));
      got_c.push_back(row(out, 2, V));
      got_d.push_back(row(out, 3, V));
      sampled_c.push_back(out.sampled[2]);
      c.tokens.push_back(out.sampled[2]);
    }

    const auto want_a = solo_logits(config, a.tokens, 20);
    REQUIRE(want_a.size() == 3);
    for (int i = 0; i < 3; ++i) check_logits_close(got_a[i], want_a[i]);
    const auto want_b = solo_logits(config, b.tokens, 30);
    for (int i = 0; i < 2; ++i) check_logits_close(got_b[i], want_b[i]);
    std::vector<int32_t> solo_sampled_c;
    const auto want_c = solo_logits(config, c.tokens, 17, &solo_sampled_c, c.sampling);
    for (int i = 0; i < 2; ++i) check_logits_close(got_c[i], want_c[i]);
    CHECK(std::equal(sampled_c.begin(), sampled_c.end(), solo_sampled_c.begin()));
    const auto want_d = solo_logits(config, d.tokens, 21);
    for (int i = 0; i < 2; ++i) check_logits_close(got_d[i], want_d[i]);
  }
}

TEST_CASE("chunked prefill equals one-shot prefill, and greedy decoding continues the same") {
  for (const rose::ModelConfig& config : {llama_config(), gpt2_config()}) {
    CAPTURE(config.name);
    const auto prompt = random_tokens(40, 9, config.vocab_size);
    std::vector<int32_t> one_shot_tokens;
    const auto one_shot = solo_logits(config, prompt, 40);

    RandomWeights weights(config);
    auto backend = rose::make_cpu_backend(weights, small_options());
    BlockAllocator alloc;
    Request r{prompt};
    alloc.cover(r, 64);
    rose::StepOutput out;
    for (int chunk : {7, 16, 17}) {  // chunk edges inside and on block boundaries
      rose::StepPlan plan;
      plan.return_logits = true;
      add_to_plan(plan, r, chunk, r.computed + chunk == 40);
      backend->execute(plan, out);
    }
    check_logits_close(row(out, 0, config.vocab_size), one_shot[0]);
    // Greedy continuation: 5 tokens from the chunked run vs a one-shot run over the same tokens.
    std::vector<std::vector<float>> chunked_steps{row(out, 0, config.vocab_size)};
    for (int step = 0; step < 5; ++step) {
      r.tokens.push_back(out.sampled[0]);
      ++r.generated;
      rose::StepPlan plan;
      plan.return_logits = true;
      add_to_plan(plan, r, 1, true);
      backend->execute(plan, out);
      chunked_steps.push_back(row(out, 0, config.vocab_size));
    }
    const auto reference = solo_logits(config, r.tokens, 40);
    REQUIRE(reference.size() == chunked_steps.size());
    for (size_t i = 0; i < reference.size(); ++i)
      check_logits_close(chunked_steps[i], reference[i]);
  }
}

TEST_CASE("invalid plans throw rose::Error instead of touching memory out of bounds") {
  const rose::ModelConfig config = llama_config();
  RandomWeights weights(config);
  rose::BackendOptions options = small_options();
  options.max_num_batched_tokens = 24;
  auto backend = rose::make_cpu_backend(weights, options);
  BlockAllocator alloc;
  Request r{random_tokens(30, 11, config.vocab_size)};
  alloc.cover(r, 30);
  rose::StepPlan valid;
  add_to_plan(valid, r, 20, true);
  rose::StepOutput out;
  REQUIRE_NOTHROW(backend->execute(valid, out));
  CHECK(out.sampled[0] >= 0);
  CHECK(out.logits.empty());  // return_logits was false

  auto expect_error = [&](const char* what, auto mutate) {
    CAPTURE(what);
    rose::StepPlan plan = valid;
    mutate(plan);
    CHECK_THROWS_AS(backend->execute(plan, out), rose::Error);
  };
  expect_error("token id", [&](rose::StepPlan& p) { p.token_ids[3] = config.vocab_size; });
  expect_error("negative id", [&](rose::StepPlan& p) { p.token_ids[0] = -1; });
  expect_error("slot", [&](rose::StepPlan& p) { p.slot_mapping[5] = 64 * kBlockSize; });
  expect_error("block id", [&](rose::StepPlan& p) { p.block_tables[1] = 64; });
  expect_error("missing block", [&](rose::StepPlan& p) { p.block_tables[1] = -1; });
  expect_error("position", [&](rose::StepPlan& p) { p.positions[4] = 9; });
  expect_error("context", [&](rose::StepPlan& p) { p.context_lens[0] = 19; });
  expect_error("query_start", [&](rose::StepPlan& p) { p.query_start[1] = 21; });
  expect_error("stride", [&](rose::StepPlan& p) { p.block_table_stride = 1; });
  expect_error("top_p", [&](rose::StepPlan& p) { p.sampling[0] = {1.0f, 0, 0.0f, 0}; });
  expect_error("budget", [&](rose::StepPlan& p) {
    for (int i = 0; i < 5; ++i) {
      p.token_ids.push_back(0);
      p.positions.push_back(20 + i);
      p.slot_mapping.push_back(-1);
    }
    p.query_start[1] += 5;
    p.context_lens[0] += 5;
  });
  expect_error("sizes", [&](rose::StepPlan& p) { p.do_sample.push_back(1); });

  SUBCASE("a KV pool sized from cpu_kv_bytes") {
    rose::BackendOptions by_bytes = small_options();
    by_bytes.num_kv_blocks = 0;
    by_bytes.cpu_kv_bytes = backend->kv_bytes_per_token() * kBlockSize * 10 + 5;
    auto sized = rose::make_cpu_backend(weights, by_bytes);
    CHECK(sized->num_kv_blocks() == 10);
    // K and V, every layer, fp32.
    CHECK(sized->kv_bytes_per_token() == 2 * 2 * 2 * 8 * 4);
    by_bytes.cpu_kv_bytes = 10;
    CHECK_THROWS_AS(rose::make_cpu_backend(weights, by_bytes), rose::Error);
  }
}

TEST_CASE("the tiny preset runs with default options and samples deterministically") {
  const auto weights = rose::open_model("tiny");
  const rose::BackendOptions defaults;
  auto backend = rose::make_cpu_backend(*weights, defaults);
  const rose::ModelConfig& config = backend->config();
  // The default pool comes from cpu_kv_bytes.
  CHECK(backend->num_kv_blocks() ==
        defaults.cpu_kv_bytes / (backend->kv_bytes_per_token() * defaults.block_size));
  CHECK(backend->weight_bytes() > int64_t(config.vocab_size) * config.hidden_size * 4);

  auto run = [&](rose::SamplingParams sampling) {
    Request r{random_tokens(24, 21, config.vocab_size)};
    r.sampling = sampling;
    r.blocks = {3, 4};
    rose::StepPlan plan;
    add_to_plan(plan, r, 24, true);
    rose::StepOutput out;
    backend->execute(plan, out);
    return out.sampled.at(0);
  };
  const int32_t greedy = run({});
  CHECK(greedy >= 0);
  CHECK(greedy < config.vocab_size);
  CHECK(run({}) == greedy);
  const rose::SamplingParams hot{1.5f, 0, 1.0f, 77};
  CHECK(run(hot) == run(hot));
}
