// Metrics against hand-computed values. Percentile, mean and std literals were computed with
// numpy 2.4 (np.percentile default "linear" method, np.std with ddof=0) on the arrays shown.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/metrics/metrics.h"
#include "engine/metrics/report_table.h"

using rose::Distribution;

namespace {

double percentile_of(const Distribution& d, double q) {
  for (const auto& [chosen, value] : d.percentiles) {
    if (chosen == q) return value;
  }
  FAIL("percentile ", q, " missing");
  return 0;
}

rose::RequestResult request_result(double arrival, double first_scheduled,
                                   std::vector<double> token_times, int cached = 0) {
  rose::RequestResult r;
  r.timeline.arrival = arrival;
  r.timeline.first_scheduled = first_scheduled;
  r.timeline.token_times = std::move(token_times);
  r.timeline.finish = r.timeline.token_times.empty() ? -1.0 : r.timeline.token_times.back();
  r.output_ids.assign(r.timeline.token_times.size(), 7);
  r.cached_prompt_tokens = cached;
  return r;
}

rose::EngineRequest engine_request(int prompt_len, double arrival) {
  rose::EngineRequest r;
  r.prompt.assign(size_t(prompt_len), 1);
  r.arrival_s = arrival;
  return r;
}

// Four requests: two normal ones, a one-token one that arrived late, and one that failed.
struct Fixture {
  std::vector<rose::EngineRequest> requests;
  rose::RunResult run;
  Fixture() {
    requests = {engine_request(10, 0.0), engine_request(20, 0.0), engine_request(5, 0.1),
                engine_request(8, 0.2)};
    run.requests = {
        request_result(0.0, 0.0, {0.100, 0.120, 0.150, 0.160}),
        request_result(0.0, 0.05, {0.200, 0.230}, 16),
        request_result(0.1, 0.1, {0.300}),
        request_result(0.2, -1.0, {}),
    };
    run.duration_s = 0.5;
    run.cache.lookups = 4;
    run.cache.queried_tokens = 40;
    run.cache.hit_tokens = 16;
    run.cache.evictions = 2;
    run.kv.block_size = 16;
    run.kv.total_blocks = 100;
    run.kv.peak_used_blocks = 25;
    run.kv.preemptions = 1;
    run.steps.steps = 6;
    run.steps.prefill_tokens = 19;
    run.steps.decode_tokens = 4;
    run.steps.decode_steps = 3;
    run.steps.decode_time_s = 0.5;
    run.steps.decode_bytes = 2e9;
  }
};

}  // namespace

TEST_CASE("percentile_sorted matches numpy's linear interpolation") {
  // np.percentile([3.5, 1.0, 7.25, 2.0, 10.0, 4.5, 6.0], q)
  std::vector<double> values = {1.0, 2.0, 3.5, 4.5, 6.0, 7.25, 10.0};
  CHECK(rose::percentile_sorted(values, 0) == doctest::Approx(1.0));
  CHECK(rose::percentile_sorted(values, 25) == doctest::Approx(2.75));
  CHECK(rose::percentile_sorted(values, 50) == doctest::Approx(4.5));
  CHECK(rose::percentile_sorted(values, 90) == doctest::Approx(8.35));
  CHECK(rose::percentile_sorted(values, 95) == doctest::Approx(9.175));
  CHECK(rose::percentile_sorted(values, 99) == doctest::Approx(9.835));
  CHECK(rose::percentile_sorted(values, 99.9) == doctest::Approx(9.9835));
  CHECK(rose::percentile_sorted(values, 100) == doctest::Approx(10.0));
  CHECK(rose::percentile_sorted({42.0}, 99) == doctest::Approx(42.0));
}

TEST_CASE("summarize: mean, population std, min, max, median and chosen percentiles") {
  // Unsorted input: summarize sorts. numpy: mean 4.892857142857143, std 2.8904310814711867.
  const Distribution d = rose::summarize({3.5, 1.0, 7.25, 2.0, 10.0, 4.5, 6.0}, {25, 99.9});
  CHECK(d.count == 7);
  CHECK(d.mean == doctest::Approx(4.892857142857143));
  CHECK(d.std == doctest::Approx(2.8904310814711867));
  CHECK(d.min == 1.0);
  CHECK(d.max == 10.0);
  CHECK(d.median == doctest::Approx(4.5));  // the median is there even when 50 is not chosen
  REQUIRE(d.percentiles.size() == 2);
  CHECK(d.percentiles[0].first == 25);
  CHECK(d.percentiles[0].second == doctest::Approx(2.75));
  CHECK(d.percentiles[1].first == 99.9);
  CHECK(d.percentiles[1].second == doctest::Approx(9.9835));

  // np.percentile([12, 15, 11, 40], [50, 95, 99]) = 13.5, 36.25, 39.25; std 11.926860441876563
  const Distribution e = rose::summarize({12, 15, 11, 40}, {50, 95, 99});
  CHECK(e.mean == doctest::Approx(19.5));
  CHECK(e.std == doctest::Approx(11.926860441876563));
  CHECK(percentile_of(e, 95) == doctest::Approx(36.25));
  CHECK(percentile_of(e, 99) == doctest::Approx(39.25));
}

TEST_CASE("summarize of nothing is all zeros, and bad percentiles are user errors") {
  const Distribution d = rose::summarize({}, {50, 99});
  CHECK(d.count == 0);
  CHECK(d.mean == 0);
  CHECK(d.max == 0);
  REQUIRE(d.percentiles.size() == 2);
  CHECK(d.percentiles[1].second == 0);
  CHECK_THROWS_AS(rose::summarize({1.0}, {101}), rose::Error);
  CHECK_THROWS_AS(rose::summarize({1.0}, {-1}), rose::Error);
}

TEST_CASE("make_report: latencies, throughput and counts from hand-built timelines") {
  const Fixture f;
  const rose::BenchReport r =
      rose::make_report(f.run, f.requests, "offline", true, {50, 95, 99}, rose::Slo{});
  CHECK(r.mode == "offline");
  CHECK(r.prefix_cache);
  CHECK(r.completed == 3);
  CHECK(r.failed == 1);
  CHECK(r.total_input_tokens == 35);  // failed requests are left out, as in vLLM
  CHECK(r.total_output_tokens == 7);
  CHECK(r.duration_s == 0.5);
  CHECK(r.request_throughput == doctest::Approx(6.0));
  CHECK(r.output_throughput == doctest::Approx(14.0));
  CHECK(r.total_token_throughput == doctest::Approx(84.0));
  CHECK_FALSE(r.goodput.has_value());

  // TTFT = first - arrival: 100, 200, 200 ms. numpy mean 166.667, std 47.14045207910317.
  CHECK(r.ttft_ms.count == 3);
  CHECK(r.ttft_ms.mean == doctest::Approx(166.66666666666666));
  CHECK(r.ttft_ms.std == doctest::Approx(47.14045207910317));
  CHECK(r.ttft_ms.median == doctest::Approx(200.0));
  // TPOT = (last - first) / (n - 1) for n >= 2: 20, 30 ms; p95 29.5, p99 29.9.
  CHECK(r.tpot_ms.count == 2);
  CHECK(r.tpot_ms.mean == doctest::Approx(25.0));
  CHECK(r.tpot_ms.std == doctest::Approx(5.0));
  CHECK(percentile_of(r.tpot_ms, 95) == doctest::Approx(29.5));
  CHECK(percentile_of(r.tpot_ms, 99) == doctest::Approx(29.9));
  // ITL pooled over requests: 20, 30, 10 and 30 ms.
  CHECK(r.itl_ms.count == 4);
  CHECK(r.itl_ms.mean == doctest::Approx(22.5));
  CHECK(r.itl_ms.std == doctest::Approx(8.2915619758885));
  CHECK(r.itl_ms.min == doctest::Approx(10.0));
  CHECK(r.itl_ms.median == doctest::Approx(25.0));
  // E2E = last - arrival: 160, 230, 200 ms; p95 227, p99 229.4.
  CHECK(r.e2el_ms.mean == doctest::Approx(196.66666666666666));
  CHECK(r.e2el_ms.std == doctest::Approx(28.674417556808756));
  CHECK(percentile_of(r.e2el_ms, 95) == doctest::Approx(227.0));
  CHECK(percentile_of(r.e2el_ms, 99) == doctest::Approx(229.4));
  CHECK(r.e2el_ms.max == doctest::Approx(230.0));
  // Queue = first scheduled - arrival: 0, 50, 0 ms; p95 45, p99 49.
  CHECK(r.queue_ms.mean == doctest::Approx(16.666666666666668));
  CHECK(percentile_of(r.queue_ms, 95) == doctest::Approx(45.0));
  CHECK(percentile_of(r.queue_ms, 99) == doctest::Approx(49.0));

  CHECK(r.cache.hit_tokens == 16);
  CHECK(r.cache.hit_rate() == doctest::Approx(0.4));
  CHECK(r.kv.peak_used_blocks == 25);
  CHECK(r.kv.preemptions == 1);
  CHECK(r.steps.prefill_tokens == 19);
  CHECK(r.decode_gbps == doctest::Approx(4.0));  // 2e9 bytes in 0.5 s
  CHECK_FALSE(r.bandwidth_floor_fraction.has_value());
}

TEST_CASE("make_report: per-request detail in seconds, failed requests as zeros") {
  const Fixture f;
  const rose::BenchReport r = rose::make_report(f.run, f.requests, "offline", true, {50}, {});
  const rose::RequestDetail& d = r.detail;
  CHECK(d.input_lens == std::vector<int64_t>{10, 20, 5, 8});
  CHECK(d.output_lens == std::vector<int64_t>{4, 2, 1, 0});
  CHECK(d.cached_tokens == std::vector<int64_t>{0, 16, 0, 0});
  REQUIRE(d.ttfts.size() == 4);
  CHECK(d.ttfts[1] == doctest::Approx(0.2));
  CHECK(d.ttfts[3] == 0.0);
  CHECK(d.e2els[2] == doctest::Approx(0.2));
  REQUIRE(d.itls.size() == 4);
  REQUIRE(d.itls[0].size() == 3);
  CHECK(d.itls[0][1] == doctest::Approx(0.03));
  CHECK(d.itls[2].empty());
  CHECK(d.itls[3].empty());
}

TEST_CASE("make_report: goodput counts requests meeting every SLO bound") {
  const Fixture f;
  // TTFT <= 150 ms: only request 0 (100 ms). 1 request / 0.5 s.
  rose::Slo ttft_only;
  ttft_only.ttft_ms = 150;
  auto r = rose::make_report(f.run, f.requests, "online", false, {50}, ttft_only);
  REQUIRE(r.goodput.has_value());
  CHECK(*r.goodput == doctest::Approx(2.0));

  // TTFT <= 250 and TPOT <= 25: request 0 (TPOT 20) and the one-token request 2 (TPOT counts as 0);
  // request 1 (TPOT 30) misses.
  rose::Slo both;
  both.ttft_ms = 250;
  both.tpot_ms = 25;
  r = rose::make_report(f.run, f.requests, "online", false, {50}, both);
  CHECK(*r.goodput == doctest::Approx(4.0));

  // E2E <= 200 (inclusive): requests 0 (160) and 2 (200).
  rose::Slo e2e;
  e2e.e2el_ms = 200;
  r = rose::make_report(f.run, f.requests, "online", false, {50}, e2e);
  CHECK(*r.goodput == doctest::Approx(4.0));

  // A bound nobody meets gives 0, not "absent".
  rose::Slo strict;
  strict.ttft_ms = 1;
  r = rose::make_report(f.run, f.requests, "online", false, {50}, strict);
  REQUIRE(r.goodput.has_value());
  CHECK(*r.goodput == 0.0);
}

TEST_CASE("make_report: bandwidth floor fraction when a copy bandwidth is supplied") {
  const Fixture f;
  const auto r = rose::make_report(f.run, f.requests, "offline", true, {50}, {}, 8.0);
  REQUIRE(r.bandwidth_floor_fraction.has_value());
  CHECK(*r.bandwidth_floor_fraction == doctest::Approx(0.5));  // 4 GB/s of 8 GB/s
}

TEST_CASE("make_report: a zero-length run reports zeros, not NaN") {
  rose::RunResult run;
  const auto r = rose::make_report(run, {}, "naive", true, {50, 99}, {});
  CHECK(r.completed == 0);
  CHECK(r.request_throughput == 0.0);
  CHECK(r.ttft_ms.mean == 0.0);
  CHECK(r.decode_gbps == 0.0);
}

TEST_CASE("report tables: chosen percentiles as columns, aligned, readable numbers") {
  CHECK(rose::format_number(1234567.4) == "1,234,567");
  CHECK(rose::format_number(-1234.0) == "-1,234");
  CHECK(rose::format_number(123.456) == "123.5");
  CHECK(rose::format_number(12.3456) == "12.35");
  CHECK(rose::format_number(0.12345) == "0.123");
  CHECK(rose::format_number(0) == "0");
  CHECK(rose::format_count(54784) == "54,784");
  CHECK(rose::format_percent(0.9375) == "93.8%");

  const Fixture f;
  const auto r = rose::make_report(f.run, f.requests, "offline", true, {50, 99.9}, {}, 8.0);
  const std::string table = rose::render_report_table(r);
  CHECK(table.find("offline, prefix cache on: 3 completed, 1 failed") != std::string::npos);
  CHECK(table.find("p99.9") != std::string::npos);
  CHECK(table.find("p95") == std::string::npos);  // only the chosen percentiles
  CHECK(table.find("16 of 40 tokens hit (40.0%)") != std::string::npos);
  CHECK(table.find("25 of 100 blocks (25.0%), 1 preemptions") != std::string::npos);
  CHECK(table.find("4.000 GB/s (50.0% of the copy-bandwidth floor)") != std::string::npos);
  CHECK(table.find("enqueued ahead") == std::string::npos);  // no step went ahead
  rose::BenchReport ahead = r;
  ahead.steps.steps_ahead = 1234;  // overlapped steps (engine.h)
  CHECK(rose::render_report_table(ahead).find("; 1,234 enqueued ahead)") != std::string::npos);
  // Every latency row has the same length: the columns line up.
  size_t ttft = table.find("  TTFT"), tpot = table.find("  TPOT");
  REQUIRE(ttft != std::string::npos);
  REQUIRE(tpot != std::string::npos);
  const size_t ttft_end = table.find('\n', ttft), tpot_end = table.find('\n', tpot);
  CHECK(ttft_end - ttft == tpot_end - tpot);

  rose::BenchReport off = r;
  off.prefix_cache = false;
  off.mode = "naive";
  const std::string summary = rose::render_summary_table({r, off});
  CHECK(summary.find("cache on") != std::string::npos);
  CHECK(summary.find("cache off") != std::string::npos);
  CHECK(summary.find("naive") != std::string::npos);
  CHECK(summary.find("TTFT p50 (ms)") != std::string::npos);
  CHECK(summary.find("40.0%") != std::string::npos);
}

namespace {

// Tensor parallel's decode-step collectives as a backend would time them (CollectiveTiming).
rose::CollectiveTiming sample_timing() {
  rose::CollectiveTiming t;
  t.ranks = 2;
  t.rows = 4;
  t.all_reduces_per_step = 64;
  t.all_reduce_bytes = 8192;
  t.all_reduce_s = 5e-6;
  t.all_gathers_per_step = 1;
  t.all_gather_bytes = 16384;
  t.all_gather_s = 20e-6;
  t.iterations = 100;
  return t;
}

}  // namespace

TEST_CASE("collective figures: per-step time, bus bandwidth and share of the decode step") {
  rose::StepStats steps;
  steps.decode_steps = 10;
  steps.decode_step_tokens = 35;
  steps.decode_time_s = 0.017;                 // 1.7 ms a pure-decode step
  CHECK(rose::mean_decode_batch(steps) == 4);  // 3.5 rounded
  CHECK(rose::mean_decode_batch(rose::StepStats{}) == 1);

  const rose::CollectiveTiming t = sample_timing();
  CHECK(t.step_s() == doctest::Approx(64 * 5e-6 + 20e-6));
  // nccl-tests' busBw: 2 (N-1)/N x bytes / time; 2 ranks move the buffer's size once.
  CHECK(t.all_reduce_bus_gbps() == doctest::Approx(8192 / 5e-6 / 1e9));
  rose::CollectiveTiming four = t;
  four.ranks = 4;
  CHECK(four.all_reduce_bus_gbps() == doctest::Approx(1.5 * 8192 / 5e-6 / 1e9));

  const rose::CollectiveFigures f = rose::collective_figures(t, steps);
  CHECK(f.rows == 4);
  CHECK(f.all_reduces_per_step == 64);
  CHECK(f.all_reduce_bytes == 8192);
  CHECK(f.all_reduce_us == doctest::Approx(5.0));
  CHECK(f.all_gather_us == doctest::Approx(20.0));
  CHECK(f.ms_per_decode_step == doctest::Approx(0.34));
  CHECK(f.decode_step_fraction == doctest::Approx(0.34 / 1.7));
  CHECK(std::isnan(rose::collective_figures(t, rose::StepStats{}).decode_step_fraction));
}

TEST_CASE("report tables: the collectives line only for tensor-parallel runs") {
  const Fixture f;
  rose::BenchReport r = rose::make_report(f.run, f.requests, "offline", true, {50}, {});
  CHECK(rose::render_report_table(r).find("collectives") == std::string::npos);
  rose::StepStats steps;
  steps.decode_steps = 10;
  steps.decode_time_s = 0.0017;  // 0.17 ms a step
  r.collectives = rose::collective_figures(sample_timing(), steps);
  const std::string table = rose::render_report_table(r);
  CHECK(table.find("64 all-reduces of 8.0 KiB + 1 all-gather of 16.0 KiB per "
                   "decode step of 4 rows: 0.340 ms (200.0% of the step), 1.638 GB/s bus "
                   "(measured standalone at these sizes)") != std::string::npos);
  // The line sits right after decode bandwidth.
  CHECK(table.find("collectives") > table.find("decode bandwidth"));
  CHECK(table.find("collectives") < table.find("prefill / decode"));
  r.collectives = rose::collective_figures(sample_timing(), rose::StepStats{});
  CHECK(rose::render_report_table(r).find("0.340 ms (no pure-decode step to compare)") !=
        std::string::npos);
  // Fused with the add-norm, the all-reduce's time is the fused kernel's over the plain one's.
  rose::CollectiveTiming fused = sample_timing();
  fused.fused_add_norm = true;
  r.collectives = rose::collective_figures(fused, steps);
  CHECK(r.collectives->fused_add_norm);
  CHECK(rose::render_report_table(r).find(
            "1.638 GB/s bus (each all-reduce timed as its fused add-norm over the plain add-norm, "
            "the gather standalone, at these sizes)") != std::string::npos);
}
