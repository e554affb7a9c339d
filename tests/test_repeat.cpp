// bench --repeat: medians and seeded bootstrap intervals, their place in the results file, and
// compare's noise-aware rule on synthetic result sets whose spread is known.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/metrics/compare.h"
#include "engine/metrics/repeat.h"
#include "engine/metrics/results_json.h"
#include "tests/test_util.h"

namespace {

rose::Distribution flat(double value) {
  rose::Distribution d;
  d.count = 1;
  d.mean = d.median = d.min = d.max = value;
  d.percentiles = {{50, value}, {99, value}};
  return d;
}

// One measured run: every default compare metric set, throughput as given.
rose::BenchReport measured(double output_throughput) {
  rose::BenchReport r;
  r.mode = "offline";
  r.completed = 64;
  r.duration_s = 1.0;
  r.output_throughput = output_throughput;
  r.request_throughput = 64;
  r.ttft_ms = r.tpot_ms = r.itl_ms = r.e2el_ms = r.queue_ms = flat(10.0);
  return r;
}

// A results file of one run repeated once per value, as compare reads it back.
rose::BenchResults repeated(const std::vector<double>& throughputs) {
  std::vector<rose::BenchReport> runs;
  for (double t : throughputs) runs.push_back(measured(t));
  rose::BenchResults results;
  results.workload.fingerprint = "00ff";
  results.runs = {rose::combine_repeats(runs, 7)};
  return rose::parse_results_json(rose::results_to_json(results, false), "repeated.json");
}

const rose::CompareRow& throughput_row(const rose::CompareResult& result) {
  for (const rose::CompareRow& row : result.rows) {
    if (row.metric == "output_throughput") return row;
  }
  FAIL("no output_throughput row");
  return result.rows.front();
}

}  // namespace

TEST_CASE("the spread of repeated runs: median, min, max and a seeded bootstrap interval") {
  const std::vector<double> values = {5, 1, 9, 3, 7, 2, 8, 4, 6};
  const rose::Spread a = rose::measure_spread(values, 1);
  CHECK(a.median == 5);
  CHECK(a.min == 1);
  CHECK(a.max == 9);
  CHECK(a.ci_low <= 5);
  CHECK(a.ci_high >= 5);
  CHECK(a.ci_low >= 1);
  CHECK(a.ci_high <= 9);
  CHECK(a.ci_high - a.ci_low > 0);
  const rose::Spread b = rose::measure_spread(values, 1);
  CHECK(a.ci_low == b.ci_low);  // seeded: the same results give the same interval
  CHECK(a.ci_high == b.ci_high);
  const rose::Spread constant = rose::measure_spread({3, 3, 3}, 1);
  CHECK(constant.ci_low == 3);
  CHECK(constant.ci_high == 3);
}

TEST_CASE("combined repeats hold medians and survive the results file") {
  const rose::BenchResults results = repeated({100, 110, 90});
  const rose::BenchReport& run = results.runs.at(0);
  CHECK(run.repeats == 3);
  CHECK(run.output_throughput == 100);
  CHECK(results.run_values.at(0).at("output_throughput") == 100);
  const rose::Spread& spread = run.spread.at("output_throughput");
  CHECK(spread.median == 100);
  CHECK(spread.min == 90);
  CHECK(spread.max == 110);
  CHECK(spread.ci_low >= 90);
  CHECK(spread.ci_high <= 110);
  CHECK(run.spread.at("p99_ttft_ms").ci_low == 10);
  // One run is not repeated: no spread in the file.
  const rose::BenchResults single = repeated({100});
  CHECK(single.runs.at(0).repeats == 1);
  CHECK(single.runs.at(0).spread.empty());
}

TEST_CASE("a bad spread section names the file and field") {
  const std::string json = R"({"schema": "roseinfer-bench", "schema_version": 1,
    "workload": {"fingerprint": "00"}, "runs": [{"mode": "offline", "prefix_cache": true,
    "output_throughput": 5, "repeats": 3, "spread": {"output_throughput": {"min": 1, "max": 9,
    "ci95_low": 8, "ci95_high": 2}}}]})";
  const std::string message =
      rose::test::error_of([&] { rose::parse_results_json(json, "noisy.json"); });
  CHECK(rose::test::contains(message, "noisy.json"));
  CHECK(rose::test::contains(message, "runs[0].spread.output_throughput"));
}

TEST_CASE("compare: a change inside the measured noise is not a regression") {
  // Base spreads about +-10%; the new median is 7% lower: beyond 5%, not beyond the noise.
  const rose::BenchResults base = repeated({100, 90, 110, 95, 105, 88, 112});
  const rose::BenchResults next = repeated({93, 84, 102, 88, 98, 82, 104});
  const rose::CompareResult result = rose::compare_results(base, next, {}, "base", "new");
  const rose::CompareRow& row = throughput_row(result);
  CHECK(row.change_percent == doctest::Approx(-7.0));
  REQUIRE(row.noise_percent);
  CHECK(*row.noise_percent > 7.0);
  CHECK(row.verdict == rose::Verdict::kWithinNoise);
  CHECK(result.regressions == 0);
  CHECK(result.within_noise == 1);
  CHECK(result.exit_code() == rose::kCompareOk);
  const std::string table = rose::render_compare_table(result);
  CHECK(rose::test::contains(table, "within noise"));
  CHECK(rose::test::contains(table, "within the measured noise"));
}

TEST_CASE("compare: a change beyond the threshold and the noise is a regression") {
  // Both sides spread about +-1%; the new median is 7% lower.
  const rose::BenchResults base = repeated({100, 99, 101, 100.5, 99.5});
  const rose::BenchResults next = repeated({93, 92, 94, 93.5, 92.5});
  const rose::CompareResult result = rose::compare_results(base, next, {}, "base", "new");
  const rose::CompareRow& row = throughput_row(result);
  REQUIRE(row.noise_percent);
  CHECK(*row.noise_percent < 3.0);
  CHECK(row.verdict == rose::Verdict::kRegression);
  CHECK(result.regressions == 1);
  CHECK(result.exit_code() == rose::kCompareRegression);
  CHECK(rose::test::contains(rose::render_compare_table(result),
                             "beyond their threshold and the measured noise"));
  // Noise alone is not enough either: a 3% drop with tight spread stays within the 5% threshold.
  const rose::CompareResult small =
      rose::compare_results(base, repeated({97, 96.5, 97.5, 97, 96.8}), {}, "base", "new");
  CHECK(throughput_row(small).verdict == rose::Verdict::kOk);
  CHECK(small.exit_code() == rose::kCompareOk);
}

TEST_CASE("compare: results without repeats keep the plain threshold rule") {
  const rose::CompareResult result =
      rose::compare_results(repeated({100}), repeated({93}), {}, "base", "new");
  const rose::CompareRow& row = throughput_row(result);
  CHECK_FALSE(row.noise_percent);
  CHECK(row.verdict == rose::Verdict::kRegression);
  CHECK_FALSE(rose::test::contains(rose::render_compare_table(result), "noise"));
}

namespace {

// One measured run of a 2-replica cluster: its duration, delivered hit rate and the requests each
// replica took (the other router figures follow from them).
rose::BenchReport cluster_run(double duration_s, double delivered, int first_replica_requests) {
  rose::BenchReport r = measured(64 / duration_s);
  r.duration_s = duration_s;
  r.routing.router = "prefix";
  r.routing_figures = {delivered + 0.1, delivered, delivered + 0.2, 1.0 + delivered, 1.5};
  rose::ReplicaStats a, b;
  a.requests = first_replica_requests;
  b.requests = 64 - first_replica_requests;
  a.busy_s = b.busy_s = duration_s;
  r.per_replica = {a, b};
  return r;
}

}  // namespace

TEST_CASE("repeated cluster runs keep the router figures as medians and one run's replica rows") {
  // Durations 3, 1, 2: the median duration is the third run's, so its rows are the ones kept.
  std::vector<rose::BenchReport> runs = {cluster_run(3.0, 0.2, 40), cluster_run(1.0, 0.6, 30),
                                         cluster_run(2.0, 0.5, 33)};
  rose::BenchResults written;
  written.workload.fingerprint = "00ff";
  written.runs = {rose::combine_repeats(runs, 7)};
  const rose::BenchReport& combined = written.runs.front();
  CHECK(combined.representative_repeat == 3);
  CHECK(combined.routing.router == "prefix");
  CHECK(combined.routing_figures.delivered_hit_rate == doctest::Approx(0.5));
  const std::string json = rose::results_to_json(written, false);
  CHECK(rose::test::contains(json, "\"router\": \"prefix\""));
  CHECK(rose::test::contains(json, "\"representative_repeat\": 3"));

  const rose::BenchResults results = rose::parse_results_json(json, "cluster.json");
  const std::map<std::string, double>& values = results.run_values.at(0);
  CHECK(values.at("data_parallel") == 2);
  CHECK(values.at("routing_delivered_hit_rate") == doctest::Approx(0.5));  // median of .2 .6 .5
  CHECK(values.at("routing_predicted_hit_rate") == doctest::Approx(0.6));
  CHECK(values.at("routing_available_hit_rate") == doctest::Approx(0.7));
  CHECK(values.at("request_imbalance") == doctest::Approx(1.5));
  CHECK(values.at("token_imbalance") == doctest::Approx(1.5));
  const rose::Spread& delivered = results.runs.at(0).spread.at("routing_delivered_hit_rate");
  CHECK(delivered.min == doctest::Approx(0.2));
  CHECK(delivered.max == doctest::Approx(0.6));
  CHECK(results.runs.at(0).representative_repeat == 3);
  const auto& replicas = results.run_replicas.at(0);
  REQUIRE(replicas.size() == 2);
  CHECK(replicas[0].at("requests") == 33);  // the representative run's, not a median
  CHECK(replicas[1].at("requests") == 31);
  CHECK(replicas[0].at("busy_s") == 2.0);

  // The text table says the router figures and spread are medians and whose rows are shown.
  const std::string table = rose::render_report_table(combined, rose::TableFormat::kText);
  CHECK(rose::test::contains(table, "router prefix: hit rate predicted"));
  CHECK(rose::test::contains(table, "replica rows: run 3 of 3"));
  CHECK(rose::test::contains(rose::render_spread_table(combined, rose::TableFormat::kText),
                             "routing_delivered_hit_rate"));

  // compare checks the router figures of repeated results, noise rule included.
  rose::CompareOptions options;
  options.metrics = {rose::parse_metric_spec("routing_delivered_hit_rate:5")};
  const rose::CompareResult same = rose::compare_results(results, results, options, "a", "b");
  CHECK(same.exit_code() == rose::kCompareOk);
  bool checked = false;
  for (const rose::CompareRow& row : same.rows)
    checked |= row.metric == "routing_delivered_hit_rate";
  CHECK(checked);

  // Two repeats of equal distance from the median: the first is kept.
  runs = {cluster_run(1.0, 0.2, 40), cluster_run(3.0, 0.6, 30)};
  CHECK(rose::combine_repeats(runs, 7).representative_repeat == 1);
}
