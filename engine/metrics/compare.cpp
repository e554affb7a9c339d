#include "engine/metrics/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "engine/common/error.h"
#include "engine/metrics/report_table.h"

namespace rose {

namespace {

constexpr std::string_view kDistributionNames[] = {"ttft", "tpot", "itl", "e2el", "queue"};
constexpr std::string_view kStatPrefixes[] = {"mean", "median", "std", "min", "max"};

// A latency statistic: (mean|median|std|min|max|pNN)_(ttft|tpot|itl|e2el|queue)_ms.
bool is_latency_key(std::string_view name) {
  if (!name.ends_with("_ms")) return false;
  name.remove_suffix(3);
  const size_t split = name.rfind('_');
  if (split == std::string_view::npos) return false;
  const std::string_view stat = name.substr(0, split);
  const std::string_view family = name.substr(split + 1);
  if (std::find(std::begin(kDistributionNames), std::end(kDistributionNames), family) ==
      std::end(kDistributionNames)) {
    return false;
  }
  if (std::find(std::begin(kStatPrefixes), std::end(kStatPrefixes), stat) !=
      std::end(kStatPrefixes)) {
    return true;
  }
  // pNN: a number in [0, 100].
  if (stat.size() < 2 || stat[0] != 'p') return false;
  const std::string digits(stat.substr(1));
  if (digits.find_first_not_of("0123456789.") != std::string::npos) return false;
  char* end = nullptr;
  const double q = std::strtod(digits.c_str(), &end);
  return end == digits.c_str() + digits.size() && q >= 0.0 && q <= 100.0;
}

std::string run_label(const std::string& mode, bool prefix_cache) {
  return fmt::format("{}, cache {}", mode, prefix_cache ? "on" : "off");
}

}  // namespace

std::optional<MetricDirection> metric_direction(std::string_view name) {
  static const std::map<std::string, MetricDirection, std::less<>> kKnown = {
      {"completed", MetricDirection::kHigherIsBetter},
      {"request_throughput", MetricDirection::kHigherIsBetter},
      {"output_throughput", MetricDirection::kHigherIsBetter},
      {"total_token_throughput", MetricDirection::kHigherIsBetter},
      {"request_goodput", MetricDirection::kHigherIsBetter},
      {"prefix_cache_hit_rate", MetricDirection::kHigherIsBetter},
      {"prefix_cache_hit_tokens", MetricDirection::kHigherIsBetter},
      {"decode_gbps", MetricDirection::kHigherIsBetter},
      {"prefill_throughput", MetricDirection::kHigherIsBetter},
      {"decode_throughput", MetricDirection::kHigherIsBetter},
      {"bandwidth_floor_fraction", MetricDirection::kHigherIsBetter},
      // Tensor parallel: its decode step's collectives, timed standalone (metrics.h). Not in the
      // defaults; their counts and bytes describe the setup and have no direction.
      {"all_reduce_us", MetricDirection::kLowerIsBetter},
      {"all_reduce_bus_gbps", MetricDirection::kHigherIsBetter},
      {"all_gather_us", MetricDirection::kLowerIsBetter},
      {"collective_ms_per_decode_step", MetricDirection::kLowerIsBetter},
      {"collective_decode_step_fraction", MetricDirection::kLowerIsBetter},
      {"failed", MetricDirection::kLowerIsBetter},
      {"duration", MetricDirection::kLowerIsBetter},
      {"prefix_cache_evictions", MetricDirection::kLowerIsBetter},
      {"kv_peak_used_blocks", MetricDirection::kLowerIsBetter},
      {"kv_peak_usage", MetricDirection::kLowerIsBetter},
      {"preemptions", MetricDirection::kLowerIsBetter},
      {"steps", MetricDirection::kLowerIsBetter},
      {"prefill_tokens_computed", MetricDirection::kLowerIsBetter},
      {"decode_time_s", MetricDirection::kLowerIsBetter},
      {"execute_time_s", MetricDirection::kLowerIsBetter},
      {"schedule_time_s", MetricDirection::kLowerIsBetter},
      // A cluster run (--data-parallel): the router's hit rates and how evenly it spread load.
      {"routing_predicted_hit_rate", MetricDirection::kHigherIsBetter},
      {"routing_delivered_hit_rate", MetricDirection::kHigherIsBetter},
      {"routing_available_hit_rate", MetricDirection::kHigherIsBetter},
      {"request_imbalance", MetricDirection::kLowerIsBetter},
      {"token_imbalance", MetricDirection::kLowerIsBetter},
  };
  if (const auto it = kKnown.find(name); it != kKnown.end()) return it->second;
  if (is_latency_key(name)) return MetricDirection::kLowerIsBetter;
  return std::nullopt;
}

const std::vector<std::string>& default_compare_metrics() {
  static const std::vector<std::string> kDefaults = {
      "output_throughput", "request_throughput", "median_ttft_ms", "p99_ttft_ms",
      "median_tpot_ms",    "p99_tpot_ms",        "median_itl_ms",  "p99_itl_ms",
  };
  return kDefaults;
}

double parse_threshold_percent(std::string_view text, std::string_view what) {
  std::string number(text);
  if (!number.empty() && number.back() == '%') number.pop_back();
  char* end = nullptr;
  const double value = number.empty() ? std::nan("") : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || std::isnan(value)) {
    fail("{}: '{}' is not a threshold (write a percentage such as 5% or 5)", what, text);
  }
  if (value < 0.0) fail("{}: '{}' is negative; a threshold is a percentage >= 0", what, text);
  return value;
}

MetricSpec parse_metric_spec(std::string_view spec) {
  MetricSpec out;
  const size_t colon = spec.find(':');
  out.name = std::string(spec.substr(0, colon));
  if (out.name.empty()) fail("--metric '{}': the metric name is empty", spec);
  if (!metric_direction(out.name)) {
    fail(
        "--metric '{}': unknown or not comparable metric '{}' (use a run key such as "
        "output_throughput, request_throughput, request_goodput, prefix_cache_hit_rate, duration, "
        "or mean_/median_/std_/min_/max_/pNN_ of ttft, tpot, itl, e2el, queue with _ms)",
        spec, out.name);
  }
  if (colon != std::string_view::npos) {
    out.threshold_percent =
        parse_threshold_percent(spec.substr(colon + 1), fmt::format("--metric '{}'", spec));
  }
  return out;
}

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kImproved:
      return "improved";
    case Verdict::kOk:
      return "ok";
    case Verdict::kRegression:
      return "REGRESSION";
    case Verdict::kWithinNoise:
      return "within noise";
    case Verdict::kNotANumber:
      return "not a number";
  }
  return "?";
}

namespace {

// How far the medians of repeated runs can move by chance: the half-widths of both sides'
// intervals, summed, in percent of |base|. nullopt when neither side was repeated.
std::optional<double> noise_percent(const BenchReport& base_run, const BenchReport& next_run,
                                    const std::string& metric, double base_value) {
  double half_widths = 0.0;
  bool measured = false;
  for (const BenchReport* run : {&base_run, &next_run}) {
    const auto it = run->spread.find(metric);
    if (it == run->spread.end()) continue;
    measured = true;
    half_widths += (it->second.ci_high - it->second.ci_low) / 2.0;
  }
  if (!measured) return std::nullopt;
  if (base_value == 0.0) return half_widths > 0.0 ? INFINITY : 0.0;
  return half_widths / std::fabs(base_value) * 100.0;
}

}  // namespace

namespace {

// Different workloads make every comparison meaningless: an error, or with --force a warning note.
void check_same_workload(const BenchResults& base, const BenchResults& next,
                         const CompareOptions& options, const std::string& base_name,
                         const std::string& next_name, CompareResult& result) {
  if (base.workload.fingerprint == next.workload.fingerprint) return;
  const std::string why = fmt::format(
      "{} and {} measured different workloads (workload '{}' fingerprint {} vs '{}' fingerprint "
      "{}): prompts, lengths, sampling, arrivals or model differ, so their numbers are not "
      "comparable",
      base_name, next_name, base.workload.name, base.workload.fingerprint, next.workload.name,
      next.workload.fingerprint);
  if (!options.force) fail("{}; pass --force to compare them anyway", why);
  result.notes.push_back("warning (--force): " + why);
}

// The metrics to check and their thresholds, defaults first, in a stable order; a --metric
// naming a default replaces its threshold in place.
std::vector<std::pair<std::string, double>> metrics_to_check(const CompareOptions& options) {
  std::vector<std::pair<std::string, double>> metrics;
  auto set_metric = [&](const std::string& name, double threshold) {
    for (auto& [existing, existing_threshold] : metrics) {
      if (existing == name) {
        existing_threshold = threshold;
        return;
      }
    }
    metrics.emplace_back(name, threshold);
  };
  if (!options.only_listed_metrics) {
    for (const std::string& name : default_compare_metrics()) {
      set_metric(name, options.max_regression_percent);
    }
  }
  for (const MetricSpec& spec : options.metrics) {
    if (!metric_direction(spec.name))
      fail("--metric: unknown or not comparable metric '{}'", spec.name);
    set_metric(spec.name, spec.threshold_percent.value_or(options.max_regression_percent));
  }
  if (metrics.empty()) fail("compare: no metric to compare (--metrics-only with no --metric)");
  return metrics;
}

// Runs are matched by mode and prefix-cache setting; the first match, or -1.
int find_run(const BenchResults& results, const BenchReport& run) {
  for (size_t i = 0; i < results.runs.size(); ++i) {
    if (results.runs[i].mode == run.mode && results.runs[i].prefix_cache == run.prefix_cache) {
      return int(i);
    }
  }
  return -1;
}

// Fills the row's change in percent of |base| and its verdict: a regression only past the
// threshold and, for repeated results, past the runs' noise.
void judge(CompareRow& row, const BenchReport& base_run, const BenchReport& next_run) {
  if (std::isnan(row.base) || std::isnan(row.next)) {
    row.change_percent = std::nan("");
    row.verdict = Verdict::kNotANumber;
    return;
  }
  const double delta = row.next - row.base;
  if (row.base != 0.0) {
    row.change_percent = delta / std::fabs(row.base) * 100.0;
  } else {
    row.change_percent = delta == 0.0 ? 0.0 : std::copysign(INFINITY, delta);
  }
  const double worse_percent =
      row.direction == MetricDirection::kHigherIsBetter ? -row.change_percent : row.change_percent;
  // The tolerance keeps a change of exactly the threshold (5% written as 512 -> 486.4) from
  // failing on the last bit of a double.
  constexpr double kTolerancePercent = 1e-9;
  row.noise_percent = noise_percent(base_run, next_run, row.metric, row.base);
  if (worse_percent > row.threshold_percent + kTolerancePercent) {
    row.verdict = row.noise_percent && worse_percent <= *row.noise_percent + kTolerancePercent
                      ? Verdict::kWithinNoise
                      : Verdict::kRegression;
  } else if (worse_percent < -kTolerancePercent) {
    row.verdict = Verdict::kImproved;
  } else {
    row.verdict = Verdict::kOk;
  }
}

// Appends one row per metric for the matched runs base.runs[b] and next.runs[n].
void compare_run_pair(const BenchResults& base, size_t b, const BenchResults& next, size_t n,
                      const std::vector<std::pair<std::string, double>>& metrics,
                      const std::string& base_name, const std::string& next_name,
                      CompareResult& result) {
  const std::string label = run_label(base.runs[b].mode, base.runs[b].prefix_cache);
  for (const auto& [metric, threshold] : metrics) {
    const auto base_value = base.run_values[b].find(metric);
    const auto next_value = next.run_values[n].find(metric);
    if (base_value == base.run_values[b].end() || next_value == next.run_values[n].end()) {
      fail("metric '{}' is not in run '{}' of {} (was it measured, e.g. --slo for goodput?)",
           metric, label, base_value == base.run_values[b].end() ? base_name : next_name);
    }
    CompareRow row;
    row.run = label;
    row.metric = metric;
    row.direction = *metric_direction(metric);
    row.base = base_value->second;
    row.next = next_value->second;
    row.threshold_percent = threshold;
    judge(row, base.runs[b], next.runs[n]);
    if (row.verdict == Verdict::kWithinNoise) ++result.within_noise;
    if (row.verdict == Verdict::kRegression) ++result.regressions;
    result.rows.push_back(row);
  }
}

}  // namespace

CompareResult compare_results(const BenchResults& base, const BenchResults& next,
                              const CompareOptions& options, const std::string& base_name,
                              const std::string& next_name) {
  CompareResult result;
  check_same_workload(base, next, options, base_name, next_name, result);
  const std::vector<std::pair<std::string, double>> metrics = metrics_to_check(options);
  ROSE_ASSERT(base.runs.size() == base.run_values.size());
  ROSE_ASSERT(next.runs.size() == next.run_values.size());

  int common_runs = 0;
  for (size_t b = 0; b < base.runs.size(); ++b) {
    const BenchReport& base_run = base.runs[b];
    const std::string label = run_label(base_run.mode, base_run.prefix_cache);
    if (find_run(base, base_run) != int(b)) {
      result.notes.push_back(
          fmt::format("{}: run '{}' appears twice; the first is used", base_name, label));
      continue;
    }
    const int n = find_run(next, base_run);
    if (n < 0) {
      result.notes.push_back(fmt::format("run '{}' is only in {}", label, base_name));
      continue;
    }
    ++common_runs;
    compare_run_pair(base, b, next, size_t(n), metrics, base_name, next_name, result);
  }
  for (const BenchReport& next_run : next.runs) {
    if (find_run(base, next_run) < 0) {
      result.notes.push_back(fmt::format(
          "run '{}' is only in {}", run_label(next_run.mode, next_run.prefix_cache), next_name));
    }
  }
  if (common_runs == 0) {
    fail("{} and {} have no run in common (runs are matched by mode and prefix cache)", base_name,
         next_name);
  }
  return result;
}

namespace {

bool has_noise(const CompareResult& result) {
  for (const CompareRow& row : result.rows) {
    if (row.noise_percent) return true;
  }
  return false;
}

}  // namespace

std::string render_compare_table(const CompareResult& result, TableFormat format) {
  TextTable table(/*left_aligned_columns=*/2);
  // The noise column only for repeated results, so a plain compare reads as before.
  const bool show_noise = has_noise(result);
  std::vector<std::string> header = {"run", "metric", "base", "new", "change", "limit", "verdict"};
  if (show_noise) header.insert(header.end() - 1, "noise");
  table.add_row(std::move(header));
  for (const CompareRow& row : result.rows) {
    const std::string change = std::isnan(row.change_percent)
                                   ? std::string("-")
                                   : fmt::format("{:+.2f}%", row.change_percent);
    // The limit is shown in the bad direction: -5% for throughput, +5% for latency.
    const std::string limit =
        fmt::format("{}{}%", row.direction == MetricDirection::kHigherIsBetter ? "-" : "+",
                    row.threshold_percent);
    std::vector<std::string> cells = {
        row.run, row.metric, format_number(row.base),  format_number(row.next),
        change,  limit,      verdict_name(row.verdict)};
    if (show_noise) {
      cells.insert(cells.end() - 1, row.noise_percent ? fmt::format("+-{:.2f}%", *row.noise_percent)
                                                      : std::string("-"));
    }
    table.add_row(std::move(cells));
  }
  std::string out = table.render_as(format);
  if (format != TableFormat::kText) out += '\n';
  for (const std::string& note : result.notes) out += "note: " + note + "\n";
  if (result.within_noise > 0) {
    out += fmt::format(
        "compare: {} metric(s) changed beyond their threshold but within the measured noise of "
        "the repeated runs (not regressions)\n",
        result.within_noise);
  }
  if (result.regressions > 0) {
    out += fmt::format("compare: {} of {} metrics regressed beyond their threshold{}\n",
                       result.regressions, result.rows.size(),
                       show_noise ? " and the measured noise" : "");
  } else {
    out += fmt::format("compare: all {} metrics within bounds\n", result.rows.size());
  }
  return out;
}

int run_compare(const std::string& base_path, const std::string& next_path,
                const CompareOptions& options, std::ostream& out, std::ostream& err,
                TableFormat format) {
  try {
    const BenchResults base = read_results_json(base_path);
    const BenchResults next = read_results_json(next_path);
    const CompareResult result = compare_results(base, next, options, base_path, next_path);
    out << fmt::format("base: {} (roseinfer {}, git {}, {}, {})\n", base_path,
                       base.roseinfer_version, base.git_commit, base.date, base.device);
    out << fmt::format("new:  {} (roseinfer {}, git {}, {}, {})\n", next_path,
                       next.roseinfer_version, next.git_commit, next.date, next.device);
    out << render_compare_table(result, format);
    return result.exit_code();
  } catch (const Error& e) {
    err << "roseinfer compare: " << e.what() << "\n";
    return kCompareUsageError;
  }
}

}  // namespace rose
