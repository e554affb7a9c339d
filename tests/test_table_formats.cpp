// --format table|md|csv: the same tables as GitHub markdown and RFC 4180 CSV.
#include <doctest/doctest.h>

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
