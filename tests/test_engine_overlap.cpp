// Overlapped steps (engine.h, EngineConfig::overlap): step N+1 is scheduled and submitted before
// step N's ids are applied, its decode tokens naming N's rows (previous_step_token). Over the fake
// backend (whose next token hashes the KV read through the block table, so a wrong token, slot or
// block shows): a non-finite row and a failed step leave every other output the unpaged
// reference; no step goes ahead unless asked; 200 random workloads give the reference overlapped
// and not; a block completed by a token planned ahead is cached under its real id. Every mode with
// and without the cache, EOS, stop strings, preemption (test_engine.cpp) and requests added
// between steps into reused slots (test_engine_step.cpp) run overlapped in those files' tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/scheduler/engine.h"
#include "tests/fake_backend.h"
#include "tests/mixed_workload.h"

using namespace rose;
using rose::testing::FakeBackend;
using rose::testing::FakeClock;
using rose::testing::reference_generate;

namespace {

constexpr int kVocab = testing::kMixedVocab;

// The fake backend, counting the plans submitted ahead (those naming the previous step's rows) and
// optionally failing or reporting non-finite logits at one step.
class AheadBackend : public FakeBackend {
 public:
  using FakeBackend::FakeBackend;
  void submit(const StepPlan& plan) override {
    const auto named =
        std::count_if(plan.token_ids.begin(), plan.token_ids.end(), is_previous_step_token);
    if (named > 0) ++steps_ahead;
    tokens_ahead += named;
    Backend::submit(plan);
  }
  void execute(const StepPlan& plan, StepOutput& out) override {
    const int step = executed++;
    if (step == fail_at_step) throw Error("device lost");
    FakeBackend::execute(plan, out);
    if (step == non_finite_step) {
      for (int s = 0; s < plan.num_seqs(); ++s) {
        if (!plan.do_sample[size_t(s)]) continue;
        out.sampled[size_t(s)] = kSampledNonFinite;
        break;
      }
    }
  }
  int steps_ahead = 0;
  int64_t tokens_ahead = 0;
  int executed = 0;
  int fail_at_step = -1;
  int non_finite_step = -1;
};

}  // namespace

TEST_CASE("overlapped steps: off and auto over a backend that does not overlap submit none ahead") {
  const std::vector<EngineRequest> requests = testing::mixed_requests();
  for (StepOverlap overlap : {StepOverlap::kOff, StepOverlap::kAuto}) {
    AheadBackend backend(256, 16, kVocab);
    REQUIRE(!backend.overlaps_steps());
    Engine engine(backend, testing::config_for(SchedulerMode::kOffline, true, overlap), "fake");
    const RunResult result = engine.run(requests);
    CHECK(backend.steps_ahead == 0);
    CHECK(result.steps.steps_ahead == 0);
    CHECK(result.requests[0].output_ids == reference_generate(requests[0], kVocab, {}));
  }
}

TEST_CASE("overlapped steps: a non-finite row ends its request only, without the token ahead") {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r;
    r.prompt = testing::make_tokens(6 + i, 70 + uint64_t(i));
    r.max_tokens = 10;
    r.ignore_eos = true;
    requests.push_back(r);
  }
  AheadBackend backend(64, 4, kVocab);
  backend.non_finite_step = 4;  // a decode step, with the next one already submitted
  Engine engine(backend, testing::config_for(SchedulerMode::kOffline, true, StepOverlap::kOn),
                "fake");
  const RunResult result = engine.run(requests);
  int failed = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    const RequestResult& got = result.requests[i];
    const std::vector<int32_t> expected = reference_generate(requests[i], kVocab, {});
    if (got.finish_reason == FinishReason::kError) {
      ++failed;
      CHECK(got.error.find("non-finite logits") != std::string::npos);
      REQUIRE(got.output_ids.size() < expected.size());
      CHECK(std::equal(got.output_ids.begin(), got.output_ids.end(), expected.begin()));
      CHECK(got.timeline.token_times.size() == got.output_ids.size());
    } else {
      CHECK(got.output_ids == expected);
    }
  }
  CHECK(failed == 1);
}

TEST_CASE("overlapped steps: a step that fails while another is submitted leaves a clean engine") {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.prompt = testing::make_tokens(40, 3);
    r.prompt.push_back(int32_t(i));
    r.max_tokens = 8;
    r.ignore_eos = true;
    requests.push_back(r);
  }
  AheadBackend backend(64, 16, kVocab);
  backend.fail_at_step = 3;  // submitted ahead of step 2, which is still to be collected
  Engine engine(backend, testing::config_for(SchedulerMode::kOffline, true, StepOverlap::kOn),
                "fake");
  CHECK_THROWS_WITH(engine.run(requests), "device lost");
  const RunResult result = engine.run(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    CHECK(result.requests[i].output_ids == reference_generate(requests[i], kVocab, {}));
  }
}

TEST_CASE(
    "overlapped steps: random workloads, pools and budgets give the reference in every mode") {
  // Many small runs where everything happens at once: prompts sharing prefixes, EOS coming up
  // often (a vocabulary of 12 with EOS = 3), max_tokens from 1, staggered arrivals, pools small
  // enough to preempt, budgets that chunk prompts, one or several sequences a step. Each run is
  // checked against the unpaged reference, overlapped and not, and the two runs' finish reasons
  // and preemption-free outputs must agree.
  constexpr int kSmall = 12;
  const std::vector<int> eos = {3};
  std::mt19937 rng(2026);
  int runs_ahead = 0, preempted = 0, stopped = 0;
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    const int block_size = rng() % 2 == 0 ? 4 : 8;
    const int num_blocks = 8 + int(rng() % 16);
    std::vector<EngineRequest> requests(size_t(2 + rng() % 7));
    const std::vector<int32_t> shared = testing::make_tokens(12, 500 + uint64_t(trial));
    for (size_t i = 0; i < requests.size(); ++i) {
      EngineRequest& r = requests[i];
      if (rng() % 2 == 0) r.prompt.assign(shared.begin(), shared.begin() + 1 + rng() % 12);
      const int extra = 1 + int(rng() % 20);
      for (int t = 0; t < extra; ++t) r.prompt.push_back(int32_t(rng() % kSmall));
      for (int32_t& t : r.prompt) t %= kSmall;
      r.max_tokens = 1 + int(rng() % 16);
      r.ignore_eos = rng() % 4 == 0;
      r.arrival_s = 0.01 * double(rng() % 20);
      // Fits the pool alone (the engine refuses one that never could).
      while (int(r.prompt.size()) + r.max_tokens > (num_blocks - 1) * block_size)
        r.prompt.pop_back();
    }
    const auto mode = SchedulerMode(rng() % 3);
    EngineConfig config = testing::config_for(mode, rng() % 2 == 0);
    config.max_num_seqs = 1 + int(rng() % 6);
    config.max_num_batched_tokens = 8 + int(rng() % 56);
    CAPTURE(mode_name(mode));
    RunResult results[2];
    for (int k = 0; k < 2; ++k) {
      config.overlap = k == 0 ? StepOverlap::kOff : StepOverlap::kOn;
      FakeClock clock;
      AheadBackend backend(num_blocks, block_size, kSmall, eos, &clock, 0.004);
      Engine engine(backend, config, "fake");
      results[k] = engine.run(requests, {}, &clock);
      REQUIRE(results[k].requests.size() == requests.size());
      for (size_t i = 0; i < requests.size(); ++i) {
        CAPTURE(i);
        CHECK(results[k].requests[i].output_ids == reference_generate(requests[i], kSmall, eos));
      }
      if (k == 1) runs_ahead += backend.steps_ahead > 0;
      preempted += results[k].kv.preemptions > 0;
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      CHECK(results[0].requests[i].finish_reason == results[1].requests[i].finish_reason);
      stopped += results[0].requests[i].finish_reason == FinishReason::kStop;
    }
  }
  // The trials covered what they are for.
  CHECK(runs_ahead > 150);
  CHECK(preempted >= 8);
  CHECK(stopped > 60);
}

TEST_CASE("overlapped steps: a block completed by a token planned ahead is cached under its id") {
  // A's first generated token completes its second block (4 + 3 prompt tokens): the step planned
  // ahead computes that block before the token is known, so it may only be keyed after update().
  // B, arriving once A is done, repeats A's prompt and first two tokens: it must hit both blocks,
  // as it does without overlap (a key taken over the unknown token would hit one).
  EngineRequest a;
  a.prompt = testing::make_tokens(7, 61);
  a.max_tokens = 4;
  a.ignore_eos = true;
  const std::vector<int32_t> a_out = reference_generate(a, kVocab, {});
  EngineRequest b;
  b.prompt = a.prompt;
  b.prompt.insert(b.prompt.end(), a_out.begin(), a_out.begin() + 2);
  b.max_tokens = 2;
  b.ignore_eos = true;
  b.arrival_s = 10.0;
  for (StepOverlap overlap : {StepOverlap::kOff, StepOverlap::kOn}) {
    CAPTURE(overlap == StepOverlap::kOn);
    FakeClock clock;
    AheadBackend backend(32, 4, kVocab, {}, &clock);
    Engine engine(backend, testing::config_for(SchedulerMode::kOnline, true, overlap), "fake");
    const RunResult result = engine.run({a, b}, {}, &clock);
    CHECK(result.requests[0].output_ids == a_out);
    CHECK(result.requests[1].output_ids == reference_generate(b, kVocab, {}));
    CHECK(result.requests[1].cached_prompt_tokens == 8);
    CHECK((backend.steps_ahead > 0) == (overlap == StepOverlap::kOn));
  }
}
