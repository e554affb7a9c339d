#pragma once
// The versioned results file of `roseinfer bench --json` (reference/benchmarks.md), and its reader.
//
// Schema "roseinfer-bench", version 1:
//   { schema, schema_version, roseinfer_version, git_commit, date (UTC ISO 8601), command, model,
//     device, config: {flag: value, ...}, workload: {name, num_requests, fingerprint,
//     total_input_tokens}, runs: [ {mode, prefix_cache, <flat numeric keys>, [detail arrays]} ] }
// The flat keys follow vLLM's bench JSON where one exists (completed, duration, request_throughput,
// mean_ttft_ms, p99_itl_ms, request_goodput, ...), so scripts written for vLLM read them unchanged;
// run_numbers() lists them all. Detail arrays (--save-detailed) are per run: input_lens,
// output_lens, cached_tokens, ttfts, e2els (seconds), itls (seconds, one array per request),
// arrivals and first_scheduled (seconds since the run's start), and one sample per engine step:
// step_times, step_kv_used_blocks, step_running, step_waiting. With --repeat N the flat keys are
// medians over N runs (a cluster's routing_* and *_imbalance keys too), plus "repeats": N,
// "representative_repeat": the 1-based run whose detail arrays and per_replica rows are written
// (the one whose duration is nearest the median), and "spread": {key: {min, max, ci95_low,
// ci95_high}}.
// With --sweep: "sweep": {parameter, values: [one per run, null for inf]}.
// With --tensor-parallel N > 1, each run also has its decode step's collectives, timed standalone
// after the run (CollectiveFigures in metrics.h: collective_ms_per_decode_step, all_reduce_us,
// ...). Bump kResultsSchemaVersion when a key changes meaning or disappears; adding keys does not.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/metrics/metrics.h"

namespace rose {

inline constexpr std::string_view kResultsSchema = "roseinfer-bench";
inline constexpr int kResultsSchemaVersion = 1;

// A flag's value as given (or defaulted) on the command line; monostate is an unset optional flag.
using ConfigValue = std::variant<std::monostate, bool, int64_t, double, std::string>;

struct WorkloadInfo {
  std::string name;  // dataset spec or prompt file
  int64_t num_requests = 0;
  std::string fingerprint;  // workload_fingerprint(): compare refuses to compare different ones
  int64_t total_input_tokens = 0;
};

struct BenchResults {
  std::string roseinfer_version, git_commit, date, command, model, device;
  std::vector<std::pair<std::string, ConfigValue>> config;  // every engine/workload flag, in order
  WorkloadInfo workload;
  std::vector<BenchReport> runs;  // one per (mode, prefix cache), or per sweep point
  // `bench --sweep`: the swept flag (request_rate, max_concurrency) and each run's value of it
  // (parallel to runs; inf is written as null). Empty without a sweep.
  std::string sweep_parameter;
  std::vector<double> sweep_values;
  // Filled by the reader: every numeric key of each run exactly as found in the file (parallel to
  // runs), so compare can use any key, including ones this build does not model.
  std::vector<std::map<std::string, double>> run_values;
  // Filled by the reader from a cluster run's "per_replica" array: each replica's numeric keys
  // (parallel to runs; empty for single-engine runs).
  std::vector<std::vector<std::map<std::string, double>>> run_replicas;
};

// "p99" for 99, "p99.9" for 99.9: vLLM's spelling (Python's str of the float, integer part only
// when whole).
std::string percentile_key(double q);

// Every flat numeric key of one run, in file order, with its value. Optional numbers (goodput,
// bandwidth floor) appear only when set.
std::vector<std::pair<std::string, double>> run_numbers(const BenchReport& report);

// The report that run_numbers() would write as `numbers` (keys it does not know are ignored).
BenchReport report_from_run_numbers(const std::string& mode, bool prefix_cache,
                                    const std::vector<std::pair<std::string, double>>& numbers);

// 32 hex digits of XXH3-128 over every request's prompt ids, max_tokens, sampling, ignore_eos and
// arrival time, plus `result_config`: whatever else changes what the engine computes (model id,
// dtype, ...), serialized by the caller.
std::string workload_fingerprint(const std::vector<EngineRequest>& requests,
                                 std::string_view result_config);

// Now, as "2026-11-20T09:15:02Z".
std::string utc_timestamp_now();

// JSON text (pretty-printed, trailing newline). Non-finite numbers are written as null.
std::string results_to_json(const BenchResults& results, bool save_detailed);
// Through a temporary file and a rename: a reader never sees half a file.
void write_results_json(const std::filesystem::path& path, const BenchResults& results,
                        bool save_detailed);

// Throws rose::Error naming `source` and the field on bad JSON, a different schema, a newer
// schema_version or a field of the wrong type. Unknown keys are ignored (newer minor additions).
BenchResults parse_results_json(std::string_view content, const std::string& source);
BenchResults read_results_json(const std::filesystem::path& path);

}  // namespace rose
