#pragma once
// `roseinfer compare BASE.json NEW.json`: the regression gate for CI. Runs are matched by
// (mode, prefix cache); each metric has a direction, and a change in the bad direction larger than
// its threshold (percent of the base value) is a regression. When the results are repeated
// (bench --repeat N, with a spread per key), the change must also exceed the measured noise.
// Exit codes: 0 within bounds, 1 regression, 2 usage or file error (missing or malformed file,
// other schema, unknown metric, no common run, different workloads without --force).
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/metrics/report_table.h"
#include "engine/metrics/results_json.h"

namespace rose {

inline constexpr int kCompareOk = 0;
inline constexpr int kCompareRegression = 1;
inline constexpr int kCompareUsageError = 2;

enum class MetricDirection { kHigherIsBetter, kLowerIsBetter };

// The direction of a run key ("output_throughput", "p99.9_ttft_ms", ...); nullopt for keys that
// describe the workload or the setup (total_input_tokens, kv_total_blocks) and for unknown names.
std::optional<MetricDirection> metric_direction(std::string_view name);

// output_throughput, request_throughput, median_ and p99_ of ttft, tpot and itl.
const std::vector<std::string>& default_compare_metrics();

// "5%" or "5" -> 5 (percent). Throws rose::Error naming `what` on anything else or a negative
// value.
double parse_threshold_percent(std::string_view text, std::string_view what);

struct MetricSpec {
  std::string name;
  std::optional<double> threshold_percent;  // else CompareOptions::max_regression_percent
};
// "NAME" or "NAME:THRESHOLD"; throws rose::Error for an unknown or direction-less name.
MetricSpec parse_metric_spec(std::string_view spec);

struct CompareOptions {
  double max_regression_percent = 5.0;
  // Added to the defaults; a default named here takes the threshold given here.
  std::vector<MetricSpec> metrics;
  bool only_listed_metrics = false;  // compare just `metrics`, not the defaults
  bool force = false;                // compare even when the workload fingerprints differ
};

// kWithinNoise: worse by more than the threshold, but by no more than the measured noise of
// repeated results (bench --repeat), so not a regression.
enum class Verdict { kImproved, kOk, kRegression, kWithinNoise, kNotANumber };
const char* verdict_name(Verdict verdict);

struct CompareRow {
  std::string run;  // "offline, cache on"
  std::string metric;
  MetricDirection direction = MetricDirection::kLowerIsBetter;
  double base = 0, next = 0;
  double change_percent = 0;  // (next - base) / |base| * 100; +-inf when base is 0 and next is not
  double threshold_percent = 0;
  // Repeated results: the half-widths of both sides' bootstrap 95% intervals of the median, summed,
  // as percent of |base|; a change no larger than this is indistinguishable from noise.
  std::optional<double> noise_percent;
  Verdict verdict = Verdict::kOk;
};

struct CompareResult {
  std::vector<CompareRow> rows;
  std::vector<std::string> notes;  // runs present on one side only, forced fingerprint mismatch
  int regressions = 0;
  int within_noise = 0;  // beyond the threshold, inside the noise: not counted as regressions
  int exit_code() const { return regressions > 0 ? kCompareRegression : kCompareOk; }
};

// Throws rose::Error (exit 2) for different fingerprints without force, no common run, or a metric
// missing from a common run. `base_name` and `next_name` name the files in messages.
CompareResult compare_results(const BenchResults& base, const BenchResults& next,
                              const CompareOptions& options, const std::string& base_name,
                              const std::string& next_name);

std::string render_compare_table(const CompareResult& result,
                                 TableFormat format = TableFormat::kText);

// Reads both files, compares, prints the table to `out` and any error to `err`; returns the exit
// code.
int run_compare(const std::string& base_path, const std::string& next_path,
                const CompareOptions& options, std::ostream& out, std::ostream& err,
                TableFormat format = TableFormat::kText);

}  // namespace rose
