// Non-finite logits (a NaN row in the embedding of tiny-qwen2, on the CPU backend) end only the
// request that read it, with FinishReason::kError and a message naming the step; the others produce
// exactly what a clean model gives; bench counts the request as failed and says why; check_weights
// names the first bad values.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/metrics/metrics.h"
#include "engine/model/weight_check.h"
#include "engine/model/weights.h"
#include "engine/scheduler/engine.h"
#include "tests/poisoned_model.h"
#include "tests/test_util.h"

using namespace rose;
using rose::test::contains;

using rose::test::kPoisonedToken;
using rose::test::PoisonedEmbedding;
using rose::test::tiny_weights;

namespace {
RunResult run_three(const WeightSource& weights, std::vector<EngineRequest>& requests) {
  return rose::test::run_three(weights, requests, make_cpu_backend);
}
}  // namespace

TEST_CASE("non-finite logits fail their request only, naming the step") {
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
    CHECK(run.requests[i].output_ids == clean.requests[i].output_ids);
    CHECK(run.requests[i].output_ids.size() == 5);
  }
  CHECK(clean.requests[1].finish_reason == FinishReason::kLength);

  const BenchReport report = make_report(run, requests, "offline", true, {50.0}, Slo{});
  CHECK(report.completed == 2);
  CHECK(report.failed == 1);
  CHECK(contains(report.first_failure, "request 1: non-finite logits"));
}

TEST_CASE("check_weights names the first non-finite values and counts them all") {
  const WeightCheck clean = check_weights(tiny_weights(), 4);
  CHECK(clean.non_finite == 0);
  CHECK(clean.first.empty());
  CHECK(clean.tensors > 3);

  const PoisonedEmbedding poisoned(tiny_weights());
  const WeightCheck check = check_weights(poisoned, 4);
  CHECK(check.non_finite == tiny_weights().config().hidden_size);
  CHECK(check.values == clean.values);
  REQUIRE(check.first.size() == 4);
  CHECK(check.first[0].tensor == "tok_emb");
  CHECK(check.first[0].position == std::vector<int64_t>{kPoisonedToken, 0});
  CHECK(check.first[3].position == std::vector<int64_t>{kPoisonedToken, 3});
  CHECK(std::isnan(check.first[0].value));
}
