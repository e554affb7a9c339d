#pragma once
// What goes into a run and what comes out of it: requests, per-request results and timelines, the
// run's stats. Shared by the scheduler, the engine, metrics and anything that runs engines
// (a Runner), so none of them has to include another's header for these types.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/sampling_rule.h"

namespace rose {

struct EngineRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplingParams sampling;
  bool ignore_eos = false;
  double arrival_s = 0.0;         // seconds after the run starts; the request is invisible before
  std::vector<std::string> stop;  // stop strings: finish once the generated text holds one
};

// kError: the request could not go on (non-finite logits); RequestResult::error says why.
enum class FinishReason { kLength, kStop, kError };
const char* finish_reason_name(FinishReason reason);

// Times are seconds since the run's start (the clock starts when the run starts).
struct Timeline {
  double arrival = 0.0;
  double first_scheduled = -1.0;
  std::vector<double> token_times;  // when each output token's step had its ids on the host
  double finish = -1.0;
};

struct RequestResult {
  std::vector<int32_t> output_ids;
  FinishReason finish_reason = FinishReason::kLength;
  Timeline timeline;
  int cached_prompt_tokens = 0;  // prompt tokens served by the prefix cache at the final admission
  // ... at the first admission: what other requests left in the cache (a preempted request that
  // comes back also hits its own blocks, which is no reuse; a router's "delivered" counts this).
  int first_cached_prompt_tokens = 0;
  int preemptions = 0;
  std::string error;  // set with FinishReason::kError: what went wrong, naming the step
};

struct PrefixCacheStats {
  int64_t lookups = 0;         // admissions that consulted the index
  int64_t queried_tokens = 0;  // prompt tokens those admissions asked for
  int64_t hit_tokens = 0;      // of which served from cached blocks
  int64_t evictions = 0;       // cached blocks whose key was dropped for reuse
  double hit_rate() const { return queried_tokens ? double(hit_tokens) / queried_tokens : 0.0; }
};

struct KvStats {
  int block_size = 0;
  int total_blocks = 0;
  int peak_used_blocks = 0;  // blocks referenced by running requests at the fullest moment
  int64_t preemptions = 0;
};

struct StepStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;  // prompt tokens computed (cache hits excluded)
  int64_t decode_tokens = 0;
  int64_t decode_steps = 0;        // steps that were pure decode
  int64_t decode_step_tokens = 0;  // tokens sampled by those steps
  double decode_time_s = 0.0;      // wall time of those steps' execute()
  double execute_time_s = 0.0;     // all steps' execute()
  double schedule_time_s = 0.0;    // host bookkeeping: schedule() + update()
  double decode_bytes = 0.0;       // weights + KV bytes those pure-decode steps had to read
  // Steps submitted before the ids of the step before them reached the host (overlapped steps,
  // EngineConfig::overlap).
  int64_t steps_ahead = 0;
};

// One sample per step, taken after the step's update (for the report's KV and queue charts).
struct StepSeries {
  std::vector<double> time;         // seconds since the run's start
  std::vector<int> kv_used_blocks;  // blocks referenced after the step
  std::vector<int> running, waiting;
};

// One replica of a cluster run (engine/cluster/cluster.h).
struct ReplicaStats {
  int requests = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  PrefixCacheStats cache;
  int kv_peak_used_blocks = 0;
  int kv_total_blocks = 0;
  double busy_s = 0.0;  // time its steps took, on its own clock
};

// How a cluster's router did, in prompt tokens (one denominator for the three hit rates).
struct RoutingStats {
  std::string router;
  int64_t prompt_tokens = 0;
  int64_t predicted_hit_tokens = 0;  // what the router expected of the replicas it chose
  int64_t delivered_hit_tokens = 0;  // what those replicas served from their caches
  int64_t available_hit_tokens = 0;  // the longest prefix held anywhere, at each arrival
  double request_imbalance = 0.0;    // max / mean requests over replicas
  double token_imbalance = 0.0;      // max / mean prompt + output tokens over replicas
  double rate(int64_t tokens) const { return prompt_tokens ? double(tokens) / prompt_tokens : 0.0; }
};

struct RunResult {
  std::vector<RequestResult> requests;  // in the order the requests were added (input order)
  double duration_s = 0.0;              // last finish - first arrival
  PrefixCacheStats cache;
  KvStats kv;
  StepStats steps;
  StepSeries step_series;
  std::vector<ReplicaStats> per_replica;  // a cluster's replicas; empty for one engine
  RoutingStats routing;                   // a cluster's router; empty for one engine
};

struct RunCallbacks {
  // Called after each step with (request index, new token id); used for streaming and progress.
  std::function<void(int request_index, int32_t token)> on_token;
  // Called when a request finishes, with its complete result (output ids, timeline, reason).
  std::function<void(int request_index, const RequestResult& result)> on_finish;
};

}  // namespace rose
