// Engine end to end over the fake backend (tests/fake_backend.h): outputs must equal the fake
// model's unpaged reference in every mode, with and without the prefix cache and under
// preemption; stats, times and errors follow engine.h.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/scheduler/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fake_backend.h"
#include "tests/mixed_workload.h"

using namespace rose;
using rose::testing::FakeBackend;
using rose::testing::FakeClock;
using rose::testing::reference_generate;

namespace {

constexpr int kVocab = testing::kMixedVocab;
using testing::make_tokens;
using testing::mixed_requests;

using testing::config_for;

constexpr StepOverlap kOverlaps[] = {StepOverlap::kOff, StepOverlap::kOn};

void check_outputs(const RunResult& result, const std::vector<EngineRequest>& requests,
                   const std::vector<int>& eos = {}) {
  REQUIRE(result.requests.size() == requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    CHECK(result.requests[i].output_ids == reference_generate(requests[i], kVocab, eos));
  }
}

// Runs `requests` with EOS = id 2 over `vocab` ids: each output is the reference's, and at least
// one request stops on EOS (those that ignore it run to max_tokens, 12).
void check_eos_run(const std::vector<EngineRequest>& requests, int vocab,
                   const EngineConfig& config) {
  FakeBackend backend(64, 4, vocab, {2});
  Engine engine(backend, config, "fake");
  const RunResult result = engine.run(requests);
  int stopped = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    const std::vector<int32_t> expected = reference_generate(requests[i], vocab, {2});
    CHECK(result.requests[i].output_ids == expected);
    const bool ends_in_eos = !expected.empty() && expected.back() == 2;
    if (requests[i].ignore_eos) {
      CHECK(expected.size() == 12);
      CHECK(result.requests[i].finish_reason == FinishReason::kLength);
    } else if (ends_in_eos) {
      ++stopped;
      CHECK(result.requests[i].finish_reason == FinishReason::kStop);
    }
  }
  CHECK(stopped > 0);  // the workload exercises the stop path
}

}  // namespace

TEST_CASE(
    "every mode, with and without the prefix cache and overlapped steps, produces the reference "
    "outputs") {
  const std::vector<EngineRequest> requests = mixed_requests();
  for (SchedulerMode mode :
       {SchedulerMode::kNaive, SchedulerMode::kOffline, SchedulerMode::kOnline}) {
    for (auto [cache, overlap] : {std::pair{true, StepOverlap::kOff},
                                  {false, StepOverlap::kOff},
                                  {true, StepOverlap::kOn},
                                  {false, StepOverlap::kOn}}) {
      CAPTURE(mode_name(mode));
      CAPTURE(cache);
      CAPTURE(overlap == StepOverlap::kOn);
      FakeClock clock;
      FakeBackend backend(256, 16, kVocab, {}, &clock);
      Engine engine(backend, config_for(mode, cache, overlap), "fake");
      const RunResult result = engine.run(requests, {}, &clock);
      check_outputs(result, requests);
      for (const RequestResult& r : result.requests) {
        CHECK(r.timeline.token_times.size() == r.output_ids.size());
      }
      CHECK((result.steps.steps_ahead > 0) == (overlap == StepOverlap::kOn));
      CHECK(result.kv.preemptions == 0);
      CHECK(result.steps.steps == int64_t(backend.steps.size()));
      for (const auto& step : backend.steps) {
        CHECK(step.num_tokens <= 64);
        CHECK(step.num_seqs <= (mode == SchedulerMode::kNaive ? 1 : 8));
      }
      if (cache) {
        CHECK(result.cache.hit_tokens > 0);
      } else {
        CHECK(result.cache.lookups == 0);
        CHECK(result.cache.hit_tokens == 0);
      }
    }
  }
}

TEST_CASE("seed000 shape: 64 requests share one 856-token prompt; the cache computes it once") {
  const std::vector<int32_t> prompt = make_tokens(856, 42);
  std::vector<EngineRequest> requests(64);
  for (EngineRequest& r : requests) {
    r.prompt = prompt;
    r.max_tokens = 16;
    r.ignore_eos = true;
  }
  const int cacheable = (856 - 1) / 16 * 16;  // 848: the last token is always computed
  for (SchedulerMode mode :
       {SchedulerMode::kOffline, SchedulerMode::kNaive, SchedulerMode::kOnline}) {
    CAPTURE(mode_name(mode));
    EngineConfig config;
    config.mode = mode;
    FakeBackend cached_backend(4096, 16, kVocab);
    Engine cached(cached_backend, config, "fake");
    const RunResult with = cached.run(requests);
    config.prefix_cache = false;
    FakeBackend plain_backend(4096, 16, kVocab);
    Engine plain(plain_backend, config, "fake");
    const RunResult without = plain.run(requests);

    for (size_t i = 0; i < requests.size(); ++i) {
      CHECK(with.requests[i].output_ids == without.requests[i].output_ids);
      CHECK(with.requests[i].cached_prompt_tokens == (i == 0 ? 0 : cacheable));
    }
    check_outputs(with, requests);
    CHECK(with.cache.lookups == 64);
    CHECK(with.cache.queried_tokens == 64 * 856);
    CHECK(with.cache.hit_tokens == 63 * cacheable);
    CHECK(with.cache.hit_rate() == doctest::Approx(63.0 / 64.0 * cacheable / 856.0));
    // The first request computes the whole prompt, the others only what follows the hit.
    CHECK(with.steps.prefill_tokens == 856 + 63 * (856 - cacheable));
    CHECK(without.steps.prefill_tokens == 64 * 856);
    CHECK(with.steps.decode_tokens == 64 * 15);
    CHECK(without.steps.decode_tokens == 64 * 15);
    if (mode == SchedulerMode::kOffline) {
      // All 64 prefill in the first step (1,360 tokens < 8,192), then 15 pure decode steps.
      CHECK(with.steps.steps == 16);
      CHECK(with.steps.decode_steps == 15);
      // 53 shared blocks + 2 private tail blocks per request (tokens 848..870).
      CHECK(with.kv.peak_used_blocks == 53 + 64 * 2);
      CHECK(without.kv.peak_used_blocks == 64 * 55);
    }
  }
}

TEST_CASE(
    "a tiny pool forces preemptions and every request still completes with the same "
    "outputs") {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 12; ++i) {
    EngineRequest r;
    r.prompt = make_tokens(20 + 3 * i, 300 + uint64_t(i % 4));
    r.max_tokens = 30;
    r.ignore_eos = true;
    requests.push_back(r);
  }
  for (SchedulerMode mode : {SchedulerMode::kOffline, SchedulerMode::kOnline}) {
    for (auto [cache, overlap] : {std::pair{true, StepOverlap::kOff},
                                  {false, StepOverlap::kOff},
                                  {true, StepOverlap::kOn},
                                  {false, StepOverlap::kOn}}) {
      CAPTURE(mode_name(mode));
      CAPTURE(cache);
      CAPTURE(overlap == StepOverlap::kOn);
      FakeBackend backend(12, 8, kVocab);  // 96 tokens: about two requests at a time
      EngineConfig config = config_for(mode, cache, overlap);
      config.max_num_batched_tokens = 128;
      Engine engine(backend, config, "fake");
      const RunResult result = engine.run(requests);
      check_outputs(result, requests);
      CHECK(result.kv.preemptions > 0);
      int64_t per_request = 0;
      for (const RequestResult& r : result.requests) {
        per_request += r.preemptions;
        CHECK(r.timeline.token_times.size() == 30);
        CHECK(r.finish_reason == FinishReason::kLength);
      }
      CHECK(per_request == result.kv.preemptions);
      CHECK(result.kv.peak_used_blocks <= 12);
    }
  }
}

TEST_CASE("EOS finishes a request unless it ignores EOS, also with overlapped steps") {
  constexpr int kSmallVocab = 6;  // EOS (id 2) comes up often
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 10; ++i) {
    EngineRequest r;
    r.prompt = {int32_t(i % kSmallVocab), 1, 3, int32_t((i * 7) % kSmallVocab)};
    r.max_tokens = 12;
    r.ignore_eos = (i % 2 == 1);
    requests.push_back(r);
  }
  for (SchedulerMode mode :
       {SchedulerMode::kNaive, SchedulerMode::kOffline, SchedulerMode::kOnline}) {
    for (StepOverlap overlap : kOverlaps) {
      CAPTURE(mode_name(mode));
      CAPTURE(overlap == StepOverlap::kOn);
      check_eos_run(requests, kSmallVocab, config_for(mode, true, overlap));
    }
  }
  CHECK(std::string(finish_reason_name(FinishReason::kStop)) == "stop");
  CHECK(std::string(finish_reason_name(FinishReason::kLength)) == "length");
}

TEST_CASE("token times, arrivals, first scheduled and duration follow the clock") {
  // Online: request 1 arrives at 1.0 s while the engine is idle, so the engine sleeps to it.
  std::vector<EngineRequest> requests(2);
  requests[0].prompt = make_tokens(10, 5);
  requests[0].max_tokens = 3;
  requests[1].prompt = make_tokens(12, 6);
  requests[1].max_tokens = 2;
  requests[1].arrival_s = 1.0;
  FakeClock clock;
  FakeBackend backend(32, 16, kVocab, {}, &clock, 0.01);
  EngineConfig config;
  config.mode = SchedulerMode::kOnline;
  Engine engine(backend, config, "fake");
  int tokens = 0, finished = 0;
  RunCallbacks callbacks;
  callbacks.on_token = [&](int index, int32_t) {
    CHECK((index == 0 || index == 1));
    ++tokens;
  };
  callbacks.on_finish = [&](int, const rose::RequestResult&) { ++finished; };
  const RunResult result = engine.run(requests, callbacks, &clock);
  CHECK(tokens == 5);
  CHECK(finished == 2);
  CHECK(clock.sleeps >= 1);
  const Timeline& a = result.requests[0].timeline;
  const Timeline& b = result.requests[1].timeline;
  CHECK(a.arrival == 0.0);
  CHECK(a.first_scheduled == doctest::Approx(0.0));
  REQUIRE(a.token_times.size() == 3);
  // Each step takes 10 ms and a token's time is right after its step.
  CHECK(a.token_times[0] == doctest::Approx(0.01));
  CHECK(a.token_times[2] == doctest::Approx(0.03));
  CHECK(a.finish == doctest::Approx(0.03));
  CHECK(b.arrival == 1.0);
  CHECK(b.first_scheduled == doctest::Approx(1.0));
  REQUIRE(b.token_times.size() == 2);
  CHECK(b.token_times[0] == doctest::Approx(1.01));
  CHECK(b.finish == doctest::Approx(1.02));
  CHECK(result.duration_s == doctest::Approx(1.02));

  // Offline ignores arrival times: everything is there at t = 0 and nobody sleeps.
  FakeClock clock2;
  FakeBackend backend2(32, 16, kVocab, {}, &clock2, 0.01);
  config.mode = SchedulerMode::kOffline;
  Engine offline(backend2, config, "fake");
  const RunResult r2 = offline.run(requests, {}, &clock2);
  CHECK(clock2.sleeps == 0);
  CHECK(r2.requests[1].timeline.arrival == 0.0);
  CHECK(r2.requests[1].timeline.token_times[0] == doctest::Approx(0.01));
  CHECK(r2.duration_s == doctest::Approx(0.03));
}

TEST_CASE("step stats: pure-decode steps, their bytes, and execute time") {
  std::vector<EngineRequest> requests(3);
  for (int i = 0; i < 3; ++i) {
    requests[size_t(i)].prompt = make_tokens(5 + i, uint64_t(i));
    requests[size_t(i)].max_tokens = 4;
  }
  FakeBackend backend(32, 4, kVocab);
  Engine engine(backend, config_for(SchedulerMode::kOffline, false), "fake");
  const RunResult result = engine.run(requests);
  int64_t decode_steps = 0;
  double bytes = 0;
  for (const auto& step : backend.steps) {
    if (!step.pure_decode) continue;
    ++decode_steps;
    bytes += 1000;
    for (int ctx : step.context_lens) bytes += 10.0 * ctx;
  }
  CHECK(decode_steps == 3);  // one prefill step, then three decode steps
  CHECK(result.steps.decode_steps == decode_steps);
  CHECK(result.steps.decode_bytes == doctest::Approx(bytes));
  CHECK(result.steps.prefill_tokens == 5 + 6 + 7);
  CHECK(result.steps.decode_tokens == 9);
  CHECK(result.steps.execute_time_s >= result.steps.decode_time_s);
  CHECK(result.steps.schedule_time_s > 0);
  CHECK(result.kv.block_size == 4);
  CHECK(result.kv.total_blocks == 32);
}

TEST_CASE("runs start warm unless the prefix cache is reset") {
  std::vector<EngineRequest> requests(1);
  requests[0].prompt = make_tokens(40, 77);
  requests[0].max_tokens = 2;
  FakeBackend backend(32, 16, kVocab);
  Engine engine(backend, EngineConfig{}, "fake");
  const RunResult cold = engine.run(requests);
  CHECK(cold.cache.hit_tokens == 0);
  const RunResult warm = engine.run(requests);
  CHECK(warm.cache.hit_tokens == 32);
  CHECK(warm.requests[0].output_ids == cold.requests[0].output_ids);
  CHECK(warm.cache.lookups == 1);  // stats are per run
  engine.reset_prefix_cache();
  const RunResult again = engine.run(requests);
  CHECK(again.cache.hit_tokens == 0);
  CHECK(again.requests[0].output_ids == cold.requests[0].output_ids);
}

TEST_CASE("bad requests are rejected before the run starts") {
  FakeBackend backend(4, 16, kVocab);  // 64 tokens of KV
  Engine engine(backend, EngineConfig{}, "fake");
  std::vector<EngineRequest> requests(2);
  requests[0].prompt = make_tokens(8, 1);
  requests[1].prompt = make_tokens(60, 2);
  requests[1].max_tokens = 10;  // 69 tokens of KV: can never fit
  CHECK_THROWS_WITH_AS(engine.run(requests), doctest::Contains("request 1"), Error);
  CHECK(backend.steps.empty());
  requests[1].max_tokens = 5;  // 64 tokens of KV: fits exactly
  CHECK(engine.run(requests).requests[1].output_ids.size() == 5);

  std::vector<EngineRequest> bad(1);
  CHECK_THROWS_AS(engine.run(bad), Error);  // empty prompt
  bad[0].prompt = {1, kVocab};
  CHECK_THROWS_WITH_AS(engine.run(bad), doctest::Contains("vocabulary"), Error);
  bad[0].prompt = {1, 2};
  bad[0].max_tokens = 0;
  CHECK_THROWS_AS(engine.run(bad), Error);
  bad[0].max_tokens = 1;
  bad[0].arrival_s = -1;
  CHECK_THROWS_AS(engine.run(bad), Error);

  EngineConfig zero;
  zero.max_num_batched_tokens = 0;
  Engine bad_engine(backend, zero, "fake");
  CHECK_THROWS_AS(bad_engine.run(requests), Error);
  CHECK(engine.run({}).requests.empty());
}

TEST_CASE("mode names") {
  CHECK(std::string(mode_name(SchedulerMode::kNaive)) == "naive");
  CHECK(std::string(mode_name(SchedulerMode::kOffline)) == "offline");
  CHECK(std::string(mode_name(SchedulerMode::kOnline)) == "online");
}

TEST_CASE("waiting for an arrival ends even when start + t - start rounds below t") {
  // 100.3 - 100.0 == 0.29999999999999716 in doubles. Time moves only when the engine sleeps.
  REQUIRE(100.3 - 100.0 < 0.3);
  std::vector<EngineRequest> requests(1);
  requests[0].prompt = make_tokens(5, 1);
  requests[0].max_tokens = 2;
  requests[0].arrival_s = 0.3;
  FakeClock clock;
  clock.t = 100.0;
  FakeBackend backend(8, 16, kVocab);  // does not advance the clock
  EngineConfig config;
  config.mode = SchedulerMode::kOnline;
  Engine engine(backend, config, "fake");
  const RunResult result = engine.run(requests, {}, &clock);
  CHECK(result.requests[0].output_ids.size() == 2);
  CHECK(clock.sleeps == 1);
  CHECK(result.requests[0].timeline.first_scheduled == doctest::Approx(0.3));
}

namespace {

struct FailingBackend : FakeBackend {
  using FakeBackend::FakeBackend;
  int fail_at_step = -1;
  void execute(const StepPlan& plan, StepOutput& out) override {
    if (int(steps.size()) == fail_at_step) {
      fail_at_step = -1;
      throw std::runtime_error("device lost");
    }
    FakeBackend::execute(plan, out);
  }
};

}  // namespace

TEST_CASE("a failed step gives every block back, and the next run is correct") {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.prompt = make_tokens(40, 3);  // shared: blocks get keys as they are scheduled
    r.prompt.push_back(int32_t(i));
    r.max_tokens = 5;
    r.ignore_eos = true;
    requests.push_back(r);
  }
  FailingBackend backend(64, 16, kVocab);
  backend.fail_at_step = 0;  // the prompt blocks were registered but never written
  Engine engine(backend, config_for(SchedulerMode::kOffline, true), "fake");
  CHECK_THROWS_WITH(engine.run(requests), "device lost");
  const RunResult result = engine.run(requests);
  check_outputs(result, requests);
  CHECK(result.cache.hit_tokens == 5 * 32);
}

TEST_CASE("a stop string ends a request at the token that completes it, in every mode") {
  // Vocabulary of bytes 'a'..'e' plus ids below: the byte tokenizer decodes id c to char c.
  constexpr int kByteVocab = 'a' + 5;
  EngineRequest r;
  r.prompt = {'a', 'b', 'c', 'd'};
  r.max_tokens = 40;
  r.ignore_eos = true;
  const std::vector<int32_t> free_run = reference_generate(r, kByteVocab, {});
  // Stop at the 6th generated character: its text plus the one before it, as a two-byte string.
  REQUIRE(free_run.size() == 40);
  const std::string stop = {char(free_run[4]), char(free_run[5])};
  size_t first = 1;  // where that pair first completes in the free run
  while (first < free_run.size() &&
         !(char(free_run[first - 1]) == stop[0] && char(free_run[first]) == stop[1])) {
    ++first;
  }
  r.stop = {stop};
  const auto tokenizer = rose::make_byte_tokenizer(256);
  for (SchedulerMode mode :
       {SchedulerMode::kNaive, SchedulerMode::kOffline, SchedulerMode::kOnline}) {
    // Overlapped, the step after the one that completes the string is already planned.
    for (StepOverlap overlap : kOverlaps) {
      CAPTURE(mode_name(mode));
      CAPTURE(overlap == StepOverlap::kOn);
      FakeBackend backend(64, 4, kByteVocab, {});
      EngineConfig config = config_for(mode, true);
      config.overlap = overlap;
      Engine engine(backend, config, "fake");
      CHECK_THROWS_WITH_AS(engine.run({r}), doctest::Contains("stop strings need"), rose::Error);
      engine.set_stop_tokenizer(tokenizer.get());
      const RunResult result = engine.run({r, r});
      const std::vector<int32_t> expected(free_run.begin(), free_run.begin() + long(first) + 1);
      for (const RequestResult& got : result.requests) {
        CHECK(got.output_ids == expected);
        CHECK(got.finish_reason == FinishReason::kStop);
      }
      CHECK((result.steps.steps_ahead > 0) == (overlap == StepOverlap::kOn));
    }
  }
}
