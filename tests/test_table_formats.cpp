// --format table|md|csv: the same tables as GitHub markdown and RFC 4180 CSV.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engine/metrics/report_table.h"
#include "tests/test_util.h"

namespace {

rose::BenchReport sample_run(const std::string& mode) {
  rose::BenchReport r;
  r.mode = mode;
  r.completed = 14;
  r.duration_s = 0.298;
  r.output_throughput = 985.7;
  r.total_token_throughput = 4295;
  r.ttft_ms.percentiles = {{50, 194.3}, {99, 194.3}};
  r.tpot_ms.percentiles = {{50, 4.3}, {99, 4.6}};
  r.itl_ms.percentiles = r.e2el_ms.percentiles = r.queue_ms.percentiles = {{50, 1}, {99, 2}};
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("table formats parse by name") {
  CHECK(rose::parse_table_format("table", "--format") == rose::TableFormat::kText);
  CHECK(rose::parse_table_format("md", "--format") == rose::TableFormat::kMarkdown);
  CHECK(rose::parse_table_format("csv", "--format") == rose::TableFormat::kCsv);
  CHECK(rose::test::contains(
      rose::test::error_of([] { rose::parse_table_format("xls", "--format"); }),
      "--format: unknown table format 'xls'"));
}

TEST_CASE("markdown tables have a header separator and escape pipes") {
  rose::TextTable table(1);
  table.add_row({"metric", "value"});
  table.add_row({"a|b", "1,234"});
  CHECK(table.render_as(rose::TableFormat::kMarkdown) ==
        "| metric | value |\n|---|---:|\n| a\\|b | 1,234 |\n");
  const std::string report =
      rose::render_report_table(sample_run("offline"), rose::TableFormat::kMarkdown);
  CHECK(rose::test::contains(report, "### offline, prefix cache on: 14 completed"));
  CHECK(rose::test::contains(report, "| latency (ms) | mean | p50 | p99 | max |"));
  CHECK(rose::test::contains(report, "| TTFT | 0 | 194.3 | 194.3 | 0 |"));
  CHECK(rose::test::contains(report, "| figure | value |"));
  const std::string summary = rose::render_summary_table(
      {sample_run("offline"), sample_run("online")}, rose::TableFormat::kMarkdown);
  CHECK(rose::test::contains(summary, "|  | offline, cache on | online, cache on |"));
  CHECK(rose::test::contains(summary, "| output tok/s | 985.7 | 985.7 |"));
}

TEST_CASE("CSV quotes cells with commas and quotes") {
  rose::TextTable table(1);
  table.add_row({"metric", "value"});
  table.add_row({"say \"hi\"", "4,295"});
  CHECK(table.render_as(rose::TableFormat::kCsv) == "metric,value\n\"say \"\"hi\"\"\",\"4,295\"\n");
  const std::string report =
      rose::render_report_table(sample_run("naive"), rose::TableFormat::kCsv);
  CHECK(rose::test::contains(report, "latency (ms),mean,p50,p99,max\nTTFT,0,194.3,194.3,0\n"));
  CHECK(rose::test::contains(report, "total tok/s,\"4,295\""));
  // The aligned text is unchanged.
  CHECK(rose::test::contains(rose::render_report_table(sample_run("naive")),
                             "== naive, prefix cache on: 14 completed, 0 failed, 0.298 s =="));
}

TEST_CASE("bench --format csv is one table: a header row, then a row per run") {
  rose::BenchReport cold = sample_run("offline"), slow = sample_run("online");
  slow.prefix_cache = false;
  slow.request_throughput = 1.0;
  slow.goodput = 0.5;  // only this run has an SLO figure (half its requests met it)
  const std::string csv = rose::render_runs_csv({cold, slow});
  const std::vector<std::string> lines = lines_of(csv);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("mode,prefix_cache,repeats,meets_slo,completed,failed,", 0) == 0);
  CHECK(rose::test::contains(lines[0], ",output_throughput,"));
  CHECK(rose::test::contains(lines[0], ",request_goodput"));
  // Plain numbers, no thousands separators or quotes.
  CHECK(rose::test::contains(lines[1], "offline,true,1,false,14,0,"));
  CHECK(rose::test::contains(lines[1], ",4295,"));
  CHECK(rose::test::contains(lines[2], "online,false,1,false,14,0,"));
  CHECK(lines[1].find('"') == std::string::npos);
  CHECK(lines[1].back() == ',');  // no goodput: an empty last cell
  CHECK(lines[2].substr(lines[2].size() - 4) == ",0.5");
  auto fields = [](const std::string& line) { return std::count(line.begin(), line.end(), ','); };
  CHECK(fields(lines[1]) == fields(lines[0]));
  CHECK(fields(lines[2]) == fields(lines[0]));
}

TEST_CASE("a CSV sweep leads with the swept value; repeats add the spread columns") {
  rose::BenchReport point = sample_run("online");
  const std::string sweep = rose::render_runs_csv({point, point}, "request_rate",
                                                  {4.0, std::numeric_limits<double>::infinity()});
  CHECK(sweep.rfind("request_rate,mode,prefix_cache,repeats,completed,", 0) == 0);
  CHECK(rose::test::contains(sweep, "\n4,online,true,1,14,"));
  CHECK(rose::test::contains(sweep, "\ninf,online,true,1,14,"));
  point.repeats = 3;
  point.spread["request_throughput"] = {2.0, 1.5, 2.5, 1.8, 2.2};
  const std::string repeated = rose::render_runs_csv({point});
  CHECK(rose::test::contains(repeated,
                             ",request_throughput_min,request_throughput_max,"
                             "request_throughput_ci95_low,request_throughput_ci95_high,"));
  CHECK(rose::test::contains(repeated, ",1.5,2.5,1.8,2.2,"));
}
