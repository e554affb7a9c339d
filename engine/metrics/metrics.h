#pragma once
// Benchmark metrics exactly as reference/benchmarks.md defines them (vLLM bench serve semantics).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/scheduler/engine.h"

namespace rose {

// Linear interpolation between closest ranks (numpy's default). `sorted` must be ascending, nonempty.
double percentile_sorted(const std::vector<double>& sorted, double q);

struct Distribution {
  size_t count = 0;
  double mean = 0, std = 0, min = 0, max = 0;  // std: population (numpy's default, ddof=0)
  std::vector<std::pair<double, double>> percentiles;  // (q, value)
};
Distribution summarize(std::vector<double> values, const std::vector<double>& percentiles);

struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
};

struct BenchReport {
  std::string mode;
  bool prefix_cache = true;
  int completed = 0;
  int failed = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Distribution ttft_ms, tpot_ms, itl_ms, e2el_ms, queue_ms;
  std::optional<double> goodput;  // requests/s meeting every SLO bound, when --slo is given
  PrefixCacheStats cache;
  KvStats kv;
  StepStats steps;
  double decode_gbps = 0;               // achieved bytes/s of pure-decode steps, GB/s
  std::optional<double> bandwidth_floor_fraction;  // decode_gbps / measured copy bandwidth
};

BenchReport make_report(const RunResult& run, const std::vector<EngineRequest>& requests,
                        const std::string& mode, bool prefix_cache,
                        const std::vector<double>& percentiles, const Slo& slo);

}  // namespace rose
