// The HTML report: drawn from committed GPU results and from synthetic detailed results; every
// chart present, axes from the data, nothing external, bounded size at 5,000 requests.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "engine/metrics/results_json.h"
#include "engine/report/html_report.h"
#include "engine/report/report_data.h"
#include "engine/report/svg_plot.h"
#include "engine/report/sweep_chart.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using rose::report::ReportSource;

namespace {

const fs::path kGpuResults = "results/2026-11-21-h100";

ReportSource committed(const std::string& file) {
  return {file, rose::read_results_json(kGpuResults / file)};
}

// The value of attribute `name` on the <svg> whose data-chart is `chart`; NaN when absent.
double chart_attribute(const std::string& html, const std::string& chart, const std::string& name) {
  const size_t at = html.find("data-chart=\"" + chart + "\"");
  if (at == std::string::npos) return std::nan("");
  const size_t end = html.find('>', at);
  const std::string tag = html.substr(at, end - at);
  const std::string key = " " + name + "=\"";
  const size_t value = tag.find(key);
  if (value == std::string::npos) return std::nan("");
  const size_t begin = value + key.size();
  return std::stod(tag.substr(begin, tag.find('"', begin) - begin));
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

void check_self_contained(const std::string& html) {
  for (const char* external :
       {"http://", "https://", "<script", "src=", "@import", "url(", "<link"}) {
    INFO(external);
    CHECK(html.find(external) == std::string::npos);
  }
}

// A run of n requests with detail and step samples: request i arrives at i * gap, waits `queue`,
// prefills for 20 ms, then decodes 8 tokens 5 ms apart.
rose::BenchReport detailed_run(const std::string& mode, int n, double gap, double queue) {
  rose::BenchReport run;
  run.mode = mode;
  run.completed = n;
  rose::RequestDetail& d = run.detail;
  std::vector<double> ttft_ms;
  for (int i = 0; i < n; ++i) {
    d.input_lens.push_back(100);
    d.output_lens.push_back(8);
    d.cached_tokens.push_back(0);
    d.arrivals.push_back(i * gap);
    d.first_scheduled.push_back(i * gap + queue);
    d.ttfts.push_back(queue + 0.02);
    d.itls.push_back(std::vector<double>(7, 0.005));
    d.e2els.push_back(queue + 0.02 + 7 * 0.005);
    ttft_ms.push_back((queue + 0.02) * 1000);
  }
  run.ttft_ms = rose::summarize(ttft_ms, {50, 99});
  run.e2el_ms = rose::summarize({(queue + 0.055) * 1000}, {50, 99});
  run.kv = {16, 1000, 600, 0};
  for (int s = 0; s < 3 * n; ++s) {
    run.step_series.time.push_back(s * gap / 3);
    run.step_series.kv_used_blocks.push_back(s == n ? 600 : 100 + s % 50);
    run.step_series.running.push_back(s % 30);
    run.step_series.waiting.push_back(s % 7);
  }
  return run;
}

// A request-rate sweep over `rates`: throughput saturates at `capacity` tok/s while TTFT climbs;
// every point up to `slo_rate` has goodput equal to throughput (meets the SLO), the rest half.
rose::BenchResults sweep_results(const std::vector<double>& rates, double capacity,
                                 double slo_rate) {
  rose::BenchResults results;
  results.workload.fingerprint = "00ff";
  results.sweep_parameter = "request_rate";
  results.sweep_values = rates;
  results.config.emplace_back("slo", std::string("ttft=500,tpot=40"));
  for (double rate : rates) {
    rose::BenchReport run;
    run.mode = "online";
    run.completed = 100;
    const double load = std::isinf(rate) ? 1.0 : std::min(1.0, rate / 16.0);
    run.output_throughput = capacity * load;
    run.request_throughput = run.output_throughput / 100.0;
    run.goodput = rate <= slo_rate ? run.request_throughput : run.request_throughput / 2;
    for (rose::Distribution* d : {&run.ttft_ms, &run.tpot_ms, &run.itl_ms, &run.e2el_ms}) {
      d->median = 20.0 + 800.0 * load * load;
      d->percentiles = {{50, d->median}, {99, d->median * 1.5}};
      d->max = d->median * 1.6;
    }
    results.runs.push_back(run);
  }
  return results;
}

// The (x, y) pixel pairs of the polyline whose data-series is `series`, or -1 when absent.
int series_points(const std::string& html, const std::string& series) {
  const size_t at = html.find("data-series=\"" + series + "\"");
  if (at == std::string::npos) return -1;
  const size_t begin = html.find("points=\"", at) + 8;
  const std::string points = html.substr(begin, html.find('"', begin) - begin);
  return int(count_of(points, ","));
}

}  // namespace

TEST_CASE("nice ticks and ranges are round and cover the data") {
  CHECK(rose::report::nice_ticks(0, 100, 5) == std::vector<double>{0, 20, 40, 60, 80, 100});
  const auto [lo, hi] = rose::report::nice_range(0, 87.3);
  CHECK(lo == 0);
  CHECK(hi == doctest::Approx(100));
  CHECK(rose::report::nice_range(3, 3).second > 3);
  CHECK(rose::report::escape_html("<a href=\"x\">&'") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST_CASE("a CDF of 5,000 values is drawn with a bounded number of points") {
  std::vector<double> values;
  for (int i = 0; i < 5000; ++i) values.push_back(double((i * 7919) % 5000));
  const auto cdf = rose::report::sampled_cdf(values, 200);
  REQUIRE(cdf.size() == 200);
  CHECK(cdf.front().first == 0.0);
  CHECK(cdf.back().first == 4999.0);
  CHECK(cdf.back().second == 1.0);
  for (size_t i = 1; i < cdf.size(); ++i) CHECK(cdf[i].first >= cdf[i - 1].first);
}

TEST_CASE("binned step series keep each bin's peak") {
  std::vector<double> times;
  std::vector<int> values;
  for (int i = 0; i < 10000; ++i) {
    times.push_back(i * 0.001);
    values.push_back(i == 5000 ? 999 : 1);
  }
  const auto points = rose::report::binned_max(times, values, 10.0, 100);
  CHECK(points.size() == 100);
  int peak = 0;
  for (const auto& [t, v] : points) peak = std::max(peak, int(v));
  CHECK(peak == 999);
}

TEST_CASE(
    "the report of committed GPU results has every chart, axes from the data, nothing "
    "external") {
  const std::vector<ReportSource> sources = {committed("seed000.json"),
                                             committed("serve_rate_8.json")};
  const std::string html = rose::report::render_html_report(sources);
  check_self_contained(html);
  for (int f = 0; f < 2; ++f) {
    for (const char* metric : {"TTFT", "TPOT", "ITL", "E2E"}) {
      INFO(metric, f);
      CHECK(rose::test::contains(
          html, "data-chart=\"cdf-" + std::string(metric) + "-" + std::to_string(f) + "\""));
    }
    for (const char* chart : {"throughput-", "requests-", "cache-kv-"}) {
      CHECK(rose::test::contains(html,
                                 "data-chart=\"" + std::string(chart) + std::to_string(f) + "\""));
    }
  }
  // Without --save-detailed there is no timeline, and the page says how to get one.
  CHECK(rose::test::contains(html, "--save-detailed to draw the timeline"));
  // Side by side on one scale, covering the slowest request of either file, not far beyond it.
  double e2e_max = 0;
  for (const ReportSource& s : sources) {
    for (const rose::BenchReport& run : s.results.runs)
      e2e_max = std::max(e2e_max, run.e2el_ms.max);
  }
  const double x_max = chart_attribute(html, "cdf-E2E-0", "data-x-max");
  CHECK(x_max == chart_attribute(html, "cdf-E2E-1", "data-x-max"));
  CHECK(x_max >= e2e_max);
  CHECK(x_max < 2.5 * e2e_max);
  // Throughput axis from the data as well.
  double tok_max = 0;
  for (const ReportSource& s : sources) {
    for (const rose::BenchReport& run : s.results.runs) {
      tok_max = std::max(tok_max, run.output_throughput);
    }
  }
  const double tok_axis = chart_attribute(html, "throughput-1", "data-x-max");
  CHECK(tok_axis >= tok_max);
  CHECK(tok_axis < 2.5 * tok_max);
  // Every chart has axis labels with units and a legend.
  CHECK(count_of(html, "class=\"label\"") == 2 * count_of(html, "<svg class=\"chart\""));
  CHECK(count_of(html, "class=\"legend\"") >= count_of(html, "<svg class=\"chart\""));
}

TEST_CASE("detailed results draw timelines and step series, bounded at 5,000 requests") {
  rose::BenchResults small, large;
  small.runs = {detailed_run("naive", 40, 0.0, 0.0), detailed_run("online", 40, 0.05, 0.002)};
  large.runs = {detailed_run("offline", 5000, 0.001, 0.01)};
  // The naive run's requests all arrive at 0 and wait in turn.
  for (int i = 0; i < 40; ++i) small.runs[0].detail.first_scheduled[size_t(i)] = i * 0.06;
  const std::string html =
      rose::report::render_html_report({{"small.json", small}, {"large.json", large}});
  check_self_contained(html);
  for (const char* chart : {"timeline-0-0", "timeline-0-1", "timeline-1-0", "steps-0-0-kv",
                            "steps-0-1-queue", "steps-1-0-kv", "steps-1-0-queue"}) {
    INFO(chart);
    CHECK(rose::test::contains(html, "data-chart=\"" + std::string(chart) + "\""));
  }
  CHECK(rose::test::contains(html, "every 25th"));
  // One time axis for every timeline, reaching the last finish (5 s + 65 ms in the large run).
  const double t_max = chart_attribute(html, "timeline-0-0", "data-x-max");
  CHECK(t_max == chart_attribute(html, "timeline-1-0", "data-x-max"));
  CHECK(t_max >= 5.0);
  CHECK(t_max <= 10.0);
  CHECK(chart_attribute(html, "steps-1-0-kv", "data-y-max") >= 600);
  // Bounded: 200 timeline rows x 3 phases, 400 bins per series, whatever the request count.
  CHECK(count_of(html, "<rect") < 3000);
  CHECK(html.size() < 1'500'000);
}

TEST_CASE("per_replica sections are drawn when present") {
  const std::string json = R"({"schema": "roseinfer-bench", "schema_version": 1,
    "workload": {"name": "nano256", "fingerprint": "00ff"},
    "runs": [{"mode": "offline", "prefix_cache": true, "completed": 256, "output_throughput": 900,
              "per_replica": [{"completed": 120, "output_throughput": 420},
                              {"completed": 136, "output_throughput": 480}]}]})";
  const rose::BenchResults results = rose::parse_results_json(json, "cluster.json");
  REQUIRE(results.run_replicas.size() == 1);
  CHECK(results.run_replicas[0].size() == 2);
  const std::string html = rose::report::render_html_report({{"cluster.json", results}});
  CHECK(rose::test::contains(html, "data-chart=\"replica-0-0-completed\""));
  CHECK(rose::test::contains(html, "data-chart=\"replica-0-0-output_throughput\""));
  CHECK(chart_attribute(html, "replica-0-0-output_throughput", "data-x-max") >= 480);
  // Single-engine results have no such section.
  CHECK_FALSE(rose::test::contains(rose::report::render_html_report({committed("nano256.json")}),
                                   "Per-replica load"));
}

TEST_CASE("timeline and step detail survive the results file") {
  rose::BenchResults results;
  results.workload.fingerprint = "00ff";
  results.runs = {detailed_run("online", 5, 0.1, 0.01)};
  const rose::BenchResults back =
      rose::parse_results_json(rose::results_to_json(results, true), "detail.json");
  const rose::BenchReport& run = back.runs.at(0);
  CHECK(run.detail.arrivals == results.runs[0].detail.arrivals);
  CHECK(run.detail.first_scheduled == results.runs[0].detail.first_scheduled);
  CHECK(run.step_series.time == results.runs[0].step_series.time);
  CHECK(run.step_series.kv_used_blocks == results.runs[0].step_series.kv_used_blocks);
  CHECK(run.step_series.waiting == results.runs[0].step_series.waiting);
  CHECK(rose::report::request_phases(run).size() == 5);
}

TEST_CASE("a bad results file is an error naming the file and field, not a crash") {
  rose::test::TempDir dir("report");
  const fs::path bad = dir.path / "bad.json";
  std::ofstream(bad) << R"({"schema": "roseinfer-bench", "schema_version": 1,
    "workload": {"fingerprint": "00"}, "runs": [{"mode": "offline", "prefix_cache": true,
    "step_times": [0.1, 0.2], "step_kv_used_blocks": [1], "step_running": [1, 1],
    "step_waiting": [0, 0]}]})";
  const std::string message =
      rose::test::error_of([&] { rose::report::write_html_report({bad}, dir.path / "r.html"); });
  CHECK(rose::test::contains(message, "bad.json"));
  CHECK(rose::test::contains(message, "step_"));
  CHECK_FALSE(fs::exists(dir.path / "r.html"));
  std::ofstream(dir.path / "junk.json") << "{not json";
  CHECK(rose::test::contains(rose::test::error_of([&] {
                               rose::report::write_html_report({dir.path / "junk.json"},
                                                               dir.path / "r.html");
                             }),
                             "junk.json: not valid JSON"));
  // Detail arrays of mismatched lengths fall back to the summary instead of reading past an end.
  rose::BenchResults odd;
  odd.runs = {detailed_run("offline", 10, 0.01, 0.0)};
  odd.runs[0].detail.ttfts.pop_back();
  odd.runs[0].detail.first_scheduled.pop_back();
  const std::string html = rose::report::render_html_report({{"odd.json", odd}});
  CHECK(rose::test::contains(html, "from summary percentiles"));
  CHECK(rose::test::contains(html, "--save-detailed to draw the timeline"));
}

TEST_CASE("a sweep draws the throughput-latency curve with its SLO and best point") {
  const std::vector<double> rates = {1, 2, 4, 8, 16, std::numeric_limits<double>::infinity()};
  rose::BenchResults on = sweep_results(rates, 3000, 8);
  // Through the file and back, so the sweep section and the --slo config survive it.
  on = rose::parse_results_json(rose::results_to_json(on, false), "on.json");
  const rose::BenchResults off = sweep_results({2, 8, 32}, 1800, 2);
  CHECK(rose::report::highest_meeting_slo(on) == 8.0);
  CHECK(rose::report::slo_of(on).ttft_ms == 500.0);
  CHECK_FALSE(rose::report::slo_of(on).e2el_ms.has_value());
  const std::string html = rose::report::render_html_report({{"on.json", on}, {"off.json", off}});
  check_self_contained(html);
  for (const char* metric : {"TTFT", "TPOT", "ITL", "E2E"}) {
    INFO(metric);
    const std::string chart = "sweep-" + std::string(metric);
    CHECK(count_of(html, "data-chart=\"" + chart + "\"") == 1);  // overlaid, not one per file
    // One point per sweep point, for the median and the p99 of each file.
    CHECK(series_points(html, "on.json p50") == 6);
    CHECK(series_points(html, "on.json p99") == 6);
    CHECK(series_points(html, "off.json p50") == 3);
    // The x axis covers the highest throughput (3,000 tok/s) and not far beyond; y the slowest
    // p99 (820 x 1.5 ms).
    const double x_max = chart_attribute(html, chart, "data-x-max");
    CHECK(x_max >= 3000);
    CHECK(x_max < 2 * 3000);
    const double y_max = chart_attribute(html, chart, "data-y-max");
    CHECK(y_max >= 1230);
    CHECK(y_max < 2.5 * 1230);
  }
  // The SLO lines where --slo has a bound, and the best rate ringed once per chart.
  CHECK(rose::test::contains(html, "data-series=\"SLO TTFT\""));
  CHECK(rose::test::contains(html, "data-series=\"SLO TPOT\""));
  CHECK_FALSE(rose::test::contains(html, "data-series=\"SLO ITL\""));
  CHECK(count_of(html, "highest request_rate meeting the SLO: 8<") == 4);
  CHECK(count_of(html, "highest request_rate meeting the SLO: 2<") == 4);
  CHECK(rose::test::contains(html, "online, cache on, request_rate inf"));
  // Results without a sweep draw no such chart.
  CHECK_FALSE(rose::test::contains(rose::report::render_html_report({committed("seed000.json")}),
                                   "data-chart=\"sweep-"));
}
