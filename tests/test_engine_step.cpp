// The step API (engine.h: start / add / step / finish) driven by hand, and the Runner interface:
// requests added after the run has started are served, late arrivals wait for their time, indices
// given to add() reach the callbacks, and the outputs equal the fake model's unpaged reference.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/common/error.h"
#include "engine/scheduler/engine.h"
#include "tests/fake_backend.h"

using namespace rose;
using rose::testing::FakeBackend;
using rose::testing::FakeClock;
using rose::testing::reference_generate;

namespace {

constexpr int kVocab = 1000;

EngineRequest make_request(int prompt_len, int max_tokens, uint64_t seed, double arrival = 0) {
  EngineRequest r;
  for (int i = 0; i < prompt_len; ++i) {
    r.prompt.push_back(int32_t(testing::mix(seed, uint64_t(i)) % kVocab));
  }
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.arrival_s = arrival;
  return r;
}

// keep_results off over a window of 4 requests added between steps (as `run` keeps it).
void keep_results_off_run(StepOverlap overlap) {
  FakeBackend backend(64, 16, kVocab);
  EngineConfig config;
  config.max_num_seqs = 3;
  config.max_num_batched_tokens = 32;
  config.keep_results = false;
  config.overlap = overlap;
  Engine engine(backend, config, "fake");
  FakeClock clock;
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 40; ++i) requests.push_back(make_request(5 + i % 7, 1 + i % 4, uint64_t(i)));
  std::vector<std::vector<int32_t>> outputs(requests.size());
  size_t finished = 0;
  RunCallbacks callbacks;
  callbacks.on_finish = [&](int index, const RequestResult& r) {
    outputs[size_t(index)] = r.output_ids;
    ++finished;
  };
  engine.start(callbacks, &clock);
  // A window of 4 as `run` keeps it: add while fewer than 4 are unfinished.
  size_t next = 0;
  while (next < requests.size() || !engine.done()) {
    for (; next < requests.size() && next - finished < 4; ++next) {
      engine.add(requests[next], int(next));
    }
    if (!engine.step(engine.now())) engine.wait_for_arrival();
  }
  const RunResult result = engine.finish();
  CHECK(finished == requests.size());
  CHECK(result.requests.empty());  // they went to on_finish
  CHECK(result.step_series.time.empty());
  CHECK((result.steps.steps_ahead > 0) == (overlap == StepOverlap::kOn));
  for (size_t i = 0; i < requests.size(); ++i) {
    CHECK(outputs[i] == reference_generate(requests[i], kVocab, {}));
  }
}

}  // namespace

TEST_CASE("requests added between steps are served and match the reference") {
  FakeBackend backend(64, 16, kVocab);
  EngineConfig config;
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = 32;
  Engine engine(backend, config, "fake");
  FakeClock clock;
  std::vector<int> finished;
  RunCallbacks callbacks;
  callbacks.on_finish = [&](int index, const rose::RequestResult&) { finished.push_back(index); };
  engine.start(callbacks, &clock);
  CHECK(engine.done());
  CHECK_FALSE(engine.step(0.0));  // nothing added yet

  const EngineRequest first = make_request(20, 6, 1);
  engine.add(first, 70);
  CHECK_FALSE(engine.done());
  CHECK(engine.step(engine.now()));
  CHECK(engine.step(engine.now()));

  const EngineRequest second = make_request(9, 3, 2);
  engine.add(second, 71);  // after the run has started
  while (!engine.done()) {
    if (!engine.step(engine.now())) engine.wait_for_arrival();
  }
  const RunResult result = engine.finish();
  REQUIRE(result.requests.size() == 2);
  CHECK(result.requests[0].output_ids == reference_generate(first, kVocab, {}));
  CHECK(result.requests[1].output_ids == reference_generate(second, kVocab, {}));
  CHECK(finished.size() == 2);
  CHECK((finished[0] == 70 || finished[0] == 71));
  CHECK(result.steps.steps >= 6);
}

TEST_CASE("online: a request added with a later arrival waits for it") {
  FakeBackend backend(64, 16, kVocab);
  EngineConfig config;
  config.mode = SchedulerMode::kOnline;
  Engine engine(backend, config, "fake");
  FakeClock clock;
  engine.start({}, &clock);
  engine.add(make_request(8, 2, 3, 0.5), 0);
  CHECK(engine.next_arrival() == doctest::Approx(0.5));
  CHECK_FALSE(engine.step(engine.now()));  // not visible yet
  engine.wait_for_arrival();
  CHECK(engine.now() >= 0.5);
  engine.add(make_request(8, 2, 4, 0.2), 1);  // earlier than the first: visible at once
  while (!engine.done()) {
    if (!engine.step(engine.now())) engine.wait_for_arrival();
  }
  const RunResult result = engine.finish();
  REQUIRE(result.requests.size() == 2);
  CHECK(result.requests[0].timeline.arrival == doctest::Approx(0.5));
  CHECK(result.requests[1].timeline.first_scheduled >= 0.5);
  CHECK(clock.sleeps == 1);
}

TEST_CASE("a bad request is refused by add() and the run goes on") {
  FakeBackend backend(4, 16, kVocab);
  Engine engine(backend, EngineConfig{}, "fake");
  FakeClock clock;
  engine.start({}, &clock);
  EngineRequest bad = make_request(4, 2, 5);
  bad.prompt[1] = kVocab;
  CHECK_THROWS_WITH_AS(engine.add(bad, 3), doctest::Contains("request 3"), Error);
  CHECK_THROWS_AS(engine.add(make_request(60, 10, 6), 4), Error);  // can never fit the pool
  engine.add(make_request(4, 2, 7), 5);
  while (engine.step(engine.now())) {
  }
  CHECK(engine.done());
  CHECK(engine.finish().requests.size() == 1);
}

TEST_CASE("Engine is a Runner") {
  FakeBackend backend(64, 16, kVocab);
  Engine engine(backend, EngineConfig{}, "fake");
  Runner& runner = engine;
  FakeClock clock;
  const std::vector<EngineRequest> requests = {make_request(10, 3, 8), make_request(5, 4, 9)};
  const RunResult result = runner.run(requests, {}, &clock);
  REQUIRE(result.requests.size() == 2);
  for (size_t i = 0; i < requests.size(); ++i) {
    CHECK(result.requests[i].output_ids == reference_generate(requests[i], kVocab, {}));
  }
  runner.reset_prefix_cache();
  CHECK(runner.run(requests, {}, &clock).cache.hit_tokens == 0);
}

TEST_CASE("an engine refuses budgets larger than the backend was sized for, when constructed") {
  FakeBackend backend(64, 16, kVocab);
  backend.plan_limits.max_num_seqs = 8;
  backend.plan_limits.max_num_tokens = 128;
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 128;
  CHECK_NOTHROW(Engine(backend, config, "fake"));
  config.max_num_seqs = 9;
  CHECK_THROWS_WITH_AS(Engine(backend, config, "fake"), doctest::Contains("max_num_seqs 9"), Error);
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 129;
  CHECK_THROWS_WITH_AS(Engine(backend, config, "fake"),
                       doctest::Contains("max_num_batched_tokens 129"), Error);
}

TEST_CASE("the engine's length limit is the backend's max_model_len") {
  FakeBackend backend(64, 16, kVocab);
  backend.plan_limits.max_model_len = 20;
  Engine engine(backend, EngineConfig{}, "fake");
  FakeClock clock;
  engine.start({}, &clock);
  CHECK_THROWS_WITH_AS(engine.add(make_request(18, 3, 1), 0), doctest::Contains("length limit 20"),
                       Error);
  engine.add(make_request(17, 3, 1), 1);
  while (engine.step(engine.now())) {
  }
  CHECK(engine.finish().requests.size() == 1);
}

TEST_CASE("keep_results off: finished requests are reported, dropped and their slots reused") {
  // Overlapped, requests are added (into reused slots) while a step planned ahead of its update
  // still holds rows of requests that have just finished.
  for (StepOverlap overlap : {StepOverlap::kOff, StepOverlap::kOn}) {
    CAPTURE(overlap == StepOverlap::kOn);
    keep_results_off_run(overlap);
  }
}
