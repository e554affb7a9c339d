#pragma once
// What the HTML report draws, computed from saved results (never from a live RunResult, so any
// results file can be drawn): bounded CDF samples, per-request phases, binned step series.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/metrics/metrics.h"

namespace rose::report {

enum class LatencyMetric { kTtft, kTpot, kItl, kE2el };
const char* latency_metric_name(LatencyMetric metric);  // "TTFT", ...
const Distribution& latency_distribution(const BenchReport& run, LatencyMetric metric);

// The metric's values in ms for every completed request (every gap for ITL), from the
// --save-detailed arrays; nullopt when the run has no usable detail.
std::optional<std::vector<double>> detail_values_ms(const BenchReport& run, LatencyMetric metric);

// (value, fraction <= value) points of the empirical CDF of `values`, at most `max_points` of
// them (quantiles at evenly spaced fractions, so 5,000 requests draw like 50).
std::vector<std::pair<double, double>> sampled_cdf(std::vector<double> values, int max_points);
// The CDF through the summary quantiles a file always has (min, chosen percentiles, median, max).
std::vector<std::pair<double, double>> summary_cdf(const Distribution& dist);

// One request's phases in seconds since the run's start.
struct RequestPhases {
  int index = 0;
  double arrival = 0, scheduled = 0, first_token = 0, finish = 0;
};
// Completed requests in arrival order (ties by index); empty without usable detail.
std::vector<RequestPhases> request_phases(const BenchReport& run);

// A step series reduced to at most `max_bins` points over [0, end]: each bin keeps its largest
// sample, so a short peak stays visible. Returns (bin end time, value).
std::vector<std::pair<double, double>> binned_max(const std::vector<double>& times,
                                                  const std::vector<int>& values, double end,
                                                  int max_bins);

// "offline, cache on"
std::string run_label(const BenchReport& run);

}  // namespace rose::report
