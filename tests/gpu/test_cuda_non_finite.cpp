// The CUDA sampler's non-finite flag (a kSampledNonFinite id, no extra copy or sync), end to end:
// a NaN row in tiny-qwen2's embedding ends only the request that reads it, with
// FinishReason::kError naming the step; the other requests give exactly what the clean model gives
// on the same backend. The CPU twin is tests/test_non_finite.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/weights.h"
#include "engine/scheduler/engine.h"
#include "tests/poisoned_model.h"

using namespace rose;

namespace {
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

using rose::test::kPoisonedToken;
using rose::test::PoisonedEmbedding;
using rose::test::tiny_weights;

namespace {
RunResult run_three(const WeightSource& weights, std::vector<EngineRequest>& requests) {
  return rose::test::run_three(weights, requests, make_cuda_backend);
}
}  // namespace

TEST_CASE("cuda: non-finite logits fail their request only, naming the step") {
  std::vector<EngineRequest> requests;
  const RunResult clean = run_three(tiny_weights(), requests);
  const PoisonedEmbedding poisoned(tiny_weights());
  const RunResult run = run_three(poisoned, requests);

  const RequestResult& bad = run.requests[1];
  CHECK(bad.finish_reason == FinishReason::kError);
  CHECK(std::string(finish_reason_name(bad.finish_reason)) == "error");
  CHECK(contains(bad.error, "non-finite logits"));
  CHECK(contains(bad.error, "engine step 1, sampling output token 0"));
  CHECK(bad.output_ids.empty());
  CHECK(bad.timeline.finish >= 0.0);
  for (int i : {0, 2}) {
    CAPTURE(i);
    CHECK(run.requests[i].finish_reason == FinishReason::kLength);
    CHECK(run.requests[i].error.empty());
    // The clean run on the same backend: the NaN row touched nothing else.
    CHECK(run.requests[i].output_ids == clean.requests[i].output_ids);
    CHECK(run.requests[i].output_ids.size() == 5);
  }
  CHECK(clean.requests[1].finish_reason == FinishReason::kLength);
}

// Where the NaN goes: one sequence {5, 77, 6} on the CUDA and the CPU backends, logits of its last
// position. On the CPU every logit is NaN; the CUDA row must hold at least one non-finite value for
// the sampler's flag to have anything to find.
TEST_CASE("cuda: a NaN embedding row reaches the last position's logits") {
  const PoisonedEmbedding poisoned(tiny_weights());
  BackendOptions options;
  options.num_kv_blocks = 8;
  options.max_num_seqs = 1;
  options.max_num_batched_tokens = 16;
  StepPlan plan;
  plan.token_ids = {5, kPoisonedToken, 6};
  plan.positions = {0, 1, 2};
  plan.slot_mapping = {0, 1, 2};
  plan.query_start = {0, 3};
  plan.context_lens = {3};
  plan.block_table_stride = 1;
  plan.block_tables = {0};
  plan.do_sample = {1};
  plan.sampling = {SamplingParams{}};
  plan.sample_index = {0};
  plan.return_logits = true;
  for (const bool cuda : {false, true}) {
    CAPTURE(cuda);
    const std::unique_ptr<Backend> backend =
        cuda ? make_cuda_backend(poisoned, options) : make_cpu_backend(poisoned, options);
    StepOutput out;
    backend->execute(plan, out);
    const auto non_finite = std::count_if(out.logits.begin(), out.logits.end(),
                                          [](float v) { return !std::isfinite(v); });
    MESSAGE(std::string(cuda ? "cuda" : "cpu")
            << ": " << non_finite << " of " << out.logits.size()
            << " logits non-finite, sampled id " << out.sampled.at(0));
    CHECK(non_finite > 0);
    CHECK(out.sampled.at(0) == kSampledNonFinite);
  }
}
