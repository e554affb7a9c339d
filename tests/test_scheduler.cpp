// Scheduler policies, driven step by step with a fake clock (the `now` argument) and the fake
// backend for sampled ids: budgets, chunking, each mode's order, arrival, max_concurrency,
// preemption and resumption, same-step duplicate prompts.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/kv/prefix_index.h"
#include "engine/scheduler/scheduler.h"
#include "tests/fake_backend.h"

using namespace rose;
using rose::testing::FakeBackend;
using rose::testing::reference_generate;

namespace {

constexpr int kVocab = 500;

using Row = std::pair<int, int>;  // (request index, tokens scheduled)

struct Harness {
  Harness(const EngineConfig& config, int num_blocks, int block_size)
      : pool(num_blocks, block_size),
        index(config.prefix_cache ? std::make_unique<PrefixIndex>(pool, "fake", "") : nullptr),
        backend(num_blocks, block_size, kVocab),
        scheduler(config, pool, index.get(), {}) {}

  void start(std::vector<EngineRequest> r) {
    requests = std::move(r);
    scheduler.start(requests, 0);
  }
  // Runs one step at time `now`; returns its rows.
  std::vector<Row> step(double now) {
    scheduler.schedule(now, plan);
    std::vector<Row> rows;
    for (const auto& s : scheduler.scheduled()) rows.emplace_back(s.seq->index, s.num_new);
    if (plan.num_seqs() > 0) {
      backend.execute(plan, out);
      scheduler.update(out, now, {});
    }
    history.push_back(rows);
    return rows;
  }
  void run_to_end(double now = 0.0) {
    for (int guard = 0; !scheduler.done(); ++guard) {
      REQUIRE(guard < 10000);
      step(now);
    }
  }
  void check_outputs() {
    for (int i = 0; i < scheduler.num_requests(); ++i) {
      CAPTURE(i);
      const Sequence& s = scheduler.seq(i);
      const std::vector<int32_t> out_ids(s.tokens.begin() + s.prompt_len, s.tokens.end());
      CHECK(out_ids == reference_generate(requests[size_t(i)], kVocab, {}));
    }
  }
  // First step index in which request `i` was scheduled, or -1.
  int first_step_of(int i) const {
    for (size_t k = 0; k < history.size(); ++k) {
      for (const Row& r : history[k]) {
        if (r.first == i) return int(k);
      }
    }
    return -1;
  }

  BlockPool pool;
  std::unique_ptr<PrefixIndex> index;
  FakeBackend backend;
  Scheduler scheduler;
  StepPlan plan;
  StepOutput out;
  std::vector<EngineRequest> requests;
  std::vector<std::vector<Row>> history;
};

EngineRequest request(int prompt_len, int max_tokens, uint64_t seed, double arrival = 0.0) {
  EngineRequest r;
  for (int i = 0; i < prompt_len; ++i) {
    r.prompt.push_back(int32_t(testing::mix(seed, uint64_t(i)) % kVocab));
  }
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.arrival_s = arrival;
  return r;
}

EngineConfig config(SchedulerMode mode, int max_seqs, int max_tokens, bool cache = false) {
  EngineConfig c;
  c.mode = mode;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = max_tokens;
  c.prefix_cache = cache;
  return c;
}

}  // namespace

TEST_CASE("a long prompt is chunked by the token budget and samples only at its end") {
  Harness h(config(SchedulerMode::kOffline, 4, 32), 64, 16);
  h.start({request(100, 2, 1)});
  const std::vector<int> expected_chunks{32, 32, 32, 4};
  for (int chunk : expected_chunks) {
    CHECK(h.step(0.0) == std::vector<Row>{{0, chunk}});
    CHECK(h.plan.do_sample[0] == (chunk == 4 ? 1 : 0));
    CHECK(h.plan.context_lens[0] == h.scheduler.seq(0).num_computed);
  }
  CHECK(h.scheduler.seq(0).num_generated() == 1);
  CHECK(h.step(0.0) == std::vector<Row>{{0, 1}});  // decode
  CHECK(h.plan.is_pure_decode());
  CHECK(h.scheduler.done());
  h.check_outputs();
}

TEST_CASE("max_num_seqs and max_num_batched_tokens hold in every step") {
  Harness h(config(SchedulerMode::kOffline, 3, 20), 256, 8);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 10; ++i) requests.push_back(request(5 + i, 5, uint64_t(i)));
  h.start(requests);
  int max_running = 0;
  while (!h.scheduler.done()) {
    const std::vector<Row> rows = h.step(0.0);
    int tokens = 0;
    for (const Row& r : rows) tokens += r.second;
    CHECK(tokens <= 20);
    CHECK(rows.size() <= 3);
    max_running = std::max(max_running, h.scheduler.num_running());
    CHECK(h.scheduler.num_running() <= 3);
  }
  CHECK(max_running == 3);
  h.check_outputs();
}

TEST_CASE("naive: one request at a time, in file order, whole prompt then one token per step") {
  Harness h(config(SchedulerMode::kNaive, 8, 64), 64, 16);
  h.start({request(10, 3, 1), request(20, 2, 2), request(5, 1, 3)});
  h.run_to_end();
  const std::vector<std::vector<Row>> expected{{{0, 10}}, {{0, 1}}, {{0, 1}},
                                               {{1, 20}}, {{1, 1}}, {{2, 5}}};
  CHECK(h.history == expected);
  h.check_outputs();
}

TEST_CASE("offline is prefill-first; online is decode-first") {
  const std::vector<EngineRequest> requests{request(12, 4, 1), request(12, 4, 2),
                                            request(12, 4, 3)};
  SUBCASE("offline: new prompts take the budget before the running set decodes") {
    Harness h(config(SchedulerMode::kOffline, 8, 16), 64, 4);
    h.start(requests);
    CHECK(h.step(0.0) == std::vector<Row>{{0, 12}, {1, 4}});
    // Request 0 waits to decode while request 1's chunk and the new request 2 fill the budget.
    CHECK(h.step(0.0) == std::vector<Row>{{1, 8}, {2, 8}});
    CHECK(h.step(0.0) == std::vector<Row>{{2, 4}, {0, 1}, {1, 1}});
    CHECK(h.step(0.0) == std::vector<Row>{{0, 1}, {1, 1}, {2, 1}});
    h.run_to_end();
    h.check_outputs();
  }
  SUBCASE("online: running decodes go first, prompt chunks fill the rest") {
    Harness h(config(SchedulerMode::kOnline, 8, 16), 64, 4);
    h.start(requests);
    CHECK(h.step(0.0) == std::vector<Row>{{0, 12}, {1, 4}});
    CHECK(h.step(0.0) == std::vector<Row>{{0, 1}, {1, 8}, {2, 7}});
    CHECK(h.step(0.0) == std::vector<Row>{{0, 1}, {1, 1}, {2, 5}});
    h.run_to_end();
    h.check_outputs();
  }
}

TEST_CASE("online: a request is invisible before its arrival, and arrivals keep their order") {
  Harness h(config(SchedulerMode::kOnline, 8, 64), 64, 16);
  // Out of order in the list: arrival order is 1, 2, 0.
  h.start({request(4, 1, 1, 0.3), request(4, 1, 2, 0.0), request(4, 1, 3, 0.2)});
  CHECK(h.step(0.0) == std::vector<Row>{{1, 4}});
  CHECK(h.step(0.1).empty());
  CHECK(h.scheduler.next_arrival() == doctest::Approx(0.2));
  CHECK(h.step(0.25) == std::vector<Row>{{2, 4}});
  CHECK(h.scheduler.next_arrival() == doctest::Approx(0.3));
  CHECK(h.step(0.3) == std::vector<Row>{{0, 4}});
  CHECK(h.scheduler.done());
  CHECK(h.scheduler.seq(0).result.timeline.first_scheduled == doctest::Approx(0.3));
  CHECK(h.scheduler.seq(0).result.timeline.arrival == doctest::Approx(0.3));
}

TEST_CASE("online: max_concurrency caps the requests in flight") {
  EngineConfig c = config(SchedulerMode::kOnline, 8, 64);
  c.max_concurrency = 2;
  Harness h(c, 64, 4);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(request(4, 3, uint64_t(i)));
  h.start(requests);
  int peak = 0;
  while (!h.scheduler.done()) {
    h.step(0.0);
    peak = std::max(peak, h.scheduler.num_running());
    CHECK(h.scheduler.num_running() <= 2);
  }
  CHECK(peak == 2);
  // Admission order is arrival (file) order.
  for (int i = 1; i < 6; ++i) CHECK(h.first_step_of(i) >= h.first_step_of(i - 1));
  h.check_outputs();
}

TEST_CASE(
    "preemption by recompute: the latest admitted request yields, keeps its tokens and "
    "resumes ahead of the waiting queue") {
  // 6 blocks of 4 tokens; each request needs 5 blocks at its end (8 + 12 - 1 tokens of KV).
  Harness h(config(SchedulerMode::kOnline, 2, 64), 6, 4);
  h.start({request(8, 12, 1), request(8, 12, 2), request(8, 2, 3)});
  CHECK(h.step(0.0) == std::vector<Row>{{0, 8}, {1, 8}});
  int preempted_at = -1;
  int generated_when_preempted = 0;
  for (int k = 1; k < 20 && preempted_at < 0; ++k) {
    h.step(0.0);
    const Sequence& b = h.scheduler.seq(1);
    if (b.status == SeqStatus::kWaiting) {
      preempted_at = k;
      generated_when_preempted = b.num_generated();
      CHECK(b.num_computed == 0);
      CHECK(b.blocks.empty());
      CHECK(generated_when_preempted > 0);
    }
  }
  REQUIRE(preempted_at > 0);
  CHECK(h.scheduler.seq(0).result.preemptions == 0);
  CHECK(h.scheduler.seq(1).result.preemptions == 1);
  CHECK(h.scheduler.num_preemptions() == 1);
  h.run_to_end();
  // Request 1 came back before request 2 was ever admitted, and recomputed its prompt plus the
  // tokens it had generated in one chunk.
  int resumed_at = -1;
  for (size_t k = size_t(preempted_at) + 1; k < h.history.size() && resumed_at < 0; ++k) {
    for (const Row& r : h.history[k]) {
      if (r.first == 1) {
        resumed_at = int(k);
        CHECK(r.second == 8 + generated_when_preempted);
      }
    }
  }
  REQUIRE(resumed_at > 0);
  CHECK(h.first_step_of(2) >= resumed_at);
  if (h.first_step_of(2) == resumed_at) {
    const std::vector<Row>& rows = h.history[size_t(resumed_at)];
    const auto row_of = [&](int i) {
      return std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.first == i; });
    };
    CHECK(row_of(1) < row_of(2));
  }
  h.check_outputs();
  CHECK(h.pool.num_used() == 0);
}

TEST_CASE("identical prompts admitted in one step prefill once") {
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    Harness h(config(SchedulerMode::kOffline, 8, 256, cache), 64, 16);
    const EngineRequest r = request(33, 3, 7);
    h.start({r, r, r});
    if (cache) {
      // The first registers its two full blocks when scheduled; the others hit them in the same
      // step and compute only the last token, reading KV this same forward writes.
      CHECK(h.step(0.0) == std::vector<Row>{{0, 33}, {1, 1}, {2, 1}});
      CHECK(h.scheduler.seq(1).result.cached_prompt_tokens == 32);
      CHECK(h.scheduler.seq(1).blocks[0] == h.scheduler.seq(0).blocks[0]);
      CHECK(h.pool.ref_count(h.scheduler.seq(0).blocks[1]) == 3);
    } else {
      CHECK(h.step(0.0) == std::vector<Row>{{0, 33}, {1, 33}, {2, 33}});
    }
    h.run_to_end();
    h.check_outputs();
    CHECK(h.scheduler.seq(2).tokens == h.scheduler.seq(0).tokens);
  }
}

TEST_CASE("a chunked prompt shares only the blocks already scheduled") {
  // Budget 20: request 0 takes the whole budget in steps 1 and 2, so request 1 is admitted in
  // step 3, hits the two full blocks request 0 registered and computes the last 8 tokens.
  Harness h(config(SchedulerMode::kOffline, 8, 20, true), 64, 16);
  const EngineRequest r = request(40, 2, 9);
  h.start({r, r});
  CHECK(h.step(0.0) == std::vector<Row>{{0, 20}});
  CHECK(h.step(0.0) == std::vector<Row>{{0, 20}});
  CHECK(h.step(0.0) == std::vector<Row>{{1, 8}, {0, 1}});  // 32 cached, 8 left
  h.run_to_end();
  h.check_outputs();
}
