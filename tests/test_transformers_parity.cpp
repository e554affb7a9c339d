// The CPU backend on real checkpoints against Hugging Face transformers: the fixtures in
// tests/fixtures/models were written by scripts/make_model_fixtures.py with transformers' own fp32
// logits and greedy tokens. Loading goes through rose::open_model, so this also checks the
// config.json parsing and the weight maps (GPT-2 Conv1D transposes, fused qkv and gate|up, tied and
// untied heads, qkv bias, llama3 RoPE scaling under rope_parameters).
//
// Tolerance on logits, per row: max |ours - transformers| <= 1e-4 * max |transformers| + 1e-5. Both
// sides are fp32, so the only differences are summation orders (~1e-6 relative); the fixtures
// were chosen with a top-1/top-2 gap of at least 2e-3 at every greedy step, so greedy tokens
// must match exactly.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/rope.h"
#include "engine/model/weights.h"
#include "kernels/cpu/ops.h"
#include "tests/model_reference.h"

namespace {

using rose::test::load_reference;
using rose::test::Reference;

const std::string kFixtures = "tests/fixtures/models/";
constexpr int kBlockSize = 16;
constexpr int kStride = 8;  // up to 128 tokens per sequence

void check_logits(const float* got, const std::vector<float>& want) {
  float max_ref = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(want[i]));
    max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
  }
  CAPTURE(max_ref);
  CHECK(max_ref > 0.5f);  // logits that are not flat
  CHECK(max_diff <= 1e-4f * max_ref + 1e-5f);
}

struct Sequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int computed = 0;
  uint64_t generated = 0;
};

// Appends the sequence's next `n` tokens to the plan; it samples greedily from the last one.
void add_to_plan(rose::StepPlan& plan, Sequence& seq, int n) {
  if (plan.query_start.empty()) plan.query_start.push_back(0);
  plan.block_table_stride = kStride;
  for (int i = 0; i < n; ++i) {
    const int pos = seq.computed + i;
    plan.token_ids.push_back(seq.tokens.at(pos));
    plan.positions.push_back(pos);
    plan.slot_mapping.push_back(seq.blocks.at(pos / kBlockSize) * kBlockSize + pos % kBlockSize);
  }
  seq.computed += n;
  plan.query_start.push_back(plan.query_start.back() + n);
  plan.context_lens.push_back(seq.computed);
  for (int b = 0; b < kStride; ++b) {
    plan.block_tables.push_back(b < int(seq.blocks.size()) ? seq.blocks[b] : -1);
  }
  plan.do_sample.push_back(1);
  plan.sampling.push_back(rose::SamplingParams{});
  plan.sample_index.push_back(seq.generated);
}

void check_model(const std::string& name, rose::Arch arch) {
  CAPTURE(name);
  const std::string dir = kFixtures + name;
  const Reference ref = load_reference(dir);
  const auto weights = rose::open_model(dir);
  const rose::ModelConfig& config = weights->config();
  REQUIRE(config.arch == arch);
  rose::BackendOptions options;
  options.num_kv_blocks = 48;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 256;
  const auto backend = rose::make_cpu_backend(*weights, options);
  const int V = config.vocab_size;
  const int num_prompts = int(ref.prompts.size());
  for (const auto& logits : ref.last_logits) REQUIRE(int(logits.size()) == V);

  // Every prompt in one mixed step, then greedy decoding of all of them together.
  std::vector<Sequence> seqs(num_prompts);
  int next_block = 0;
  for (int i = 0; i < num_prompts; ++i) {
    seqs[i].tokens = ref.prompts[i];
    const int max_len = int(ref.prompts[i].size() + ref.greedy[i].size());
    while (int(seqs[i].blocks.size()) * kBlockSize < max_len)
      seqs[i].blocks.push_back(next_block++);
  }
  REQUIRE(next_block <= options.num_kv_blocks);
  rose::StepOutput out;
  const size_t steps = ref.greedy[0].size();
  for (size_t step = 0; step < steps; ++step) {
    rose::StepPlan plan;
    plan.return_logits = true;
    for (Sequence& seq : seqs) add_to_plan(plan, seq, step == 0 ? int(seq.tokens.size()) : 1);
    backend->execute(plan, out);
    for (int i = 0; i < num_prompts; ++i) {
      CAPTURE(i);
      CAPTURE(step);
      if (step == 0) check_logits(&out.logits[size_t(i) * V], ref.last_logits[i]);
      CHECK(out.sampled[i] == ref.greedy[i][step]);
      // Continue from transformers' token so one mismatch does not cascade.
      seqs[i].tokens.push_back(ref.greedy[i][step]);
      ++seqs[i].generated;
    }
  }

  // One prompt a token per step: the logits at every position, each read over the cached prefix.
  Sequence one;
  one.tokens = ref.prompts[ref.all_position_prompt];
  one.blocks = {next_block, next_block + 1};
  REQUIRE(ref.all_position_logits.size() == one.tokens.size());
  for (size_t pos = 0; pos < one.tokens.size(); ++pos) {
    rose::StepPlan plan;
    plan.return_logits = true;
    add_to_plan(plan, one, 1);
    backend->execute(plan, out);
    CAPTURE(pos);
    check_logits(out.logits.data(), ref.all_position_logits[pos]);
  }

  if (arch == rose::Arch::kLlama) {
    REQUIRE(int(ref.rope_inv_freq.size()) == config.head_dim / 2);
    std::vector<float> inv_freq(config.head_dim / 2);
    rose::rope_inv_freq(config.head_dim, config.rope_theta, config.rope_scaling, inv_freq.data());
    for (size_t i = 0; i < inv_freq.size(); ++i) {
      CAPTURE(i);
      CHECK(inv_freq[i] == doctest::Approx(ref.rope_inv_freq[i]).epsilon(1e-6));
    }
  }
}

}  // namespace

TEST_CASE("tiny GPT-2 matches transformers") { check_model("tiny-gpt2", rose::Arch::kGpt2); }

TEST_CASE("tiny Llama (GQA, llama3 RoPE scaling, tied head) matches transformers") {
  check_model("tiny-llama", rose::Arch::kLlama);
}

TEST_CASE("tiny Qwen2 (qkv bias, untied head) matches transformers") {
  check_model("tiny-qwen2", rose::Arch::kLlama);
}
