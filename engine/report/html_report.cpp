#include "engine/report/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "engine/io/atomic_file.h"
#include "engine/metrics/report_table.h"
#include "engine/report/report_data.h"
#include "engine/report/svg_plot.h"
#include "engine/report/sweep_chart.h"

namespace rose::report {

namespace {

constexpr LatencyMetric kLatencyMetrics[] = {LatencyMetric::kTtft, LatencyMetric::kTpot,
                                             LatencyMetric::kItl, LatencyMetric::kE2el};
constexpr const char* kQueueColor = "#9e9e9e";
constexpr const char* kPrefillColor = "#ff7f0e";
constexpr const char* kDecodeColor = "#1f77b4";

// One colour per scheduler mode in every chart; the prefix cache off is a dashed line.
LineStyle style_of(const BenchReport& run) {
  LineStyle style;
  if (run.mode == "naive") {
    style.color = "#d62728";
  } else if (run.mode == "online") {
    style.color = "#2ca02c";
  } else if (run.mode == "offline") {
    style.color = "#1f77b4";
  } else {
    style.color = "#9467bd";
  }
  style.dashed = !run.prefix_cache;
  return style;
}

std::vector<LegendEntry> run_legend(const BenchResults& results) {
  std::vector<LegendEntry> entries;
  for (const BenchReport& run : results.runs) entries.push_back({run_label(run), style_of(run)});
  return entries;
}

// Finite maximum of f over every run of every source (0 when there is none).
double max_over_runs(const std::vector<ReportSource>& sources,
                     const std::function<double(const BenchReport&)>& f) {
  double best = 0.0;
  for (const ReportSource& source : sources) {
    for (const BenchReport& run : source.results.runs) {
      const double v = f(run);
      if (std::isfinite(v)) best = std::max(best, v);
    }
  }
  return best;
}

std::string column(const std::string& heading, const std::string& body) {
  return fmt::format("<div class=\"col\"><h3>{}</h3>\n{}</div>\n", escape_html(heading), body);
}

std::string section(const std::string& id, const std::string& title, const std::string& intro,
                    const std::string& body) {
  return fmt::format("<section id=\"{}\"><h2>{}</h2>\n<p class=\"intro\">{}</p>\n{}</section>\n",
                     id, escape_html(title), escape_html(intro), body);
}

std::string page_head() {
  return R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>roseinfer report</title>
<style>
body { font-family: sans-serif; margin: 16px 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid #ccc; margin-top: 28px; }
h3 { font-size: 14px; margin: 6px 0; } p.intro { color: #555; font-size: 13px; max-width: 1100px; }
.row { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.col { border: 1px solid #e4e4e4; padding: 6px; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
td, th { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
svg.chart { display: block; background: #fff; }
svg text { font-family: sans-serif; }
.title { font-size: 13px; font-weight: bold; } .label { font-size: 12px; fill: #333; }
.tick { font-size: 10px; fill: #555; } .legend { font-size: 11px; fill: #333; }
.mark { font-size: 9px; fill: #444; } .note { font-size: 10px; fill: #333; }
.axis { stroke: #333; stroke-width: 1; } .grid { stroke: #eee; stroke-width: 1; }
code { font-size: 12px; word-break: break-all; }
</style></head><body>
)";
}

std::string header_section(const std::vector<ReportSource>& sources) {
  std::string body =
      "<table><tr><th>file</th><th>model</th><th>device</th><th>workload</th>"
      "<th>requests</th><th>commit</th><th>date</th><th>command</th></tr>\n";
  for (const ReportSource& s : sources) {
    const BenchResults& r = s.results;
    body += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td><code>{}</code></td></tr>\n",
        escape_html(s.name), escape_html(r.model), escape_html(r.device),
        escape_html(r.workload.name), r.workload.num_requests, escape_html(r.git_commit),
        escape_html(r.date), escape_html(r.command));
  }
  body += "</table>\n";
  return "<h1>roseinfer benchmark report</h1>\n" + body;
}

std::string sweep_section(const std::vector<ReportSource>& sources) {
  const std::string charts = sweep_charts(sources);
  if (charts.empty()) return "";
  return section(
      "sweep", "Throughput against latency (bench --sweep)",
      "One dot per sweep point, labelled with its swept request rate or concurrency: x is the "
      "output throughput the point achieved, y its median latency (solid) and its highest chosen "
      "percentile (dashed). Where the curve turns up, the engine is saturated: more offered load "
      "buys latency, not throughput. The red dashed line is the --slo bound; a red ring marks the "
      "highest point at which every request met every bound. Sweep files are overlaid on one "
      "scale, one colour each.",
      charts);
}

std::string percentile_cell(const Distribution& d, double q) {
  for (const auto& [pq, value] : d.percentiles) {
    if (pq == q) return format_number(value);
  }
  return q == 50.0 ? format_number(d.median) : "-";
}

std::string summary_section(const std::vector<ReportSource>& sources) {
  std::string body =
      "<table><tr><th>file</th><th>run</th><th>completed</th><th>failed</th><th>duration "
      "(s)</th><th>requests/s</th><th>output tok/s</th><th>goodput (req/s)</th><th>TTFT p50 "
      "(ms)</th><th>TTFT p99 (ms)</th><th>TPOT p50 (ms)</th><th>TPOT p99 (ms)</th><th>cache hit "
      "rate</th><th>KV peak</th><th>preemptions</th></tr>\n";
  for (const ReportSource& s : sources) {
    const std::vector<SweepPoint> points = sweep_points(s.results);
    for (size_t i = 0; i < s.results.runs.size(); ++i) {
      const BenchReport& run = s.results.runs[i];
      // A sweep's runs share mode and cache setting: the swept value tells them apart.
      const std::string label =
          points.empty() ? run_label(run)
                         : fmt::format("{}, {} {}", run_label(run), s.results.sweep_parameter,
                                       sweep_value_label(points[i].value));
      body += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} of {} "
          "({})</td><td>{}</td></tr>\n",
          escape_html(s.name), escape_html(label), run.completed, run.failed,
          format_number(run.duration_s), format_number(run.request_throughput),
          format_number(run.output_throughput),
          run.goodput ? format_number(*run.goodput) : std::string("-"),
          percentile_cell(run.ttft_ms, 50), percentile_cell(run.ttft_ms, 99),
          percentile_cell(run.tpot_ms, 50), percentile_cell(run.tpot_ms, 99),
          format_percent(run.cache.hit_rate()), format_count(run.kv.peak_used_blocks),
          format_count(run.kv.total_blocks),
          format_percent(run.kv.total_blocks ? double(run.kv.peak_used_blocks) / run.kv.total_blocks
                                             : 0.0),
          run.kv.preemptions);
    }
  }
  return section("summary", "Summary", "Headline numbers of every run of every file.",
                 body + "</table>\n");
}

// The CDF a run draws for a metric: every request when the file has --save-detailed arrays,
// else the summary quantiles.
struct CdfCurve {
  std::vector<std::pair<double, double>> points;
  bool from_detail = false;
};

CdfCurve cdf_curve(const BenchReport& run, LatencyMetric metric) {
  if (std::optional<std::vector<double>> values = detail_values_ms(run, metric)) {
    if (!values->empty()) return {sampled_cdf(std::move(*values), kMaxCdfPoints), true};
  }
  return {summary_cdf(latency_distribution(run, metric)), false};
}

std::string cdf_chart(const ReportSource& source, size_t source_index, LatencyMetric metric,
                      double x_max) {
  const std::string name = latency_metric_name(metric);
  SvgPlot plot(fmt::format("cdf-{}-{}", name, source_index), name + " distribution (CDF)",
               {name + " (ms)", 0.0, x_max}, {"fraction of requests", 0.0, 1.0});
  plot.legend(run_legend(source.results));
  bool all_detail = true;
  bool label_markers = true;  // every run has the same percentiles: name them once
  for (const BenchReport& run : source.results.runs) {
    const CdfCurve curve = cdf_curve(run, metric);
    all_detail = all_detail && curve.from_detail;
    plot.line(curve.points, style_of(run));
    for (const auto& [q, value] : latency_distribution(run, metric).percentiles) {
      if (!std::isfinite(value)) continue;
      plot.marker(value, q / 100.0, style_of(run).color, label_markers ? percentile_key(q) : "");
    }
    label_markers = false;
  }
  if (!all_detail) plot.note(x_max * 0.55, 0.06, "from summary percentiles (no --save-detailed)");
  return plot.render();
}

std::string latency_section(const std::vector<ReportSource>& sources) {
  std::string body;
  for (LatencyMetric metric : kLatencyMetrics) {
    const double x_max =
        nice_range(0.0, max_over_runs(sources,
                                      [&](const BenchReport& run) {
                                        const CdfCurve curve = cdf_curve(run, metric);
                                        return curve.points.empty() ? 0.0
                                                                    : curve.points.back().first;
                                      }))
            .second;
    body += "<div class=\"row\">\n";
    for (size_t f = 0; f < sources.size(); ++f) {
      body += column(sources[f].name, cdf_chart(sources[f], f, metric, x_max));
    }
    body += "</div>\n";
  }
  return section("latency", "Latency distributions",
                 "Cumulative distributions of TTFT, TPOT, ITL and end-to-end latency; dots mark "
                 "the chosen percentiles. Colour is the scheduler mode, a dashed line the prefix "
                 "cache off. Charts in a row share their scale.",
                 body);
}

// Horizontal bars, one group per run, `values` giving one bar per (label, colour) of a run.
using BarValues = std::function<std::vector<double>(const BenchReport&)>;

std::string bar_chart(const std::string& id, const std::string& title, const AxisSpec& x,
                      const BenchResults& results, const std::vector<LegendEntry>& bars,
                      const BarValues& values) {
  const int rows = int(results.runs.size());
  SvgPlot plot(id, title, x, {"", -0.5, std::max(0.5, rows - 0.5)}, 560,
               std::max(150, 90 + 34 * rows));
  std::vector<std::pair<double, std::string>> categories;
  for (int r = 0; r < rows; ++r)
    categories.emplace_back(rows - 1 - r, run_label(results.runs[size_t(r)]));
  plot.y_categories(std::move(categories));
  plot.legend(bars);
  const double band = 0.8 / double(std::max<size_t>(1, bars.size()));
  for (int r = 0; r < rows; ++r) {
    const BenchReport& run = results.runs[size_t(r)];
    const double center = rows - 1 - r;  // first run on top
    const std::vector<double> v = values(run);
    for (size_t b = 0; b < bars.size() && b < v.size(); ++b) {
      const double top = center + 0.4 - band * double(b);
      plot.rect(0.0, top, v[b], top - band * 0.9, bars[b].style.color,
                fmt::format("{}: {}", bars[b].label, format_number(v[b])));
      plot.note(std::min(v[b], x.max * 0.8), top - band * 0.45, format_number(v[b]));
    }
  }
  return plot.render();
}

std::string throughput_section(const std::vector<ReportSource>& sources) {
  const double tok_max =
      nice_range(0.0,
                 max_over_runs(sources, [](const BenchReport& r) { return r.output_throughput; }))
          .second;
  const double req_max =
      nice_range(0.0,
                 max_over_runs(sources, [](const BenchReport& r) { return r.request_throughput; }))
          .second;
  std::string body = "<div class=\"row\">\n";
  for (size_t f = 0; f < sources.size(); ++f) {
    const BenchResults& results = sources[f].results;
    std::string charts =
        bar_chart(fmt::format("throughput-{}", f), "Output throughput",
                  {"output tokens/s", 0.0, tok_max}, results, {{"output tok/s", {"#1f77b4"}, true}},
                  [](const BenchReport& r) { return std::vector<double>{r.output_throughput}; });
    charts += bar_chart(
        fmt::format("requests-{}", f), "Request throughput and goodput",
        {"requests/s", 0.0, req_max}, results,
        {{"requests/s", {"#2ca02c"}, true}, {"goodput (req/s, with --slo)", {"#98df8a"}, true}},
        [](const BenchReport& r) {
          return std::vector<double>{r.request_throughput, r.goodput.value_or(0.0)};
        });
    charts += bar_chart(
        fmt::format("cache-kv-{}", f), "Prefix cache and KV", {"percent", 0.0, 100.0}, results,
        {{"prefix cache hit rate (%)", {"#9467bd"}, true},
         {"KV peak usage (%)", {"#8c564b"}, true}},
        [](const BenchReport& r) {
          const double kv =
              r.kv.total_blocks ? 100.0 * r.kv.peak_used_blocks / r.kv.total_blocks : 0.0;
          return std::vector<double>{100.0 * r.cache.hit_rate(), kv};
        });
    body += column(sources[f].name, charts);
  }
  return section("throughput", "Throughput, prefix cache and KV",
                 "Throughput per run; goodput counts requests meeting every --slo bound (0 "
                 "without --slo). Hit rate: prompt tokens served from cached blocks; KV peak: "
                 "blocks in use at the fullest moment over the pool.",
                 body + "</div>\n");
}

std::string timeline_chart(const BenchReport& run, const std::string& id, double x_max) {
  const std::vector<RequestPhases> phases = request_phases(run);
  const size_t stride = (phases.size() + kMaxTimelineRows - 1) / kMaxTimelineRows;
  const size_t rows = stride ? (phases.size() + stride - 1) / stride : 0;
  const std::string y_label =
      stride > 1 ? fmt::format("request (every {}th, by arrival)", stride) : "request (by arrival)";
  SvgPlot plot(id, "Request timeline: " + run_label(run), {"time since start (s)", 0.0, x_max},
               {y_label, 0.0, double(std::max<size_t>(rows, 1))}, 560, 340);
  plot.legend({{"queued", {kQueueColor}, true},
               {"prefill (to first token)", {kPrefillColor}, true},
               {"decode", {kDecodeColor}, true}});
  for (size_t row = 0; row < rows; ++row) {
    const RequestPhases& p = phases[row * stride];
    const double top = double(rows - row), bottom = top - 0.8;  // first arrival on top
    const std::string tip = fmt::format("request {}", p.index);
    if (p.scheduled > p.arrival) plot.rect(p.arrival, top, p.scheduled, bottom, kQueueColor, tip);
    plot.rect(p.scheduled, top, p.first_token, bottom, kPrefillColor, tip);
    plot.rect(p.first_token, top, p.finish, bottom, kDecodeColor, tip);
  }
  return plot.render();
}

bool any_run(const std::vector<ReportSource>& sources,
             const std::function<bool(const BenchReport&)>& f) {
  return max_over_runs(sources, [&](const BenchReport& r) { return f(r) ? 1.0 : 0.0; }) > 0.0;
}

std::string timeline_section(const std::vector<ReportSource>& sources) {
  const std::string intro =
      "Each bar is a request: grey while it waits to be scheduled, orange from its first "
      "scheduled step to its first token, blue while it decodes. All timelines share the time "
      "axis, so the modes' schedules of the same requests line up.";
  if (!any_run(sources, [](const BenchReport& r) { return !request_phases(r).empty(); })) {
    return section("timeline", "Request timeline", intro,
                   "<p class=\"missing\">No per-request detail in these files: run bench with "
                   "--json FILE --save-detailed to draw the timeline.</p>\n");
  }
  const double x_max =
      nice_range(0.0, max_over_runs(sources,
                                    [](const BenchReport& r) {
                                      double end = 0.0;
                                      for (const RequestPhases& p : request_phases(r)) {
                                        end = std::max(end, p.finish);
                                      }
                                      return end;
                                    }))
          .second;
  std::string body = "<div class=\"row\">\n";
  for (size_t f = 0; f < sources.size(); ++f) {
    std::string charts;
    for (size_t r = 0; r < sources[f].results.runs.size(); ++r) {
      charts +=
          timeline_chart(sources[f].results.runs[r], fmt::format("timeline-{}-{}", f, r), x_max);
    }
    body += column(sources[f].name, charts);
  }
  return section("timeline", "Request timeline", intro, body + "</div>\n");
}

double series_end(const BenchReport& run) {
  const std::vector<double>& t = run.step_series.time;
  return t.empty() ? 0.0 : *std::max_element(t.begin(), t.end());
}

double series_peak(const std::vector<int>& values) {
  return values.empty() ? 0.0 : double(*std::max_element(values.begin(), values.end()));
}

std::string step_series_charts(const BenchReport& run, const std::string& id, double t_max,
                               double kv_max, double count_max) {
  const StepSeries& s = run.step_series;
  SvgPlot kv(id + "-kv", "KV blocks in use: " + run_label(run), {"time since start (s)", 0, t_max},
             {"KV blocks in use", 0.0, kv_max});
  kv.legend(
      {{fmt::format("blocks in use (pool: {})", format_count(run.kv.total_blocks)), {"#8c564b"}}});
  kv.line(binned_max(s.time, s.kv_used_blocks, t_max, kMaxSeriesBins), {"#8c564b"});
  SvgPlot queue(id + "-queue", "Running and waiting requests: " + run_label(run),
                {"time since start (s)", 0, t_max}, {"requests", 0.0, count_max});
  queue.legend({{"running", {"#1f77b4"}}, {"waiting", {"#d62728", true}}});
  queue.line(binned_max(s.time, s.running, t_max, kMaxSeriesBins), {"#1f77b4"});
  queue.line(binned_max(s.time, s.waiting, t_max, kMaxSeriesBins), {"#d62728", true});
  return kv.render() + queue.render();
}

std::string step_series_section(const std::vector<ReportSource>& sources) {
  const std::string intro =
      "Sampled after every engine step (the largest value in each time bin when there are many "
      "steps). Charts share their scales.";
  if (!any_run(sources, [](const BenchReport& r) { return !r.step_series.time.empty(); })) {
    return section("kv-over-time", "KV and queues over time", intro,
                   "<p class=\"missing\">No per-step samples in these files: run bench with "
                   "--json FILE --save-detailed to draw them.</p>\n");
  }
  const double t_max = nice_range(0.0, max_over_runs(sources, series_end)).second;
  const double kv_max =
      nice_range(0.0, max_over_runs(sources,
                                    [](const BenchReport& r) {
                                      return series_peak(r.step_series.kv_used_blocks);
                                    }))
          .second;
  const double count_max =
      nice_range(0.0, max_over_runs(sources,
                                    [](const BenchReport& r) {
                                      return std::max(series_peak(r.step_series.running),
                                                      series_peak(r.step_series.waiting));
                                    }))
          .second;
  std::string body = "<div class=\"row\">\n";
  for (size_t f = 0; f < sources.size(); ++f) {
    std::string charts;
    for (size_t r = 0; r < sources[f].results.runs.size(); ++r) {
      const BenchReport& run = sources[f].results.runs[r];
      if (run.step_series.time.empty()) continue;
      charts += step_series_charts(run, fmt::format("steps-{}-{}", f, r), t_max, kv_max, count_max);
    }
    body += column(sources[f].name, charts);
  }
  return section("kv-over-time", "KV and queues over time", intro, body + "</div>\n");
}

// The per-replica keys drawn when present (the cluster's per_replica section); otherwise the
// first numeric keys the file has.
std::vector<std::string> replica_keys(const std::vector<std::map<std::string, double>>& replicas) {
  static const char* const kPreferred[] = {"completed",         "num_requests",
                                           "output_throughput", "prefix_cache_hit_rate",
                                           "kv_peak_usage",     "preemptions"};
  std::vector<std::string> keys;
  for (const char* key : kPreferred) {
    if (replicas.front().count(key)) keys.emplace_back(key);
  }
  for (const auto& [key, value] : replicas.front()) {
    if (keys.size() >= 3) break;
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  if (keys.size() > 4) keys.resize(4);
  return keys;
}

std::string replica_chart(const std::vector<std::map<std::string, double>>& replicas,
                          const std::string& key, const std::string& id, const std::string& title) {
  double peak = 0.0;
  for (const auto& values : replicas) {
    const auto it = values.find(key);
    if (it != values.end() && std::isfinite(it->second)) peak = std::max(peak, it->second);
  }
  const int rows = int(replicas.size());
  SvgPlot plot(id, title, {key, 0.0, nice_range(0.0, peak).second}, {"", -0.5, rows - 0.5}, 420,
               std::max(150, 90 + 26 * rows));
  std::vector<std::pair<double, std::string>> categories;
  for (int r = 0; r < rows; ++r)
    categories.emplace_back(rows - 1 - r, fmt::format("replica {}", r));
  plot.y_categories(std::move(categories));
  plot.legend({{key, {"#17becf"}, true}});
  for (int r = 0; r < rows; ++r) {
    const double center = rows - 1 - r;
    const auto it = replicas[size_t(r)].find(key);
    if (it == replicas[size_t(r)].end() || !std::isfinite(it->second)) continue;
    plot.rect(0.0, center + 0.35, it->second, center - 0.35, "#17becf");
    plot.note(it->second * 0.98, center - 0.1, format_number(it->second));
  }
  return plot.render();
}

std::string replica_section(const std::vector<ReportSource>& sources) {
  std::string body;
  for (size_t f = 0; f < sources.size(); ++f) {
    const BenchResults& results = sources[f].results;
    for (size_t r = 0; r < results.run_replicas.size() && r < results.runs.size(); ++r) {
      const auto& replicas = results.run_replicas[r];
      if (replicas.empty() || replicas.front().empty()) continue;
      std::string charts;
      for (const std::string& key : replica_keys(replicas)) {
        charts += replica_chart(replicas, key, fmt::format("replica-{}-{}-{}", f, r, key),
                                key + " per replica");
      }
      body += column(sources[f].name + ": " + run_label(results.runs[r]),
                     "<div class=\"row\">" + charts + "</div>");
    }
  }
  if (body.empty()) return "";
  return section("replicas", "Per-replica load",
                 "Cluster runs: each replica's share of the work, from the per_replica section.",
                 "<div class=\"row\">\n" + body + "</div>\n");
}

}  // namespace

std::string render_html_report(const std::vector<ReportSource>& sources) {
  std::string page = page_head();
  page += header_section(sources);
  page += summary_section(sources);
  page += sweep_section(sources);
  page += latency_section(sources);
  page += throughput_section(sources);
  page += timeline_section(sources);
  page += step_series_section(sources);
  page += replica_section(sources);
  page +=
      "<p class=\"intro\">Written by roseinfer report; self-contained (no scripts, fonts or "
      "images fetched).</p>\n</body></html>\n";
  return page;
}

void write_html_report(const std::vector<std::filesystem::path>& inputs,
                       const std::filesystem::path& output) {
  std::vector<ReportSource> sources;
  for (const std::filesystem::path& input : inputs) {
    sources.push_back({input.filename().string(), read_results_json(input)});
  }
  write_file_atomically(output, render_html_report(sources));
}

}  // namespace rose::report
