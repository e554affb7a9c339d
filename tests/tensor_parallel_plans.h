#pragma once
// Step plans for the tensor-parallel tests (CPU and GPU): three prompts prefilled in one step,
// then greedy decode steps, every step's logits and ids kept, and a comparison of two runs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/common/sampling_rule.h"

namespace tptest {

constexpr int kBlockSize = 16;
constexpr int kStride = 8;  // block table columns

inline rose::BackendOptions small_options() {
  rose::BackendOptions options;
  options.block_size = kBlockSize;
  options.num_kv_blocks = 64;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 128;
  return options;
}

// Sequence s owns blocks [s * kStride, (s + 1) * kStride).
inline void add_tokens(rose::StepPlan& plan, int s, const std::vector<int32_t>& tokens,
                       int cached) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int pos = cached + int(i);
    plan.token_ids.push_back(tokens[i]);
    plan.positions.push_back(pos);
    plan.slot_mapping.push_back((s * kStride + pos / kBlockSize) * kBlockSize + pos % kBlockSize);
  }
  if (plan.query_start.empty()) plan.query_start.push_back(0);
  plan.query_start.push_back(plan.query_start.back() + int32_t(tokens.size()));
  plan.context_lens.push_back(cached + int32_t(tokens.size()));
  for (int b = 0; b < kStride; ++b) plan.block_tables.push_back(s * kStride + b);
  plan.block_table_stride = kStride;
  plan.do_sample.push_back(1);
  plan.sampling.push_back(rose::SamplingParams{});
  plan.sample_index.push_back(0);
}

// The three prompts every run prefills: 5, 17 and 40 random ids below `vocab`.
constexpr int kPromptLengths[3] = {5, 17, 40};
inline std::vector<std::vector<int32_t>> make_prompts(int vocab) {
  std::vector<std::vector<int32_t>> prompts;
  std::mt19937 rng(7);
  for (int len : kPromptLengths) {
    std::vector<int32_t> p;
    for (int i = 0; i < len; ++i) p.push_back(int32_t(rng() % uint32_t(vocab)));
    prompts.push_back(p);
  }
  return prompts;
}

// The prefill of make_prompts(vocab), every sequence sampling.
inline rose::StepPlan prefill_plan(int vocab) {
  rose::StepPlan plan;
  const std::vector<std::vector<int32_t>> prompts = make_prompts(vocab);
  for (int s = 0; s < 3; ++s) add_tokens(plan, s, prompts[size_t(s)], 0);
  return plan;
}

// Three prompts prefilled together, then greedy decode steps: every step's logits and ids.
struct Run {
  std::vector<std::vector<float>> logits;  // per step (num_seqs, vocab)
  std::vector<std::vector<int32_t>> ids;   // per step (num_seqs,)
};

// `forced`: feed that run's ids instead of this run's own (so two backends whose rounding differs
// see the same inputs at every step).
inline Run greedy_run(rose::Backend& backend, int vocab, int decode_steps,
                      const Run* forced = nullptr) {
  Run run;
  rose::StepPlan plan = prefill_plan(vocab);
  rose::StepOutput out;
  plan.return_logits = true;
  std::vector<int> context(std::begin(kPromptLengths), std::end(kPromptLengths));
  for (int step = 0; step <= decode_steps; ++step) {
    backend.execute(plan, out);
    run.logits.push_back(out.logits);
    run.ids.push_back(out.sampled);
    plan.clear();
    plan.return_logits = true;
    for (int s = 0; s < 3; ++s) {
      const int32_t next = forced ? forced->ids[size_t(step)][size_t(s)] : out.sampled[size_t(s)];
      add_tokens(plan, s, {next}, context[size_t(s)]);
      ++context[size_t(s)];
    }
  }
  return run;
}

// greedy_run's steps submitted as the engine overlaps them: step k + 1 is submitted before step k
// is collected, its decode tokens previous_step_token(s) (read by the backend from what step k
// sampled). Every step's ids, to compare with greedy_run's.
inline std::vector<std::vector<int32_t>> overlapped_ids(rose::Backend& backend, int vocab,
                                                        int decode_steps) {
  rose::StepPlan plan = prefill_plan(vocab);
  std::vector<int> context(std::begin(kPromptLengths), std::end(kPromptLengths));
  std::vector<std::vector<int32_t>> ids;
  rose::StepOutput out;
  for (int step = 0; step <= decode_steps; ++step) {
    backend.submit(plan);
    if (step > 0) {  // the step before, while this one runs
      backend.collect(out);
      ids.push_back(out.sampled);
    }
    plan.clear();
    for (int s = 0; s < 3; ++s) {
      add_tokens(plan, s, {rose::previous_step_token(s)}, context[size_t(s)]);
      ++context[size_t(s)];
    }
  }
  backend.collect(out);
  ids.push_back(out.sampled);
  return ids;
}

// Same ids at every step; logits within `tolerance` (absolute).
inline void check_same_run(const Run& split, const Run& whole, double tolerance = 1e-4) {
  REQUIRE(split.ids.size() == whole.ids.size());
  for (size_t step = 0; step < whole.ids.size(); ++step) {
    CHECK(split.ids[step] == whole.ids[step]);
    REQUIRE(split.logits[step].size() == whole.logits[step].size());
    double worst = 0;
    for (size_t i = 0; i < whole.logits[step].size(); ++i) {
      worst = std::max(worst, double(std::fabs(split.logits[step][i] - whole.logits[step][i])));
    }
    CHECK(worst < tolerance);
  }
}

}  // namespace tptest
