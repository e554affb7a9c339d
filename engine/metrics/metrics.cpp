#include "engine/metrics/metrics.h"

#include <algorithm>
#include <cmath>

#include "engine/common/error.h"

namespace rose {

double percentile_sorted(const std::vector<double>& sorted, double q) {
  ROSE_ASSERT(!sorted.empty());
  ROSE_ASSERT(q >= 0.0 && q <= 100.0);
  // numpy's "linear" method: the value at fractional rank q/100 * (n - 1).
  const double rank = q / 100.0 * double(sorted.size() - 1);
  const size_t lower = size_t(std::floor(rank));
  const size_t upper = std::min(lower + 1, sorted.size() - 1);
  const double fraction = rank - double(lower);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction;
}

Distribution summarize(std::vector<double> values, const std::vector<double>& percentiles) {
  for (double q : percentiles) {
    if (!(q >= 0.0 && q <= 100.0)) fail("--percentiles: {} is outside [0, 100]", q);
  }
  Distribution dist;
  dist.count = values.size();
  if (values.empty()) {
    for (double q : percentiles) dist.percentiles.emplace_back(q, 0.0);
    return dist;
  }
  std::sort(values.begin(), values.end());
  double sum = 0.0;
  for (double v : values) sum += v;
  dist.mean = sum / double(values.size());
  // Two passes: subtracting the mean first keeps the variance exact for tightly clustered
  // latencies.
  double squared_deviations = 0.0;
  for (double v : values) squared_deviations += (v - dist.mean) * (v - dist.mean);
  dist.std = std::sqrt(squared_deviations / double(values.size()));
  dist.min = values.front();
  dist.max = values.back();
  dist.median = percentile_sorted(values, 50.0);
  for (double q : percentiles) dist.percentiles.emplace_back(q, percentile_sorted(values, q));
  return dist;
}

namespace {

bool request_failed(const RequestResult& result) {
  return result.finish_reason == FinishReason::kError || result.timeline.token_times.empty() ||
         result.timeline.finish < 0.0;
}

double per_second(double count, double duration_s) {
  return duration_s > 0.0 ? count / duration_s : 0.0;
}

constexpr double kMs = 1000.0;

// The per-request latencies (ms, one per completed request; itl one per gap) that make_report
// summarizes, and the count of requests that met the SLO.
struct LatencySamples {
  std::vector<double> ttfts, tpots, itls, e2els, queues;
  int64_t good_requests = 0;
};

// A failed request: counted, its first error kept, zeros in the per-request detail.
void record_failure(BenchReport& report, size_t index, const RequestResult& result) {
  if (report.failed == 0) {
    report.first_failure = fmt::format("request {}: {}", index,
                                       result.error.empty() ? "produced no token" : result.error);
  }
  ++report.failed;
  RequestDetail& detail = report.detail;
  detail.output_lens.push_back(0);
  detail.ttfts.push_back(0.0);
  detail.e2els.push_back(0.0);
  detail.itls.emplace_back();
}

// A completed request: its token counts, latencies, per-request detail and SLO verdict.
void record_completion(BenchReport& report, LatencySamples& samples, const Timeline& timeline,
                       int64_t input_len, const Slo& slo, bool has_slo) {
  ++report.completed;
  const std::vector<double>& times = timeline.token_times;  // (num_output_tokens,)
  const int64_t output_len = int64_t(times.size());
  report.total_input_tokens += input_len;
  report.total_output_tokens += output_len;

  const double ttft_s = times.front() - timeline.arrival;
  const double e2el_s = times.back() - timeline.arrival;
  samples.ttfts.push_back(ttft_s * kMs);
  samples.e2els.push_back(e2el_s * kMs);
  if (timeline.first_scheduled >= 0.0) {
    samples.queues.push_back((timeline.first_scheduled - timeline.arrival) * kMs);
  }
  // vLLM counts a one-token request's TPOT as 0 when judging goodput.
  double tpot_ms = 0.0;
  if (output_len >= 2) {
    tpot_ms = (times.back() - times.front()) / double(output_len - 1) * kMs;
    samples.tpots.push_back(tpot_ms);
  }
  std::vector<double> gaps_s;
  gaps_s.reserve(times.size() - 1);
  for (size_t t = 1; t < times.size(); ++t) {
    gaps_s.push_back(times[t] - times[t - 1]);
    samples.itls.push_back((times[t] - times[t - 1]) * kMs);
  }

  RequestDetail& detail = report.detail;
  detail.output_lens.push_back(output_len);
  detail.ttfts.push_back(ttft_s);
  detail.e2els.push_back(e2el_s);
  detail.itls.push_back(std::move(gaps_s));

  if (has_slo) {
    const bool good = (!slo.ttft_ms || ttft_s * kMs <= *slo.ttft_ms) &&
                      (!slo.tpot_ms || tpot_ms <= *slo.tpot_ms) &&
                      (!slo.e2el_ms || e2el_s * kMs <= *slo.e2el_ms);
    if (good) ++samples.good_requests;
  }
}

// What the engine measured about its steps (cache, KV, step timings) and the figures derived
// from them: decode bandwidth, prefill and decode throughput, fraction of the copy floor.
void add_step_figures(BenchReport& report, const RunResult& run,
                      std::optional<double> copy_bandwidth_gbps) {
  report.cache = run.cache;
  report.kv = run.kv;
  report.steps = run.steps;
  report.step_series = run.step_series;
  report.per_replica = run.per_replica;
  report.routing = run.routing;
  const RoutingStats& g = run.routing;
  report.routing_figures = {g.rate(g.predicted_hit_tokens), g.rate(g.delivered_hit_tokens),
                            g.rate(g.available_hit_tokens), g.request_imbalance, g.token_imbalance};
  if (run.steps.decode_time_s > 0.0) {
    report.decode_gbps = run.steps.decode_bytes / run.steps.decode_time_s / 1e9;
  }
  report.decode_throughput =
      per_second(double(run.steps.decode_step_tokens), run.steps.decode_time_s);
  report.prefill_throughput = per_second(double(run.steps.prefill_tokens),
                                         run.steps.execute_time_s - run.steps.decode_time_s);
  if (copy_bandwidth_gbps && *copy_bandwidth_gbps > 0.0) {
    report.bandwidth_floor_fraction = report.decode_gbps / *copy_bandwidth_gbps;
  }
}

}  // namespace

BenchReport make_report(const RunResult& run, const std::vector<EngineRequest>& requests,
                        const std::string& mode, bool prefix_cache,
                        const std::vector<double>& percentiles, const Slo& slo,
                        std::optional<double> copy_bandwidth_gbps) {
  ROSE_ASSERT(run.requests.size() == requests.size());
  BenchReport report;
  report.mode = mode;
  report.prefix_cache = prefix_cache;
  report.duration_s = run.duration_s;

  const size_t num_requests = requests.size();
  RequestDetail& detail = report.detail;
  detail.input_lens.reserve(num_requests);
  detail.output_lens.reserve(num_requests);
  detail.cached_tokens.reserve(num_requests);
  detail.ttfts.reserve(num_requests);
  detail.e2els.reserve(num_requests);
  detail.itls.reserve(num_requests);

  const bool has_slo = slo.ttft_ms || slo.tpot_ms || slo.e2el_ms;
  LatencySamples samples;
  for (size_t i = 0; i < num_requests; ++i) {
    const RequestResult& result = run.requests[i];
    const int64_t input_len = int64_t(requests[i].prompt.size());
    detail.input_lens.push_back(input_len);
    detail.cached_tokens.push_back(result.cached_prompt_tokens);
    detail.output_ids.push_back(result.output_ids);
    detail.arrivals.push_back(result.timeline.arrival);
    detail.first_scheduled.push_back(result.timeline.first_scheduled);
    if (request_failed(result)) {
      record_failure(report, i, result);
    } else {
      record_completion(report, samples, result.timeline, input_len, slo, has_slo);
    }
  }

  report.ttft_ms = summarize(std::move(samples.ttfts), percentiles);
  report.tpot_ms = summarize(std::move(samples.tpots), percentiles);
  report.itl_ms = summarize(std::move(samples.itls), percentiles);
  report.e2el_ms = summarize(std::move(samples.e2els), percentiles);
  report.queue_ms = summarize(std::move(samples.queues), percentiles);

  report.request_throughput = per_second(report.completed, report.duration_s);
  report.output_throughput = per_second(double(report.total_output_tokens), report.duration_s);
  report.total_token_throughput =
      per_second(double(report.total_input_tokens + report.total_output_tokens), report.duration_s);
  if (has_slo) report.goodput = per_second(double(samples.good_requests), report.duration_s);
  add_step_figures(report, run, copy_bandwidth_gbps);
  return report;
}

bool meets_slo(const BenchReport& r) {
  return r.goodput && r.completed > 0 && r.failed == 0 &&
         *r.goodput >= r.request_throughput * (1 - 1e-9);
}

int mean_decode_batch(const StepStats& steps) {
  if (steps.decode_steps <= 0) return 1;
  const double mean = double(steps.decode_step_tokens) / double(steps.decode_steps);
  return std::max(1, int(std::lround(mean)));
}

CollectiveFigures collective_figures(const CollectiveTiming& timing, const StepStats& steps) {
  CollectiveFigures f;
  f.rows = timing.rows;
  f.all_reduces_per_step = timing.all_reduces_per_step;
  f.all_reduce_bytes = double(timing.all_reduce_bytes);
  f.all_reduce_us = timing.all_reduce_s * 1e6;
  f.all_reduce_bus_gbps = timing.all_reduce_bus_gbps();
  f.fused_add_norm = timing.fused_add_norm;
  f.all_gathers_per_step = timing.all_gathers_per_step;
  f.all_gather_bytes = double(timing.all_gather_bytes);
  f.all_gather_us = timing.all_gather_s * 1e6;
  f.ms_per_decode_step = timing.step_s() * 1e3;
  f.decode_step_fraction = std::nan("");
  if (steps.decode_steps > 0 && steps.decode_time_s > 0) {
    f.decode_step_fraction = timing.step_s() / (steps.decode_time_s / double(steps.decode_steps));
  }
  return f;
}

}  // namespace rose
