// The engine end to end on the real CPU backend (preset "tiny", synthetic weights, greedy): the
// prefix cache, the scheduling mode and preemption must not change any output token, and the
// shared-prompt workload must hit the cache as the fake-backend tests predict.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/weights.h"
#include "engine/scheduler/engine.h"

using namespace rose;

namespace {

std::vector<int32_t> tokens(int n, int32_t seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t((seed * 131 + i * 37 + (i * i) % 11) % 500));
  return t;
}

std::unique_ptr<Backend> tiny_backend(int num_kv_blocks, int block_size = 16) {
  static const std::unique_ptr<WeightSource> weights = open_model("tiny");
  BackendOptions options;
  options.block_size = block_size;
  options.num_kv_blocks = num_kv_blocks;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 256;
  return make_cpu_backend(*weights, options);
}

EngineConfig config(SchedulerMode mode, bool cache) {
  EngineConfig c;
  c.mode = mode;
  c.prefix_cache = cache;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 256;
  return c;
}

std::vector<std::vector<int32_t>> outputs(const RunResult& result) {
  std::vector<std::vector<int32_t>> out;
  for (const RequestResult& r : result.requests) out.push_back(r.output_ids);
  return out;
}

// Requests with shared prefixes, an exact duplicate and a prompt longer than the token budget.
std::vector<EngineRequest> workload() {
  const std::vector<int32_t> system = tokens(40, 1);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.prompt = system;
    const std::vector<int32_t> tail = tokens(3 + 5 * (i % 3), 10 + i % 4);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_tokens = 6 + i;
    r.ignore_eos = i % 2 == 0;
    requests.push_back(r);
  }
  EngineRequest long_prompt;
  long_prompt.prompt = tokens(300, 5);
  long_prompt.max_tokens = 4;
  requests.push_back(long_prompt);
  return requests;
}

}  // namespace

TEST_CASE("cpu backend: identical greedy outputs across modes and with the cache on or off") {
  const std::vector<EngineRequest> requests = workload();
  // Reference: every request alone, no cache, no batching.
  std::vector<std::vector<int32_t>> solo;
  for (const EngineRequest& r : requests) {
    std::unique_ptr<Backend> backend = tiny_backend(64);
    Engine engine(*backend, config(SchedulerMode::kNaive, false), "tiny");
    const RunResult result = engine.run({r});
    REQUIRE(result.requests.size() == 1);
    CHECK(!result.requests[0].output_ids.empty());
    solo.push_back(result.requests[0].output_ids);
  }
  for (SchedulerMode mode :
       {SchedulerMode::kNaive, SchedulerMode::kOffline, SchedulerMode::kOnline}) {
    for (bool cache : {true, false}) {
      CAPTURE(mode_name(mode));
      CAPTURE(cache);
      for (StepOverlap overlap : {StepOverlap::kOff, StepOverlap::kOn}) {
        CAPTURE(overlap == StepOverlap::kOn);
        std::unique_ptr<Backend> backend = tiny_backend(128);
        EngineConfig c = config(mode, cache);
        c.overlap = overlap;  // on: each step planned before the last one's ids are applied
        Engine engine(*backend, c, "tiny");
        const RunResult result = engine.run(requests);
        CHECK(outputs(result) == solo);
        if (cache) CHECK(result.cache.hit_tokens >= 5 * 32);
      }
    }
  }
}

TEST_CASE(
    "cpu backend: a shared prompt is computed once and hits (n-1)/n of the cacheable tokens") {
  const std::vector<int32_t> prompt = tokens(100, 3);
  std::vector<EngineRequest> requests(8);
  for (EngineRequest& r : requests) {
    r.prompt = prompt;
    r.max_tokens = 4;
    r.ignore_eos = true;
  }
  std::unique_ptr<Backend> cached_backend = tiny_backend(128);
  Engine cached(*cached_backend, config(SchedulerMode::kOffline, true), "tiny");
  const RunResult with = cached.run(requests);
  std::unique_ptr<Backend> plain_backend = tiny_backend(128);
  Engine plain(*plain_backend, config(SchedulerMode::kOffline, false), "tiny");
  const RunResult without = plain.run(requests);
  CHECK(outputs(with) == outputs(without));
  for (const RequestResult& r : with.requests) CHECK(r.output_ids == with.requests[0].output_ids);
  const int cacheable = 96;  // (100 - 1) rounded down to blocks of 16
  CHECK(with.cache.hit_tokens == 7 * cacheable);
  CHECK(with.cache.queried_tokens == 8 * 100);
  CHECK(with.steps.prefill_tokens == 100 + 7 * 4);
  CHECK(without.steps.prefill_tokens == 8 * 100);
}

TEST_CASE("cpu backend: preemption under a tiny pool keeps every output") {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r;
    r.prompt = tokens(20 + 4 * i, 20 + i);
    r.max_tokens = 24;
    r.ignore_eos = true;
    requests.push_back(r);
  }
  std::unique_ptr<Backend> roomy = tiny_backend(128, 8);
  Engine reference(*roomy, config(SchedulerMode::kOffline, false), "tiny");
  const RunResult expected = reference.run(requests);
  CHECK(expected.kv.preemptions == 0);
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    for (StepOverlap overlap : {StepOverlap::kOff, StepOverlap::kOn}) {
      CAPTURE(overlap == StepOverlap::kOn);
      std::unique_ptr<Backend> small = tiny_backend(12, 8);  // 96 tokens: two requests at a time
      EngineConfig c = config(SchedulerMode::kOnline, cache);
      c.overlap = overlap;
      Engine engine(*small, c, "tiny");
      const RunResult result = engine.run(requests);
      CHECK(result.kv.preemptions > 0);
      CHECK(outputs(result) == outputs(expected));
    }
  }
}
