// compare: the CI gate. Results go through the JSON writer and reader first, as they do in use.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/metrics/compare.h"

namespace fs = std::filesystem;

namespace {

rose::BenchReport run(const std::string& mode, bool prefix_cache) {
  rose::BenchReport r;
  r.mode = mode;
  r.prefix_cache = prefix_cache;
  r.completed = 64;
  r.duration_s = 2.0;
  r.request_throughput = 32.0;
  r.output_throughput = 512.0;
  r.total_token_throughput = 27904.0;
  for (rose::Distribution* d : {&r.ttft_ms, &r.tpot_ms, &r.itl_ms, &r.e2el_ms, &r.queue_ms}) {
    d->mean = 100;
    d->median = 100;
    d->min = 50;
    d->max = 300;
    d->percentiles = {{50, 100.0}, {95, 180.0}, {99, 200.0}};
  }
  r.tpot_ms.median = 20;
  r.tpot_ms.percentiles = {{50, 20.0}, {95, 30.0}, {99, 40.0}};
  return r;
}

rose::BenchResults results(std::string fingerprint = "00ff") {
  rose::BenchResults out;
  out.workload.name = "seed000";
  out.workload.fingerprint = std::move(fingerprint);
  out.runs = {run("offline", true), run("offline", false), run("naive", true)};
  return out;
}

// What the reader makes of the file that `results_to_json` writes.
rose::BenchResults through_json(const rose::BenchResults& r) {
  return rose::parse_results_json(rose::results_to_json(r, false), "mem.json");
}

rose::CompareResult compare(const rose::BenchResults& base, const rose::BenchResults& next,
                            const rose::CompareOptions& options = {}) {
  return rose::compare_results(through_json(base), through_json(next), options, "BASE.json",
                               "NEW.json");
}

const rose::CompareRow& row(const rose::CompareResult& result, const std::string& run_label,
                            const std::string& metric) {
  for (const rose::CompareRow& r : result.rows) {
    if (r.run == run_label && r.metric == metric) return r;
  }
  FAIL("no row for ", run_label, " ", metric);
  return result.rows.front();
}

double& percentile(rose::Distribution& d, double q) {
  for (auto& [chosen, value] : d.percentiles) {
    if (chosen == q) return value;
  }
  FAIL("no percentile ", q);
  return d.mean;
}

struct TempFolder {
  fs::path path;
  TempFolder() {
    path = fs::temp_directory_path() / ("roseinfer_test_compare_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempFolder() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(path / name) << content;
    return (path / name).string();
  }
};

}  // namespace

TEST_CASE("metric directions and thresholds") {
  using rose::MetricDirection;
  CHECK(rose::metric_direction("output_throughput") == MetricDirection::kHigherIsBetter);
  CHECK(rose::metric_direction("request_goodput") == MetricDirection::kHigherIsBetter);
  CHECK(rose::metric_direction("prefix_cache_hit_rate") == MetricDirection::kHigherIsBetter);
  CHECK(rose::metric_direction("p99_ttft_ms") == MetricDirection::kLowerIsBetter);
  CHECK(rose::metric_direction("p99.9_itl_ms") == MetricDirection::kLowerIsBetter);
  CHECK(rose::metric_direction("median_queue_ms") == MetricDirection::kLowerIsBetter);
  CHECK(rose::metric_direction("duration") == MetricDirection::kLowerIsBetter);
  CHECK(rose::metric_direction("failed") == MetricDirection::kLowerIsBetter);
  CHECK_FALSE(rose::metric_direction("total_input_tokens").has_value());
  CHECK_FALSE(rose::metric_direction("p101_ttft_ms").has_value());
  CHECK_FALSE(rose::metric_direction("median_foo_ms").has_value());
  CHECK_FALSE(rose::metric_direction("p99_ttft").has_value());
  CHECK_FALSE(rose::metric_direction("throughput").has_value());
  // Tensor parallel's collectives: times and bandwidth have a direction, counts and sizes none.
  CHECK(rose::metric_direction("collective_ms_per_decode_step") == MetricDirection::kLowerIsBetter);
  CHECK(rose::metric_direction("all_reduce_us") == MetricDirection::kLowerIsBetter);
  CHECK(rose::metric_direction("all_reduce_bus_gbps") == MetricDirection::kHigherIsBetter);
  CHECK_FALSE(rose::metric_direction("all_reduces_per_step").has_value());
  CHECK_FALSE(rose::metric_direction("all_reduce_bytes").has_value());
  CHECK_FALSE(rose::metric_direction("collective_rows").has_value());

  CHECK(rose::parse_threshold_percent("5%", "x") == 5.0);
  CHECK(rose::parse_threshold_percent("12.5", "x") == 12.5);
  CHECK(rose::parse_threshold_percent("0%", "x") == 0.0);
  CHECK_THROWS_AS(rose::parse_threshold_percent("abc", "x"), rose::Error);
  CHECK_THROWS_AS(rose::parse_threshold_percent("", "x"), rose::Error);
  CHECK_THROWS_AS(rose::parse_threshold_percent("%", "x"), rose::Error);
  CHECK_THROWS_AS(rose::parse_threshold_percent("-1%", "x"), rose::Error);
  CHECK_THROWS_AS(rose::parse_threshold_percent("5%%", "x"), rose::Error);

  const rose::MetricSpec spec = rose::parse_metric_spec("p95_e2el_ms:10%");
  CHECK(spec.name == "p95_e2el_ms");
  CHECK(spec.threshold_percent == 10.0);
  CHECK_FALSE(rose::parse_metric_spec("output_throughput").threshold_percent.has_value());
  CHECK_THROWS_AS(rose::parse_metric_spec("outptu_throughput"), rose::Error);
  CHECK_THROWS_AS(rose::parse_metric_spec("kv_total_blocks"), rose::Error);
  CHECK_THROWS_AS(rose::parse_metric_spec(":5%"), rose::Error);
  CHECK_THROWS_AS(rose::parse_metric_spec("p99_ttft_ms:lots"), rose::Error);
}

TEST_CASE("identical results: every default metric in every common run, all ok") {
  const rose::CompareResult result = compare(results(), results());
  CHECK(result.exit_code() == rose::kCompareOk);
  CHECK(result.regressions == 0);
  CHECK(result.rows.size() == 3 * rose::default_compare_metrics().size());
  for (const rose::CompareRow& r : result.rows) CHECK(r.verdict == rose::Verdict::kOk);
}

TEST_CASE("an improvement passes") {
  rose::BenchResults next = results();
  next.runs[0].output_throughput = 640.0;        // +25%
  percentile(next.runs[0].ttft_ms, 99) = 150.0;  // -25%
  const rose::CompareResult result = compare(results(), next);
  CHECK(result.exit_code() == rose::kCompareOk);
  const rose::CompareRow& throughput = row(result, "offline, cache on", "output_throughput");
  CHECK(throughput.change_percent == doctest::Approx(25.0));
  CHECK(throughput.verdict == rose::Verdict::kImproved);
  const rose::CompareRow& ttft = row(result, "offline, cache on", "p99_ttft_ms");
  CHECK(ttft.change_percent == doctest::Approx(-25.0));
  CHECK(ttft.verdict == rose::Verdict::kImproved);
}

TEST_CASE("a regression past the threshold fails with exit 1, in the direction that is worse") {
  rose::BenchResults next = results();
  next.runs[1].output_throughput = 460.8;  // -10%: worse for a throughput
  next.runs[2].tpot_ms.median = 23.0;      // +15%: worse for a latency
  const rose::CompareResult result = compare(results(), next);
  CHECK(result.exit_code() == rose::kCompareRegression);
  CHECK(result.regressions == 2);
  const rose::CompareRow& throughput = row(result, "offline, cache off", "output_throughput");
  CHECK(throughput.change_percent == doctest::Approx(-10.0));
  CHECK(throughput.verdict == rose::Verdict::kRegression);
  CHECK(row(result, "naive, cache on", "median_tpot_ms").verdict == rose::Verdict::kRegression);
  // The same metric in the other runs did not move.
  CHECK(row(result, "offline, cache on", "output_throughput").verdict == rose::Verdict::kOk);

  const std::string table = rose::render_compare_table(result);
  CHECK(table.find("REGRESSION") != std::string::npos);
  CHECK(table.find("2 of 24 metrics regressed") != std::string::npos);
  CHECK(table.find("-10.00%") != std::string::npos);

  // A looser global threshold lets both through.
  rose::CompareOptions loose;
  loose.max_regression_percent = 20;
  CHECK(compare(results(), next, loose).exit_code() == rose::kCompareOk);
}

TEST_CASE("a change within the threshold passes") {
  rose::BenchResults next = results();
  next.runs[0].output_throughput = 491.52;      // -4%
  next.runs[0].request_throughput = 30.72;      // -4%
  percentile(next.runs[0].itl_ms, 99) = 208.0;  // +4%
  const rose::CompareResult result = compare(results(), next);
  CHECK(result.exit_code() == rose::kCompareOk);
  CHECK(row(result, "offline, cache on", "p99_itl_ms").verdict == rose::Verdict::kOk);
  CHECK(row(result, "offline, cache on", "p99_itl_ms").change_percent == doctest::Approx(4.0));
  // Exactly at the threshold is still within it.
  next.runs[0].output_throughput = 486.4;  // -5%
  CHECK(compare(results(), next).exit_code() == rose::kCompareOk);
}

TEST_CASE("per-metric thresholds override the default and add metrics") {
  rose::BenchResults next = results();
  percentile(next.runs[0].ttft_ms, 99) = 220.0;  // +10%
  CHECK(compare(results(), next).exit_code() == rose::kCompareRegression);

  rose::CompareOptions options;
  options.metrics = {rose::parse_metric_spec("p99_ttft_ms:15%")};
  rose::CompareResult result = compare(results(), next, options);
  CHECK(result.exit_code() == rose::kCompareOk);
  CHECK(row(result, "offline, cache on", "p99_ttft_ms").threshold_percent == 15.0);
  CHECK(result.rows.size() == 3 * rose::default_compare_metrics().size());  // not duplicated

  // A metric outside the defaults is added with its own (or the global) threshold.
  percentile(next.runs[0].e2el_ms, 95) = 183.6;  // +2%
  options.metrics.push_back(rose::parse_metric_spec("p95_e2el_ms:1%"));
  result = compare(results(), next, options);
  CHECK(result.exit_code() == rose::kCompareRegression);
  CHECK(row(result, "offline, cache on", "p95_e2el_ms").verdict == rose::Verdict::kRegression);

  // --metrics-only checks just the listed ones.
  rose::CompareOptions only;
  only.only_listed_metrics = true;
  only.metrics = {rose::parse_metric_spec("output_throughput")};
  result = compare(results(), next, only);
  CHECK(result.exit_code() == rose::kCompareOk);
  CHECK(result.rows.size() == 3);
}

TEST_CASE("a metric that was 0 in the base regresses by any amount in the bad direction") {
  rose::BenchResults next = results();
  next.runs[0].failed = 1;
  rose::CompareOptions options;
  options.metrics = {rose::parse_metric_spec("failed:50%")};
  const rose::CompareResult result = compare(results(), next, options);
  CHECK(result.exit_code() == rose::kCompareRegression);
  const rose::CompareRow& failed = row(result, "offline, cache on", "failed");
  CHECK(std::isinf(failed.change_percent));
  CHECK(failed.verdict == rose::Verdict::kRegression);
}

TEST_CASE("different workloads are refused unless forced") {
  const rose::BenchResults base = results("00ff");
  const rose::BenchResults next = results("ab12");
  try {
    compare(base, next);
    FAIL("expected an error");
  } catch (const rose::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("different workloads") != std::string::npos);
    CHECK(message.find("00ff") != std::string::npos);
    CHECK(message.find("ab12") != std::string::npos);
    CHECK(message.find("--force") != std::string::npos);
  }
  rose::CompareOptions force;
  force.force = true;
  const rose::CompareResult result = compare(base, next, force);
  CHECK(result.exit_code() == rose::kCompareOk);
  REQUIRE_FALSE(result.notes.empty());
  CHECK(result.notes[0].find("--force") != std::string::npos);
}

TEST_CASE("runs are matched by mode and prefix cache; none in common is an error") {
  rose::BenchResults next = results();
  next.runs.erase(next.runs.begin() + 2);  // no naive run
  next.runs.push_back(run("online", true));
  const rose::CompareResult result = compare(results(), next);
  CHECK(result.rows.size() == 2 * rose::default_compare_metrics().size());
  CHECK(result.notes.size() == 2);  // naive only in BASE, online only in NEW

  rose::BenchResults other = results();
  other.runs = {run("online", false)};
  CHECK_THROWS_AS(compare(results(), other), rose::Error);

  // A metric the runs do not have (goodput without --slo) is an error, not a silent pass.
  rose::CompareOptions goodput;
  goodput.metrics = {rose::parse_metric_spec("request_goodput")};
  CHECK_THROWS_AS(compare(results(), results(), goodput), rose::Error);
}

TEST_CASE("run_compare: exit codes for files") {
  const TempFolder folder;
  rose::BenchResults worse = results();
  worse.runs[0].output_throughput = 256.0;
  const std::string base = folder.write("base.json", rose::results_to_json(results(), false));
  const std::string same = folder.write("same.json", rose::results_to_json(results(), false));
  const std::string regressed = folder.write("worse.json", rose::results_to_json(worse, false));
  const std::string other_workload =
      folder.write("other.json", rose::results_to_json(results("beef"), false));
  const std::string broken = folder.write("broken.json", "{\"schema\": \"roseinfer-bench\",");
  const std::string wrong_schema =
      folder.write("wrong.json", R"({"schema": "vllm-bench", "schema_version": 1})");

  std::ostringstream out, err;
  CHECK(rose::run_compare(base, same, {}, out, err) == rose::kCompareOk);
  CHECK(out.str().find("all 24 metrics within bounds") != std::string::npos);
  CHECK(rose::run_compare(base, regressed, {}, out, err) == rose::kCompareRegression);
  CHECK(rose::run_compare(base, other_workload, {}, out, err) == rose::kCompareUsageError);
  rose::CompareOptions force;
  force.force = true;
  CHECK(rose::run_compare(base, other_workload, force, out, err) == rose::kCompareOk);

  err.str("");
  CHECK(rose::run_compare(base, (folder.path / "missing.json").string(), {}, out, err) ==
        rose::kCompareUsageError);
  CHECK(err.str().find("missing.json") != std::string::npos);
  err.str("");
  CHECK(rose::run_compare(broken, base, {}, out, err) == rose::kCompareUsageError);
  CHECK(err.str().find("broken.json: not valid JSON") != std::string::npos);
  CHECK(rose::run_compare(base, wrong_schema, {}, out, err) == rose::kCompareUsageError);
  CHECK(rose::run_compare(folder.path.string(), base, {}, out, err) == rose::kCompareUsageError);
}

TEST_CASE("tensor parallel's collective times: not compared unless asked, then by direction") {
  rose::BenchResults base = results();
  rose::BenchResults next = results();
  rose::CollectiveFigures f;
  f.rows = 4;
  f.all_reduces_per_step = 64;
  f.all_reduce_bytes = 8192;
  f.all_reduce_us = 10;
  f.all_reduce_bus_gbps = 0.8192;
  f.all_gathers_per_step = 1;
  f.all_gather_bytes = 4096;
  f.all_gather_us = 20;
  f.ms_per_decode_step = 0.66;
  f.decode_step_fraction = 0.3;
  for (rose::BenchReport& r : base.runs) r.collectives = f;
  f.all_reduce_us = 20;  // twice as slow: a regression when asked for
  f.all_reduce_bus_gbps = 0.4096;
  f.ms_per_decode_step = 1.3;
  for (rose::BenchReport& r : next.runs) r.collectives = f;
  // The defaults leave them out: a collective measured standalone never fails a run on its own.
  const rose::CompareResult defaults = compare(base, next);
  CHECK(defaults.exit_code() == rose::kCompareOk);
  for (const rose::CompareRow& r : defaults.rows) CHECK(r.metric.find("all_reduce") != 0);
  rose::CompareOptions options;
  options.only_listed_metrics = true;
  options.metrics = {rose::parse_metric_spec("all_reduce_bus_gbps"),
                     rose::parse_metric_spec("collective_ms_per_decode_step:200%")};
  const rose::CompareResult asked = compare(base, next, options);
  CHECK(row(asked, "offline, cache on", "all_reduce_bus_gbps").verdict ==
        rose::Verdict::kRegression);
  CHECK(row(asked, "offline, cache on", "collective_ms_per_decode_step").verdict ==
        rose::Verdict::kOk);
  // Asked of results without tensor parallel: a usage error naming the metric, not a crash.
  CHECK_THROWS_WITH_AS(compare(results(), next, options), doctest::Contains("all_reduce_bus_gbps"),
                       rose::Error);
}
