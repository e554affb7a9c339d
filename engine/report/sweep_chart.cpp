#include "engine/report/sweep_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "engine/metrics/report_table.h"
#include "engine/report/report_data.h"
#include "engine/report/svg_plot.h"

namespace rose::report {

std::vector<SweepPoint> sweep_points(const BenchResults& results) {
  std::vector<SweepPoint> points;
  if (results.sweep_parameter.empty() || results.sweep_values.size() != results.runs.size()) {
    return points;
  }
  for (size_t i = 0; i < results.runs.size(); ++i) {
    points.push_back({results.sweep_values[i], &results.runs[i]});
  }
  return points;
}

Slo slo_of(const BenchResults& results) {
  Slo slo;
  for (const auto& [key, value] : results.config) {
    const std::string* text = std::get_if<std::string>(&value);
    if (key != "slo" || !text) continue;
    // bench validated it when it ran; a part that does not parse is left out, not an error.
    std::stringstream stream(*text);
    for (std::string part; std::getline(stream, part, ',');) {
      const size_t eq = part.find('=');
      if (eq == std::string::npos) continue;
      char* end = nullptr;
      const std::string number = part.substr(eq + 1);
      const double ms = std::strtod(number.c_str(), &end);
      if (end == number.c_str() || *end != '\0' || !(ms > 0) || !std::isfinite(ms)) continue;
      const std::string name = part.substr(0, eq);
      if (name == "ttft") slo.ttft_ms = ms;
      if (name == "tpot") slo.tpot_ms = ms;
      if (name == "e2el") slo.e2el_ms = ms;
    }
  }
  return slo;
}

std::optional<double> highest_meeting_slo(const BenchResults& results) {
  std::optional<double> best;
  for (const SweepPoint& p : sweep_points(results)) {
    if (meets_slo(*p.run) && (!best || p.value > *best)) best = p.value;
  }
  return best;
}

std::string sweep_value_label(double value) {
  return std::isinf(value) ? std::string("inf") : fmt::format("{:g}", value);
}

namespace {

// One colour per file; red is kept for the SLO line.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                    "#9467bd", "#8c564b", "#17becf"};
constexpr const char* kSloColor = "#d62728";
constexpr LatencyMetric kMetrics[] = {LatencyMetric::kTtft, LatencyMetric::kTpot,
                                      LatencyMetric::kItl, LatencyMetric::kE2el};

struct SweepFile {
  std::string name, parameter, color;
  std::vector<SweepPoint> points;
  std::optional<double> high_q;  // the highest chosen percentile above the median (p99 usually)
  Slo slo;
  std::optional<double> best;
};

std::optional<double> high_percentile(const std::vector<SweepPoint>& points) {
  std::optional<double> q;
  for (const auto& [chosen, value] : points.front().run->ttft_ms.percentiles) {
    if (chosen > 50 && (!q || chosen > *q)) q = chosen;
  }
  return q;
}

std::vector<SweepFile> sweep_files(const std::vector<ReportSource>& sources) {
  std::vector<SweepFile> files;
  for (const ReportSource& source : sources) {
    std::vector<SweepPoint> points = sweep_points(source.results);
    if (points.empty()) continue;
    SweepFile f{source.name, source.results.sweep_parameter,
                kPalette[files.size() % std::size(kPalette)], std::move(points)};
    f.high_q = high_percentile(f.points);
    f.slo = slo_of(source.results);
    f.best = highest_meeting_slo(source.results);
    files.push_back(std::move(f));
  }
  return files;
}

std::optional<double> slo_bound(const Slo& slo, LatencyMetric metric) {
  switch (metric) {
    case LatencyMetric::kTtft:
      return slo.ttft_ms;
    case LatencyMetric::kTpot:
      return slo.tpot_ms;
    case LatencyMetric::kE2el:
      return slo.e2el_ms;
    case LatencyMetric::kItl:
      break;  // --slo has no ITL bound
  }
  return std::nullopt;
}

// A point's latency at quantile q (50: the median, which every file has).
double latency_at(const SweepPoint& p, LatencyMetric metric, double q) {
  const Distribution& d = latency_distribution(*p.run, metric);
  if (q == 50.0) return d.median;
  for (const auto& [chosen, value] : d.percentiles) {
    if (chosen == q) return value;
  }
  return std::nan("");
}

// (output tok/s, latency ms) per sweep point, in run order: the curve as measured.
std::vector<std::pair<double, double>> curve(const SweepFile& f, LatencyMetric metric, double q) {
  std::vector<std::pair<double, double>> points;
  for (const SweepPoint& p : f.points) {
    const double y = latency_at(p, metric, q);
    if (std::isfinite(p.run->output_throughput) && std::isfinite(y)) {
      points.emplace_back(p.run->output_throughput, y);
    }
  }
  return points;
}

double max_latency(const std::vector<SweepFile>& files, LatencyMetric metric) {
  double top = 0.0;
  for (const SweepFile& f : files) {
    for (const auto& [x, y] : curve(f, metric, f.high_q.value_or(50.0))) top = std::max(top, y);
    for (const auto& [x, y] : curve(f, metric, 50.0)) top = std::max(top, y);
    // The SLO line stays on the chart, so the reader sees how far a point is from it.
    if (auto bound = slo_bound(f.slo, metric)) top = std::max(top, *bound);
  }
  return top;
}

std::vector<LegendEntry> sweep_legend(const std::vector<SweepFile>& files, LatencyMetric metric) {
  std::vector<LegendEntry> entries;
  bool slo = false;
  for (const SweepFile& f : files) {
    entries.push_back({f.name + " p50", {f.color}});
    if (f.high_q) entries.push_back({f.name + " " + percentile_key(*f.high_q), {f.color, true}});
    slo = slo || slo_bound(f.slo, metric).has_value();
  }
  if (slo) entries.push_back({"--slo bound", {kSloColor, true, 1.5}});
  return entries;
}

void draw_file(SvgPlot& plot, const SweepFile& f, LatencyMetric metric) {
  const std::vector<std::pair<double, double>> median = curve(f, metric, 50.0);
  plot.line(median, {f.color}, f.name + " p50");
  if (f.high_q) {
    const auto high = curve(f, metric, *f.high_q);
    plot.line(high, {f.color, true}, f.name + " " + percentile_key(*f.high_q));
    for (const auto& [x, y] : high) plot.marker(x, y, f.color, "");
  }
  // The median's dots carry the swept value, so each point reads as "at this load".
  for (const SweepPoint& p : f.points) {
    const double y = latency_at(p, metric, 50.0);
    if (!std::isfinite(y) || !std::isfinite(p.run->output_throughput)) continue;
    plot.marker(p.run->output_throughput, y, f.color, sweep_value_label(p.value));
    if (f.best && p.value == *f.best) {
      plot.ring(
          p.run->output_throughput, y, kSloColor,
          fmt::format("highest {} meeting the SLO: {}", f.parameter, sweep_value_label(p.value)));
    }
  }
}

std::string sweep_chart(const std::vector<SweepFile>& files, LatencyMetric metric, double x_max) {
  const std::string name = latency_metric_name(metric);
  const double y_max = nice_range(0.0, max_latency(files, metric)).second;
  SvgPlot plot("sweep-" + name, name + " against throughput",
               {"output throughput (tok/s)", 0.0, x_max}, {name + " (ms)", 0.0, y_max}, 560, 360);
  plot.legend(sweep_legend(files, metric));
  std::vector<double> bounds;
  for (const SweepFile& f : files) {
    const std::optional<double> bound = slo_bound(f.slo, metric);
    if (!bound || std::find(bounds.begin(), bounds.end(), *bound) != bounds.end()) continue;
    bounds.push_back(*bound);
    plot.line({{0.0, *bound}, {x_max, *bound}}, {kSloColor, true, 1.5}, "SLO " + name);
    // Under the line when it runs along the top of the frame, so the label stays inside.
    const double label_y = *bound > 0.85 * y_max ? *bound - 0.06 * y_max : *bound + 0.02 * y_max;
    plot.note(x_max * 0.02, label_y, fmt::format("SLO {} ms", format_number(*bound)));
  }
  for (const SweepFile& f : files) draw_file(plot, f, metric);
  return plot.render();
}

}  // namespace

std::string sweep_charts(const std::vector<ReportSource>& sources) {
  const std::vector<SweepFile> files = sweep_files(sources);
  if (files.empty()) return "";
  double top = 0.0;
  for (const SweepFile& f : files) {
    for (const SweepPoint& p : f.points) {
      if (std::isfinite(p.run->output_throughput)) top = std::max(top, p.run->output_throughput);
    }
  }
  const double x_max = nice_range(0.0, top).second;
  std::string body = "<div class=\"row\">\n";
  for (LatencyMetric metric : kMetrics) body += sweep_chart(files, metric, x_max);
  return body + "</div>\n";
}

}  // namespace rose::report
