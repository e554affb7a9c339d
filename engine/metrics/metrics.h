#pragma once
// Benchmark metrics exactly as reference/benchmarks.md defines them (vLLM bench serve semantics).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/parallel/collective.h"
#include "engine/scheduler/request.h"

namespace rose {

// Linear interpolation between closest ranks (numpy's default). `sorted` must be ascending,
// nonempty.
double percentile_sorted(const std::vector<double>& sorted, double q);

// Every field is 0 when there are no values (vLLM writes 0 there too), so a table or JSON never
// shows NaN.
struct Distribution {
  size_t count = 0;
  double mean = 0, std = 0, min = 0, max = 0;          // std: population (numpy's default, ddof=0)
  double median = 0;                                   // always the 50th percentile, chosen or not
  std::vector<std::pair<double, double>> percentiles;  // (q, value), in the order asked for
};
// Throws rose::Error when a percentile lies outside [0, 100] (it comes from --percentiles).
Distribution summarize(std::vector<double> values, const std::vector<double>& percentiles);

struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
};

// Per-request numbers for --save-detailed, in input order. Times are in seconds, as in vLLM's
// detailed JSON (ttfts, itls); a failed request has 0 there and an empty itl list.
struct RequestDetail {
  std::vector<int64_t> input_lens, output_lens, cached_tokens;
  std::vector<double> ttfts, e2els;  // seconds
  // Seconds since the run's start, for the report's timeline: when the request became visible and
  // when it was first scheduled (-1: never). Empty in files written before they were added.
  std::vector<double> arrivals, first_scheduled;
  std::vector<std::vector<double>> itls;  // seconds; (num_requests, output_len - 1)
  // (num_requests, output_len) generated ids: written with --save-detailed (runs that must agree
  // token for token, e.g. in-process and MPI replicas, can be compared); not read back.
  std::vector<std::vector<int32_t>> output_ids;
};

// How a number varied over `bench --repeat N` runs (metrics of one run have none).
struct Spread {
  double median = 0, min = 0, max = 0;
  double ci_low = 0, ci_high = 0;  // bootstrap 95% interval of the median
};

// A cluster run's router figures, written as run keys so compare can check them: the three hit
// rates over prompt tokens (RoutingStats::rate) and the max/mean imbalances over replicas.
struct RoutingFigures {
  double predicted_hit_rate = 0, delivered_hit_rate = 0, available_hit_rate = 0;
  double request_imbalance = 0, token_imbalance = 0;
};

// Tensor parallel: the collectives of one pure-decode step at the run's mean decode batch, timed
// standalone after the run at that step's sizes (Backend::time_collectives), not inside the steps'
// graphs. Run keys: collective_rows, all_reduces_per_step, all_reduce_bytes, all_reduce_us,
// all_reduce_bus_gbps, all_gathers_per_step, all_gather_bytes, all_gather_us,
// collective_ms_per_decode_step, collective_decode_step_fraction.
struct CollectiveFigures {
  int64_t rows = 0;  // the step's rows timed (the mean decode batch; a CUDA graph's padded bucket)
  int64_t all_reduces_per_step = 0;
  double all_reduce_bytes = 0;     // one call's buffer on each rank
  double all_reduce_us = 0;        // one call (fused: the fused add-norm's time over the plain's)
  bool fused_add_norm = false;     // CollectiveTiming::fused_add_norm
  double all_reduce_bus_gbps = 0;  // nccl-tests' busBw: 2 (N-1)/N x bytes / time
  int64_t all_gathers_per_step = 0;
  double all_gather_bytes = 0;    // one call's send buffer on each rank
  double all_gather_us = 0;       // one call
  double ms_per_decode_step = 0;  // all-reduces x their time + all-gathers x theirs
  // Of the run's mean pure-decode step time (decode_time_s / decode_steps); NaN without one.
  double decode_step_fraction = 0;
};

// The figures of `timing` against the run's pure-decode steps.
CollectiveFigures collective_figures(const CollectiveTiming& timing, const StepStats& steps);
// The rows to time a run's collectives at: its mean pure-decode batch (decode_step_tokens /
// decode_steps, rounded), at least 1.
int mean_decode_batch(const StepStats& steps);

struct BenchReport {
  std::string mode;
  bool prefix_cache = true;
  int completed = 0;
  int failed = 0;
  std::string first_failure;  // "request N: why" for the first failed request, for the report
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Distribution ttft_ms, tpot_ms, itl_ms, e2el_ms, queue_ms;
  std::optional<double> goodput;  // requests/s meeting every SLO bound, when --slo is given
  PrefixCacheStats cache;
  KvStats kv;
  StepStats steps;
  double decode_gbps = 0;  // achieved bytes/s of pure-decode steps, GB/s
  // llama.cpp batched-bench's columns: prompt tokens computed over the time of steps that were not
  // pure decode, and tokens of pure-decode steps over their time (0 when there were none).
  double prefill_throughput = 0;
  double decode_throughput = 0;
  std::optional<double> bandwidth_floor_fraction;  // decode_gbps / measured copy bandwidth
  std::optional<CollectiveFigures> collectives;    // tensor parallel (bench --tensor-parallel N)
  RequestDetail detail;
  StepSeries step_series;                 // written with --save-detailed
  std::vector<ReplicaStats> per_replica;  // a cluster run (--data-parallel): each replica
  RoutingStats routing;                   // and its router's name and token counts
  RoutingFigures routing_figures;         // the router's hit rates and imbalance
  // With --repeat N (> 1): every number above is the median of N runs, and this holds each run
  // key's spread. detail, step_series, per_replica and routing are not medians but one repeat's:
  // number representative_repeat (1-based), the one whose duration is nearest the median.
  int repeats = 1;
  int representative_repeat = 1;
  std::map<std::string, Spread> spread;
};

// A request counts as failed when it produced no token, never finished or finished with an error
// (non-finite logits); failed requests are
// left out of every distribution and token count (as in vLLM). `copy_bandwidth_gbps` is a measured
// device-to-device copy bandwidth (GB/s); when given, bandwidth_floor_fraction is set.
BenchReport make_report(const RunResult& run, const std::vector<EngineRequest>& requests,
                        const std::string& mode, bool prefix_cache,
                        const std::vector<double>& percentiles, const Slo& slo,
                        std::optional<double> copy_bandwidth_gbps = std::nullopt);

// A run "meets the SLO" when every request completed and met every bound (goodput equals request
// throughput): the test a sweep applies to each point to find the highest load a capacity planner
// can promise. False without --slo.
bool meets_slo(const BenchReport& report);

}  // namespace rose
