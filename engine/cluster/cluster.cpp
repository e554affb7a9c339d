#include "engine/cluster/cluster.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <utility>

#include "engine/cluster/routed_load.h"
#include "engine/common/error.h"

namespace rose {
namespace {

struct Replica {
  std::unique_ptr<ReplicaHandle> handle;
  std::vector<int> inputs;  // add order -> input index
};

double max_over_mean(const std::vector<double>& values) {
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  return mean > 0 ? *std::max_element(values.begin(), values.end()) / mean : 0.0;
}

// Sums a replica's counters into the cluster's. The KV peak is the sum of the replicas' peaks (an
// upper bound: they need not coincide).
void add_run_stats(RunResult& into, const RunResult& part) {
  into.cache.lookups += part.cache.lookups;
  into.cache.queried_tokens += part.cache.queried_tokens;
  into.cache.hit_tokens += part.cache.hit_tokens;
  into.cache.evictions += part.cache.evictions;
  into.kv.block_size = part.kv.block_size;
  into.kv.total_blocks += part.kv.total_blocks;
  into.kv.peak_used_blocks += part.kv.peak_used_blocks;
  into.kv.preemptions += part.kv.preemptions;
  StepStats& s = into.steps;
  const StepStats& p = part.steps;
  s.steps += p.steps;
  s.prefill_tokens += p.prefill_tokens;
  s.decode_tokens += p.decode_tokens;
  s.decode_steps += p.decode_steps;
  s.decode_step_tokens += p.decode_step_tokens;
  s.decode_time_s += p.decode_time_s;
  s.execute_time_s += p.execute_time_s;
  s.schedule_time_s += p.schedule_time_s;
  s.decode_bytes += p.decode_bytes;
  s.steps_ahead += p.steps_ahead;
}

// The cluster's KV and queue series for the report: every replica's samples on one time axis, each
// point the sum over replicas of their latest sample at that time (replica clocks share an origin).
StepSeries merge_step_series(const std::vector<StepSeries>& parts) {
  struct Sample {
    double time;
    size_t replica, k;
  };
  std::vector<Sample> samples;
  for (size_t r = 0; r < parts.size(); ++r) {
    for (size_t k = 0; k < parts[r].time.size(); ++k) samples.push_back({parts[r].time[k], r, k});
  }
  std::stable_sort(samples.begin(), samples.end(),
                   [](const Sample& a, const Sample& b) { return a.time < b.time; });
  std::vector<int> kv(parts.size()), running(parts.size()), waiting(parts.size());
  int kv_sum = 0, running_sum = 0, waiting_sum = 0;
  StepSeries merged;
  for (const Sample& s : samples) {
    const StepSeries& part = parts[s.replica];
    kv_sum += part.kv_used_blocks[s.k] - std::exchange(kv[s.replica], part.kv_used_blocks[s.k]);
    running_sum += part.running[s.k] - std::exchange(running[s.replica], part.running[s.k]);
    waiting_sum += part.waiting[s.k] - std::exchange(waiting[s.replica], part.waiting[s.k]);
    merged.time.push_back(s.time);
    merged.kv_used_blocks.push_back(kv_sum);
    merged.running.push_back(running_sum);
    merged.waiting.push_back(waiting_sum);
  }
  return merged;
}

}  // namespace

struct Cluster::Impl {
  ClusterConfig config;
  std::vector<Replica> replicas;
  std::unique_ptr<RoutePolicy> policy;
  // precise with only the prefix term and no guard: the longest prefix cached anywhere, for the
  // "available" hit rate. Null without a prefix cache.
  std::unique_ptr<RoutePolicy> probe;
  RoutingStats routing;
  RoutedLoad routed{0};               // what the router placed and the replicas have not taken in
  std::vector<ReplicaEvents> events;  // per replica: what its last advance raised

  void make_policies();
  std::vector<ReplicaLoad> loads() const;
  void advance(double until, const RunCallbacks& callbacks);
  void deliver(const RunCallbacks& callbacks);
  void route(const EngineRequest& request, int input, double now);
  RunResult merge(const std::vector<EngineRequest>& requests);
};

void Cluster::Impl::make_policies() {
  const std::string& name = config.router;
  const bool cached = config.engine.prefix_cache;
  PreciseRouterOptions precise;
  precise.model_id = config.model_id;
  precise.cache_salt = config.engine.cache_salt;
  precise.block_size = replicas[0].handle->shape().block_size;
  precise.guard = config.prefix.guard;  // one load guard for both prefix policies
  for (Replica& r : replicas) {
    ReplicaHandle* handle = r.handle.get();
    precise.replicas.push_back(
        [handle](std::span<const int32_t> prompt) { return handle->cached_prefix_blocks(prompt); });
  }
  if (name == "round_robin") {
    policy = make_round_robin_policy();
  } else if (name == "least_loaded") {
    policy = make_least_loaded_policy();
  } else if (name == "prefix") {
    PrefixRouterOptions o = config.prefix;
    o.model_id = config.model_id;
    o.capacity_chunks.clear();
    for (const Replica& r : replicas) {
      const ReplicaShape shape = r.handle->shape();
      const int64_t tokens = int64_t(shape.num_kv_blocks) * shape.block_size;
      o.capacity_chunks.push_back(std::max<int64_t>(1, tokens / o.chunk_tokens));
    }
    policy = make_prefix_policy(o);
  } else if (name == "precise") {
    if (!cached) fail("--router precise needs the prefix cache (it asks the replicas' indexes)");
    policy = make_precise_policy(precise);
  } else {
    check_route_policy_name(name);
  }
  probe.reset();
  if (cached) {
    precise.weights = {0.0, 0.0, 1.0};
    precise.guard = {.queue_threshold = INT_MAX, .queue_load_factor = 0, .kv_threshold = 2.0};
    probe = make_precise_policy(precise);
  }
}

std::vector<ReplicaLoad> Cluster::Impl::loads() const {
  std::vector<ReplicaLoad> out;
  for (const Replica& r : replicas) {
    const ReplicaState& s = r.handle->state();
    out.push_back({s.waiting, s.running, s.kv_used_blocks, r.handle->shape().num_kv_blocks});
  }
  routed.fill(out);
  return out;
}

void Cluster::Impl::route(const EngineRequest& request, int input, double now) {
  const std::vector<ReplicaLoad> load = loads();
  const RouteQuery query{input, request.prompt, now};
  const RouteChoice choice = policy->pick(query, load);
  ROSE_ASSERT(choice.replica >= 0 && choice.replica < int(replicas.size()));
  if (probe) {
    routing.available_hit_tokens += probe->pick(query, load).predicted_hit_tokens;
    probe->on_routed(query, choice.replica);
  }
  policy->on_routed(query, choice.replica);
  routed.on_routed(choice.replica);
  routing.predicted_hit_tokens += choice.predicted_hit_tokens;
  routing.prompt_tokens += int64_t(request.prompt.size());
  Replica& replica = replicas[size_t(choice.replica)];
  replica.handle->add(request, input, now);
  replica.inputs.push_back(input);
}

namespace {

std::vector<std::unique_ptr<ReplicaHandle>> local_replicas(
    const std::vector<ClusterReplica>& replicas, const ClusterConfig& config) {
  std::vector<std::unique_ptr<ReplicaHandle>> handles;
  for (size_t r = 0; r < replicas.size(); ++r) {
    handles.push_back(make_local_replica(*replicas[r].backend, replicas[r].sim_clock, config.engine,
                                         config.model_id, config.stop_tokenizer, int(r),
                                         int(replicas.size()), config.concurrent));
  }
  return handles;
}

}  // namespace

Cluster::Cluster(const std::vector<ClusterReplica>& replicas, const ClusterConfig& config)
    : Cluster(local_replicas(replicas, config), config) {}

Cluster::Cluster(std::vector<std::unique_ptr<ReplicaHandle>> replicas, const ClusterConfig& config)
    : impl_(std::make_unique<Impl>()) {
  if (replicas.empty()) fail("--data-parallel must be at least 1");
  check_route_policy_name(config.router);
  impl_->config = config;
  for (auto& handle : replicas) impl_->replicas.push_back({std::move(handle), {}});
  impl_->make_policies();
}

Cluster::~Cluster() = default;

int Cluster::num_replicas() const { return int(impl_->replicas.size()); }

void Cluster::reset_prefix_cache() {
  for (Replica& r : impl_->replicas) r.handle->reset_prefix_cache();
  impl_->make_policies();  // the router's picture of the caches goes with them
}

// Every replica with work before `until` advances to it: all at once (config.concurrent: each is
// told first, then awaited), or one after the other. Then their callbacks, in the order the
// one-at-a-time loop raised them (cluster.h).
void Cluster::Impl::advance(double until, const RunCallbacks& callbacks) {
  std::vector<size_t> behind;
  for (size_t r = 0; r < replicas.size(); ++r) {
    const ReplicaState& state = replicas[r].handle->state();
    if (!state.done && state.now < until) behind.push_back(r);
  }
  if (behind.empty()) return;
  for (size_t r : behind) events[r].clear();
  if (!config.concurrent) {
    for (size_t r : behind) {
      replicas[r].handle->begin_advance(until);
      replicas[r].handle->end_advance(events[r]);
    }
  } else {
    // Every advance begun is awaited, also after a failure: a replica's thread must be idle, and a
    // remote one's reply read, before the next call. The first failure (by replica number, or
    // one to begin) fails the run.
    std::exception_ptr error;
    size_t begun = 0;
    try {
      for (; begun < behind.size(); ++begun) replicas[behind[begun]].handle->begin_advance(until);
    } catch (...) {
      error = std::current_exception();
    }
    for (size_t k = 0; k < begun; ++k) {
      try {
        replicas[behind[k]].handle->end_advance(events[behind[k]]);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  }
  deliver(callbacks);
}

// The one-at-a-time loop always stepped the busy replica furthest behind (the lower number on a
// tie), so its callbacks came in the order of (step start, replica), each replica's in the order
// it raised them: a merge of the replicas' event lists by that key.
void Cluster::Impl::deliver(const RunCallbacks& callbacks) {
  struct Key {
    double step_start;
    size_t replica, k;
  };
  std::vector<Key> order;
  for (size_t r = 0; r < events.size(); ++r) {
    for (size_t k = 0; k < events[r].events.size(); ++k) {
      order.push_back({events[r].events[k].step_start, r, k});
    }
  }
  std::stable_sort(order.begin(), order.end(), [](const Key& a, const Key& b) {
    return a.step_start < b.step_start || (a.step_start == b.step_start && a.replica < b.replica);
  });
  for (const Key& key : order) {
    const ReplicaEvent& e = events[key.replica].events[key.k];
    if (e.result < 0) {
      if (callbacks.on_token) callbacks.on_token(e.index, e.token);
      continue;
    }
    routed.on_finished(int(key.replica));
    policy->on_finished(e.index, int(key.replica));
    if (probe) probe->on_finished(e.index, int(key.replica));
    if (callbacks.on_finish) {
      callbacks.on_finish(e.index, events[key.replica].results[size_t(e.result)]);
    }
  }
  for (ReplicaEvents& e : events) e.clear();
}

RunResult Cluster::run(const std::vector<EngineRequest>& requests, const RunCallbacks& callbacks,
                       Clock* /*clock*/) {
  Impl& m = *impl_;
  m.routing = {};
  m.routed = RoutedLoad(int(m.replicas.size()));
  m.events.assign(m.replicas.size(), {});
  for (Replica& replica : m.replicas) {
    replica.inputs.clear();
    replica.handle->start(bool(callbacks.on_token));
  }
  // As the scheduler: only online mode replays arrivals; otherwise everything arrives at 0.
  const bool online = m.config.engine.mode == SchedulerMode::kOnline;
  auto arrival_of = [&](int i) { return online ? requests[size_t(i)].arrival_s : 0.0; };
  std::vector<int> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return arrival_of(a) < arrival_of(b); });
  // Between two arrivals the replicas do not see each other: each advances to the next arrival on
  // its own, then the router reads their states and places the request.
  for (int input : order) {
    const double arrival = arrival_of(input);
    m.advance(arrival, callbacks);
    m.route(requests[size_t(input)], input, arrival);
  }
  m.advance(std::numeric_limits<double>::infinity(), callbacks);
  return m.merge(requests);
}

RunResult Cluster::Impl::merge(const std::vector<EngineRequest>& requests) {
  RunResult merged;
  merged.requests.resize(requests.size());
  std::vector<double> request_counts, token_counts;
  double first_arrival = std::numeric_limits<double>::infinity(), last_finish = 0;
  std::vector<StepSeries> series;
  for (Replica& replica : replicas) {
    double busy_s = 0;
    RunResult part = replica.handle->finish(&busy_s);
    series.push_back(std::move(part.step_series));
    ReplicaStats stats;
    stats.requests = int(replica.inputs.size());
    for (size_t k = 0; k < replica.inputs.size(); ++k) {
      RequestResult& result = part.requests[k];
      stats.prompt_tokens += int64_t(requests[size_t(replica.inputs[k])].prompt.size());
      stats.output_tokens += int64_t(result.output_ids.size());
      routing.delivered_hit_tokens += result.first_cached_prompt_tokens;
      first_arrival = std::min(first_arrival, result.timeline.arrival);
      last_finish = std::max(last_finish, result.timeline.finish);
      merged.requests[size_t(replica.inputs[k])] = std::move(result);
    }
    stats.cache = part.cache;
    stats.kv_peak_used_blocks = part.kv.peak_used_blocks;
    stats.kv_total_blocks = part.kv.total_blocks;
    stats.busy_s = busy_s;
    request_counts.push_back(stats.requests);
    token_counts.push_back(double(stats.prompt_tokens + stats.output_tokens));
    merged.per_replica.push_back(stats);
    add_run_stats(merged, part);
  }
  merged.step_series = merge_step_series(series);
  merged.duration_s = requests.empty() ? 0.0 : last_finish - first_arrival;
  routing.router = config.router;
  routing.request_imbalance = max_over_mean(request_counts);
  routing.token_imbalance = max_over_mean(token_counts);
  merged.routing = routing;
  return merged;
}

}  // namespace rose
