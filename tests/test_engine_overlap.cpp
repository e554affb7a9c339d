// Overlapped steps (engine.h, EngineConfig::overlap): step N+1 is scheduled and submitted before
// step N's ids are applied, its decode tokens naming N's rows (previous_step_token). Over the fake
// backend (whose next token hashes the KV read through the block table, so a wrong token, slot or
// block shows) a non-finite row and a failed step must leave every other output the unpaged
// reference, and no step may go ahead unless asked. Every mode with and without the cache, EOS,
// stop strings, preemption (test_engine.cpp) and requests added between steps into reused slots
// (test_engine_step.cpp) run overlapped in those files' tests.
#include <doctest/doctest.h>

#include <algorithm>
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
