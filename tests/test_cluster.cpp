// Cluster: a 1-replica cluster gives the plain engine's results (outputs, cache and step counts,
// and on the sim backend the very same times); 3 replicas under every router produce the engine
// tests' reference outputs with a consistent per-replica breakdown; on prefix groups larger than
// one replica's cache, prefix routing delivers more hits than round robin; a failing replica fails
// the run naming it. Replicas advancing at the same time (ClusterConfig::concurrent) give the very
// results and callback order of replicas advancing in turn, and do step at the same time.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/sim_backend.h"
#include "engine/cluster/cluster.h"
#include "engine/common/error.h"
#include "engine/io/workloads.h"
#include "engine/model/presets.h"
#include "engine/scheduler/engine.h"
#include "tests/fake_backend.h"
#include "tests/mixed_workload.h"

using namespace rose;
using rose::testing::FakeBackend;
using rose::testing::reference_generate;

namespace {

constexpr int kVocab = testing::kMixedVocab;
using testing::make_tokens;
using testing::mixed_requests;

EngineConfig config_for(SchedulerMode mode) {
  EngineConfig c;
  c.mode = mode;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  return c;
}

ClusterConfig cluster_config(SchedulerMode mode, const std::string& router) {
  ClusterConfig c;
  c.engine = config_for(mode);
  c.model_id = "fake";
  c.router = router;
  c.prefix.chunk_tokens = 4;
  c.prefix.exploration = 0;
  return c;
}

// A fake backend whose execute() throws from its `fail_at`-th step on.
class FailingBackend : public FakeBackend {
 public:
  FailingBackend(int fail_at) : FakeBackend(64, 4, kVocab), fail_at_(fail_at) {}
  void execute(const StepPlan& plan, StepOutput& out) override {
    if (++steps_ >= fail_at_) throw Error("device lost");
    FakeBackend::execute(plan, out);
  }

 private:
  int fail_at_;
  int steps_ = 0;
};

std::vector<EngineRequest> prefix_group_requests(
    const std::string& spec = "prefix-groups:8:8:64:8") {
  WorkloadOptions o;
  o.name = spec;
  o.vocab_size = kVocab;
  o.random_output_len = 4;
  std::vector<EngineRequest> requests;
  for (const RequestSpec& spec : make_workload(o, nullptr)) {
    EngineRequest r;
    r.prompt = *spec.prompt_token_ids;
    r.max_tokens = *spec.max_tokens;
    r.ignore_eos = true;
    requests.push_back(r);
  }
  return requests;
}

}  // namespace

TEST_CASE("a 1-replica cluster gives the plain engine's results") {
  const std::vector<EngineRequest> requests = mixed_requests();
  for (SchedulerMode mode : {SchedulerMode::kOffline, SchedulerMode::kOnline}) {
    CAPTURE(mode_name(mode));
    FakeBackend plain_backend(64, 4, kVocab), replica_backend(64, 4, kVocab);
    Engine engine(plain_backend, config_for(mode), "fake");
    testing::FakeClock clock;
    const RunResult plain = engine.run(requests, {}, &clock);
    Cluster cluster({{&replica_backend, nullptr}}, cluster_config(mode, "round_robin"));
    const RunResult one = cluster.run(requests);
    REQUIRE(one.requests.size() == plain.requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      CAPTURE(i);
      CHECK(one.requests[i].output_ids == plain.requests[i].output_ids);
      CHECK(one.requests[i].cached_prompt_tokens == plain.requests[i].cached_prompt_tokens);
    }
    CHECK(one.cache.hit_tokens == plain.cache.hit_tokens);
    CHECK(one.steps.steps == plain.steps.steps);
    CHECK(one.kv.peak_used_blocks == plain.kv.peak_used_blocks);
    REQUIRE(one.per_replica.size() == 1);
    CHECK(one.per_replica[0].requests == int(requests.size()));
    CHECK(one.routing.request_imbalance == doctest::Approx(1.0));
  }
}

TEST_CASE("on the sim backend a 1-replica cluster has the plain engine's very times") {
  ModelConfig model = *preset_config("tiny");
  model.vocab_size = kVocab;
  BackendOptions options;
  options.num_kv_blocks = 64;
  options.block_size = 4;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 64;
  const StepTimeModel step_time{0.001, 1e-5, 1e-4, 1e-7, "test"};
  SimClock plain_clock, replica_clock;
  auto plain_backend = make_sim_backend(model, options, step_time, plain_clock);
  auto replica_backend = make_sim_backend(model, options, step_time, replica_clock);
  const std::vector<EngineRequest> requests = mixed_requests();
  Engine engine(*plain_backend, config_for(SchedulerMode::kOnline), "tiny");
  const RunResult plain = engine.run(requests, {}, &plain_clock);
  ClusterConfig config = cluster_config(SchedulerMode::kOnline, "least_loaded");
  config.model_id = "tiny";
  Cluster cluster({{replica_backend.get(), &replica_clock}}, config);
  const RunResult one = cluster.run(requests);
  CHECK(one.duration_s == doctest::Approx(plain.duration_s).epsilon(1e-12));
  for (size_t i = 0; i < requests.size(); ++i) {
    CAPTURE(i);
    CHECK(one.requests[i].output_ids == plain.requests[i].output_ids);
    CHECK(one.requests[i].timeline.token_times == plain.requests[i].timeline.token_times);
  }
  CHECK(one.per_replica[0].busy_s > 0);
  // One replica's series is the plain engine's, sample for sample.
  CHECK(one.step_series.time == plain.step_series.time);
  CHECK(one.step_series.kv_used_blocks == plain.step_series.kv_used_blocks);
  CHECK(one.step_series.waiting == plain.step_series.waiting);
}

TEST_CASE("3 replicas under every router produce the reference outputs") {
  const std::vector<EngineRequest> requests = mixed_requests();
  for (const std::string& router : route_policy_names()) {
    for (SchedulerMode mode : {SchedulerMode::kOffline, SchedulerMode::kOnline}) {
      CAPTURE(router);
      CAPTURE(mode_name(mode));
      std::vector<std::unique_ptr<FakeBackend>> backends;
      std::vector<ClusterReplica> replicas;
      for (int r = 0; r < 3; ++r) {
        backends.push_back(std::make_unique<FakeBackend>(64, 4, kVocab));
        replicas.push_back({backends.back().get(), nullptr});
      }
      Cluster cluster(replicas, cluster_config(mode, router));
      int finished = 0;
      RunCallbacks callbacks;
      callbacks.on_finish = [&](int, const rose::RequestResult&) { ++finished; };
      const RunResult result = cluster.run(requests, callbacks);
      REQUIRE(result.requests.size() == requests.size());
      for (size_t i = 0; i < requests.size(); ++i) {
        CAPTURE(i);
        CHECK(result.requests[i].output_ids == reference_generate(requests[i], kVocab, {}));
      }
      CHECK(finished == int(requests.size()));
      REQUIRE(result.per_replica.size() == 3);
      int placed = 0;
      for (const ReplicaStats& r : result.per_replica) placed += r.requests;
      CHECK(placed == int(requests.size()));
      // The merged series has every replica's steps, in time order, and ends with nothing held.
      const StepSeries& series = result.step_series;
      CHECK(int64_t(series.time.size()) == result.steps.steps);
      CHECK(std::is_sorted(series.time.begin(), series.time.end()));
      REQUIRE(!series.running.empty());
      CHECK(series.running.back() == 0);
      CHECK(series.waiting.back() == 0);
      CHECK(result.routing.request_imbalance >= 1.0);
      if (router == "round_robin") {
        CHECK(result.per_replica[0].requests == 9);
        CHECK(result.per_replica[2].requests == 8);
        CHECK(result.routing.predicted_hit_tokens == 0);
      }
    }
  }
}

TEST_CASE("prefix groups larger than one replica's cache: prefix routing beats round robin") {
  const std::vector<EngineRequest> requests = prefix_group_requests();
  ModelConfig model = *preset_config("tiny");
  model.vocab_size = kVocab;
  std::map<std::string, double> delivered;
  for (const std::string router : {"round_robin", "prefix", "precise"}) {
    BackendOptions options;
    options.num_kv_blocks = 48;  // 192 tokens: about two groups' 64-token prefixes and the batch
    options.block_size = 4;
    options.max_num_seqs = 4;
    options.max_num_batched_tokens = 128;
    std::vector<std::unique_ptr<SimClock>> clocks;
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<ClusterReplica> replicas;
    for (int r = 0; r < 4; ++r) {
      clocks.push_back(std::make_unique<SimClock>());
      backends.push_back(make_sim_backend(model, options, StepTimeModel{0.001, 1e-5, 1e-4, 0, ""},
                                          *clocks.back()));
      replicas.push_back({backends.back().get(), clocks.back().get()});
    }
    ClusterConfig config = cluster_config(SchedulerMode::kOffline, router);
    config.engine.max_num_seqs = 4;
    config.engine.max_num_batched_tokens = 128;
    config.model_id = "tiny";
    Cluster cluster(replicas, config);
    const RunResult result = cluster.run(requests);
    delivered[router] = double(result.routing.delivered_hit_tokens) / result.routing.prompt_tokens;
  }
  CHECK(delivered["prefix"] >= 1.5 * delivered["round_robin"]);
  CHECK(delivered["precise"] >= delivered["round_robin"]);
}

TEST_CASE("an offline burst: prefix routing sees its own placements, not idle replicas") {
  // 256 requests at t=0 (32 groups of 8, a 32-token prefix and 8 tokens of their own) on 8
  // replicas whose caches hold every group. The replicas take nothing in until they step, so only
  // what the router itself placed tells a loaded replica from an idle one.
  const std::vector<EngineRequest> requests = prefix_group_requests("prefix-groups:32:8:32:8");
  for (const std::string router : {"prefix", "precise", "least_loaded"}) {
    CAPTURE(router);
    std::vector<std::unique_ptr<FakeBackend>> backends;
    std::vector<ClusterReplica> replicas;
    for (int r = 0; r < 8; ++r) {
      backends.push_back(std::make_unique<FakeBackend>(256, 4, kVocab));
      replicas.push_back({backends.back().get(), nullptr});
    }
    Cluster cluster(replicas, cluster_config(SchedulerMode::kOffline, router));
    const RunResult result = cluster.run(requests);
    const RoutingStats& routing = result.routing;
    if (router == "least_loaded") {
      CHECK(routing.request_imbalance == doctest::Approx(1.0));
      continue;
    }
    // Blind to its own placements the router read every replica as idle: groups went where the
    // tie-break rotation happened to point, 48 requests on one replica and 16 on another (1.5).
    // The guard's bound: no replica past 1.25x the mean queue, and every replica's queue is all
    // it will get.
    CHECK(routing.request_imbalance <= 1.25);
    CHECK(routing.delivered_hit_tokens >= 0.95 * double(routing.available_hit_tokens));
  }
}

TEST_CASE("a replica that fails fails the run, naming it") {
  FakeBackend a(64, 4, kVocab), c(64, 4, kVocab);
  FailingBackend b(3);
  Cluster cluster({{&a, nullptr}, {&b, nullptr}, {&c, nullptr}},
                  cluster_config(SchedulerMode::kOffline, "round_robin"));
  CHECK_THROWS_WITH_AS(cluster.run(mixed_requests()),
                       doctest::Contains("replica 1 of 3 failed: device lost"), Error);
  ClusterConfig bad = cluster_config(SchedulerMode::kOffline, "random");
  CHECK_THROWS_WITH_AS(Cluster({{&a, nullptr}}, bad), doctest::Contains("unknown"), Error);
}

TEST_CASE("no sharing: preempted requests re-hitting their own blocks are not delivered reuse") {
  // 12 prompts of 24 distinct tokens on 2 replicas of 12 blocks of 4 (48 tokens): recompute
  // preemption re-admits requests whose own blocks are still cached.
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 12; ++i) {
    EngineRequest q;
    for (int t = 0; t < 24; ++t) q.prompt.push_back(int32_t((i * 24 + t) % kVocab));
    q.max_tokens = 12;
    q.ignore_eos = true;
    requests.push_back(q);
  }
  FakeBackend a(12, 4, kVocab), b(12, 4, kVocab);
  Cluster cluster({{&a, nullptr}, {&b, nullptr}},
                  cluster_config(SchedulerMode::kOffline, "round_robin"));
  const RunResult result = cluster.run(requests);
  REQUIRE(result.kv.preemptions > 0);
  CHECK(result.cache.hit_tokens > 0);  // the engine did serve cached blocks...
  CHECK(result.routing.available_hit_tokens == 0);
  CHECK(result.routing.delivered_hit_tokens == 0);  // ...but none that another request left
  for (size_t i = 0; i < requests.size(); ++i) {
    CHECK(result.requests[i].output_ids == reference_generate(requests[i], kVocab, {}));
  }
}

namespace {

// A sim cluster of `n` replicas (each with its clock and backend), small enough for the prefix
// groups to compete for the caches.
struct SimCluster {
  std::vector<std::unique_ptr<SimClock>> clocks;
  std::vector<std::unique_ptr<Backend>> backends;
  std::unique_ptr<Cluster> cluster;

  SimCluster(int n, SchedulerMode mode, const std::string& router, bool concurrent) {
    ModelConfig model = *preset_config("tiny");
    model.vocab_size = kVocab;
    BackendOptions options;
    options.num_kv_blocks = 48;
    options.block_size = 4;
    options.max_num_seqs = 4;
    options.max_num_batched_tokens = 64;
    std::vector<ClusterReplica> replicas;
    for (int r = 0; r < n; ++r) {
      clocks.push_back(std::make_unique<SimClock>());
      backends.push_back(make_sim_backend(
          model, options, StepTimeModel{0.001, 1e-5, 1e-4, 1e-7, ""}, *clocks.back()));
      replicas.push_back({backends.back().get(), clocks.back().get()});
    }
    ClusterConfig config = cluster_config(mode, router);
    config.engine.max_num_seqs = 4;
    config.engine.max_num_batched_tokens = 64;
    config.model_id = "tiny";
    config.concurrent = concurrent;
    cluster = std::make_unique<Cluster>(replicas, config);
  }
};

// Prefix groups and the mixed requests, arriving over time (every fifth at once with the one
// before it), so that replicas are busy past arrivals and arrivals tie.
std::vector<EngineRequest> arriving_requests() {
  std::vector<EngineRequest> requests = prefix_group_requests();
  const std::vector<EngineRequest> mixed = mixed_requests();
  requests.insert(requests.end(), mixed.begin(), mixed.end());
  double t = 0;
  uint64_t x = 7;
  for (size_t i = 0; i < requests.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (i % 5 != 0) t += double(x >> 40) / double(1 << 24) * 0.005;  // 0 to 5 ms apart
    requests[i].arrival_s = t;
  }
  return requests;
}

// Every callback, in the order it came: "T index token" or "F index finish-time".
struct CallbackLog {
  std::vector<std::string> lines;
  RunCallbacks callbacks() {
    RunCallbacks c;
    c.on_token = [this](int i, int32_t token) {
      lines.push_back(fmt::format("T {} {}", i, token));
    };
    c.on_finish = [this](int i, const RequestResult& r) {
      lines.push_back(fmt::format("F {} {}", i, r.timeline.finish));
    };
    return c;
  }
};

void check_same_results(const RunResult& a, const RunResult& b) {
  REQUIRE(a.requests.size() == b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    CAPTURE(i);
    const RequestResult &x = a.requests[i], &y = b.requests[i];
    CHECK(x.output_ids == y.output_ids);
    CHECK(x.timeline.token_times == y.timeline.token_times);  // bit for bit: virtual clocks
    CHECK(x.timeline.arrival == y.timeline.arrival);
    CHECK(x.timeline.first_scheduled == y.timeline.first_scheduled);
    CHECK(x.timeline.finish == y.timeline.finish);
    CHECK(x.cached_prompt_tokens == y.cached_prompt_tokens);
    CHECK(x.first_cached_prompt_tokens == y.first_cached_prompt_tokens);
  }
  REQUIRE(a.per_replica.size() == b.per_replica.size());
  for (size_t r = 0; r < a.per_replica.size(); ++r) {
    CAPTURE(r);
    CHECK(a.per_replica[r].requests == b.per_replica[r].requests);
    CHECK(a.per_replica[r].output_tokens == b.per_replica[r].output_tokens);
    CHECK(a.per_replica[r].busy_s == b.per_replica[r].busy_s);
    CHECK(a.per_replica[r].kv_peak_used_blocks == b.per_replica[r].kv_peak_used_blocks);
  }
  CHECK(a.routing.predicted_hit_tokens == b.routing.predicted_hit_tokens);
  CHECK(a.routing.delivered_hit_tokens == b.routing.delivered_hit_tokens);
  CHECK(a.routing.available_hit_tokens == b.routing.available_hit_tokens);
  CHECK(a.duration_s == b.duration_s);
  CHECK(a.steps.steps == b.steps.steps);
  CHECK(a.step_series.time == b.step_series.time);
  CHECK(a.step_series.kv_used_blocks == b.step_series.kv_used_blocks);
  CHECK(a.step_series.running == b.step_series.running);
}

// FakeBackend whose steps take `step_ms` of wall time, counting how many replicas are inside a
// step at once.
class SlowBackend : public FakeBackend {
 public:
  SlowBackend(std::atomic<int>& inside, std::atomic<int>& most_inside)
      : FakeBackend(64, 4, kVocab), inside_(inside), most_inside_(most_inside) {}
  void execute(const StepPlan& plan, StepOutput& out) override {
    const int now_inside = ++inside_;
    int most = most_inside_.load();
    while (now_inside > most && !most_inside_.compare_exchange_weak(most, now_inside)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    FakeBackend::execute(plan, out);
    --inside_;
  }

 private:
  std::atomic<int>& inside_;
  std::atomic<int>& most_inside_;
};

}  // namespace

TEST_CASE("sim clusters of 3 to 8 replicas: the same results advancing at once or in turn") {
  const std::vector<EngineRequest> requests = arriving_requests();
  for (const std::string& router : route_policy_names()) {
    for (SchedulerMode mode : {SchedulerMode::kOffline, SchedulerMode::kOnline}) {
      for (int n : {3, 5, 8}) {
        CAPTURE(router);
        CAPTURE(mode_name(mode));
        CAPTURE(n);
        SimCluster in_turn(n, mode, router, false), at_once(n, mode, router, true);
        CallbackLog in_turn_log, at_once_log;
        const RunResult a = in_turn.cluster->run(requests, in_turn_log.callbacks());
        const RunResult b = at_once.cluster->run(requests, at_once_log.callbacks());
        check_same_results(a, b);
        CHECK(in_turn_log.lines == at_once_log.lines);
        // Again on the same replicas (their threads kept), from cold caches: the same run.
        at_once.cluster->reset_prefix_cache();
        CallbackLog again_log;
        const RunResult c = at_once.cluster->run(requests, again_log.callbacks());
        check_same_results(b, c);
        CHECK(again_log.lines == at_once_log.lines);
        int busy_replicas = 0;
        for (const ReplicaStats& s : b.per_replica) busy_replicas += s.requests > 0;
        CHECK(busy_replicas >= 3);
      }
    }
  }
}

TEST_CASE("callbacks: each token once, in order, before its request's one on_finish") {
  const std::vector<EngineRequest> requests = arriving_requests();
  for (bool concurrent : {false, true}) {
    CAPTURE(concurrent);
    SimCluster sim(5, SchedulerMode::kOnline, "prefix", concurrent);
    std::vector<std::vector<int32_t>> streamed(requests.size());
    std::vector<int> finished(requests.size(), 0);
    bool after_finish = false;
    RunCallbacks callbacks;
    callbacks.on_token = [&](int i, int32_t token) {
      after_finish |= finished[size_t(i)] > 0;
      streamed[size_t(i)].push_back(token);
    };
    callbacks.on_finish = [&](int i, const RequestResult& r) {
      ++finished[size_t(i)];
      CHECK(r.output_ids == streamed[size_t(i)]);
    };
    const RunResult result = sim.cluster->run(requests, callbacks);
    CHECK_FALSE(after_finish);
    for (size_t i = 0; i < requests.size(); ++i) {
      CAPTURE(i);
      CHECK(finished[i] == 1);
      CHECK(streamed[i] == result.requests[i].output_ids);
    }
  }
}

TEST_CASE("a replica that fails while the others advance at once fails the run, naming it") {
  for (SchedulerMode mode : {SchedulerMode::kOffline, SchedulerMode::kOnline}) {
    CAPTURE(mode_name(mode));
    FakeBackend a(64, 4, kVocab), c(64, 4, kVocab);
    FailingBackend b(3);
    ClusterConfig config = cluster_config(mode, "round_robin");
    config.concurrent = true;
    Cluster cluster({{&a, nullptr}, {&b, nullptr}, {&c, nullptr}}, config);
    int finished = 0;
    RunCallbacks callbacks;
    callbacks.on_finish = [&](int, const RequestResult&) { ++finished; };
    CHECK_THROWS_WITH_AS(cluster.run(mixed_requests(), callbacks),
                         doctest::Contains("replica 1 of 3 failed: device lost"), Error);
    CHECK(finished < int(mixed_requests().size()));  // the run stopped
  }
  // Two fail: the lower number is named.
  FakeBackend c(64, 4, kVocab);
  FailingBackend a(2), b(2);
  ClusterConfig config = cluster_config(SchedulerMode::kOffline, "round_robin");
  config.concurrent = true;
  Cluster cluster({{&c, nullptr}, {&a, nullptr}, {&b, nullptr}}, config);
  CHECK_THROWS_WITH_AS(cluster.run(mixed_requests()),
                       doctest::Contains("replica 1 of 3 failed: device lost"), Error);
}

TEST_CASE("replicas advancing at once step at the same time; in turn, one at a time") {
  // Overlap is seen, not timed: a counter of the replicas inside a step. Each step sleeps 5 ms,
  // and each replica takes some 20 steps, so two threads are inside together at some point.
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 4; ++i) {
    EngineRequest q;
    q.prompt = make_tokens(8, i);
    q.max_tokens = 16;
    q.ignore_eos = true;
    requests.push_back(q);
  }
  for (bool concurrent : {false, true}) {
    CAPTURE(concurrent);
    std::atomic<int> inside{0}, most_inside{0};
    SlowBackend a(inside, most_inside), b(inside, most_inside);
    ClusterConfig config = cluster_config(SchedulerMode::kOffline, "round_robin");
    config.concurrent = concurrent;
    Cluster cluster({{&a, nullptr}, {&b, nullptr}}, config);
    const RunResult result = cluster.run(requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      CHECK(result.requests[i].output_ids == reference_generate(requests[i], kVocab, {}));
    }
    CHECK(most_inside.load() == (concurrent ? 2 : 1));
  }
}
