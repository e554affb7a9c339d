#include "engine/report/report_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rose::report {

const char* latency_metric_name(LatencyMetric metric) {
  switch (metric) {
    case LatencyMetric::kTtft:
      return "TTFT";
    case LatencyMetric::kTpot:
      return "TPOT";
    case LatencyMetric::kItl:
      return "ITL";
    case LatencyMetric::kE2el:
      return "E2E";
  }
  return "?";
}

const Distribution& latency_distribution(const BenchReport& run, LatencyMetric metric) {
  switch (metric) {
    case LatencyMetric::kTtft:
      return run.ttft_ms;
    case LatencyMetric::kTpot:
      return run.tpot_ms;
    case LatencyMetric::kItl:
      return run.itl_ms;
    case LatencyMetric::kE2el:
      break;
  }
  return run.e2el_ms;
}

namespace {

// Detail arrays are usable when every per-request array has one entry per request (a file can
// hold anything; a mismatch means "draw from the summary instead", never a crash).
bool has_request_detail(const RequestDetail& d) {
  const size_t n = d.output_lens.size();
  return n > 0 && d.ttfts.size() == n && d.e2els.size() == n && d.itls.size() == n;
}

}  // namespace

std::optional<std::vector<double>> detail_values_ms(const BenchReport& run, LatencyMetric metric) {
  const RequestDetail& d = run.detail;
  if (!has_request_detail(d)) return std::nullopt;
  std::vector<double> values;
  for (size_t i = 0; i < d.output_lens.size(); ++i) {
    if (d.output_lens[i] <= 0) continue;  // failed: left out, as in every distribution
    const std::vector<double>& gaps = d.itls[i];
    switch (metric) {
      case LatencyMetric::kTtft:
        values.push_back(d.ttfts[i] * 1000.0);
        break;
      case LatencyMetric::kE2el:
        values.push_back(d.e2els[i] * 1000.0);
        break;
      case LatencyMetric::kTpot:
        if (!gaps.empty()) {
          values.push_back(std::accumulate(gaps.begin(), gaps.end(), 0.0) / double(gaps.size()) *
                           1000.0);
        }
        break;
      case LatencyMetric::kItl:
        for (double gap : gaps) values.push_back(gap * 1000.0);
        break;
    }
  }
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  return values;
}

std::vector<std::pair<double, double>> sampled_cdf(std::vector<double> values, int max_points) {
  std::vector<std::pair<double, double>> points;
  if (values.empty() || max_points < 2) return points;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const size_t count = std::min(n, size_t(max_points));
  for (size_t k = 0; k < count; ++k) {
    // The k-th of `count` evenly spaced ranks, always including the first and the last value.
    const size_t rank =
        count == 1 ? 0 : size_t(std::llround(double(k) * double(n - 1) / double(count - 1)));
    points.emplace_back(values[rank], double(rank + 1) / double(n));
  }
  return points;
}

std::vector<std::pair<double, double>> summary_cdf(const Distribution& dist) {
  std::vector<std::pair<double, double>> points;  // (fraction, value) first, sorted below
  if (dist.count == 0 && dist.max == 0.0) return {};
  points.emplace_back(0.0, dist.min);
  points.emplace_back(0.5, dist.median);
  for (const auto& [q, value] : dist.percentiles) points.emplace_back(q / 100.0, value);
  points.emplace_back(1.0, dist.max);
  std::sort(points.begin(), points.end());
  std::vector<std::pair<double, double>> cdf;
  for (const auto& [fraction, value] : points) {
    if (std::isfinite(value)) cdf.emplace_back(value, fraction);
  }
  return cdf;
}

std::vector<RequestPhases> request_phases(const BenchReport& run) {
  const RequestDetail& d = run.detail;
  std::vector<RequestPhases> phases;
  const size_t n = d.output_lens.size();
  if (!has_request_detail(d) || d.arrivals.size() != n || d.first_scheduled.size() != n) {
    return phases;
  }
  for (size_t i = 0; i < n; ++i) {
    if (d.output_lens[i] <= 0) continue;
    RequestPhases p;
    p.index = int(i);
    p.arrival = d.arrivals[i];
    p.scheduled = d.first_scheduled[i] >= 0.0 ? d.first_scheduled[i] : p.arrival;
    p.first_token = p.arrival + d.ttfts[i];
    p.finish = p.arrival + d.e2els[i];
    if (!std::isfinite(p.arrival + p.scheduled + p.first_token + p.finish)) continue;
    phases.push_back(p);
  }
  std::stable_sort(
      phases.begin(), phases.end(),
      [](const RequestPhases& a, const RequestPhases& b) { return a.arrival < b.arrival; });
  return phases;
}

std::vector<std::pair<double, double>> binned_max(const std::vector<double>& times,
                                                  const std::vector<int>& values, double end,
                                                  int max_bins) {
  std::vector<std::pair<double, double>> points;
  const size_t n = std::min(times.size(), values.size());
  if (n == 0 || max_bins < 1) return points;
  if (n <= size_t(max_bins) || !(end > 0.0)) {
    for (size_t i = 0; i < n; ++i) points.emplace_back(times[i], values[i]);
    return points;
  }
  const double width = end / max_bins;
  std::vector<int> peak(size_t(max_bins), -1);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(times[i])) continue;
    const size_t bin = size_t(std::clamp(std::floor(times[i] / width), 0.0, double(max_bins - 1)));
    peak[bin] = std::max(peak[bin], values[i]);
  }
  for (int b = 0; b < max_bins; ++b) {
    if (peak[size_t(b)] >= 0) points.emplace_back((b + 1) * width, peak[size_t(b)]);
  }
  return points;
}

std::string run_label(const BenchReport& run) {
  return fmt::format("{}, cache {}", run.mode, run.prefix_cache ? "on" : "off");
}

}  // namespace rose::report
