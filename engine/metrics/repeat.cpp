#include "engine/metrics/repeat.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>

#include "engine/common/error.h"
#include "engine/metrics/results_json.h"

namespace rose {

namespace {

double median_of(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, 50.0);
}

// The repeat whose duration is nearest the median duration (the earliest on a tie): the one run
// whose per-request and per-replica detail the combined report shows, so a reader comparing two
// results sees a typical run rather than the first, which may be the slowest (cold page cache).
size_t representative_index(const std::vector<BenchReport>& repeats) {
  std::vector<double> durations;
  for (const BenchReport& r : repeats) durations.push_back(r.duration_s);
  const double median = median_of(durations);
  size_t best = 0;
  for (size_t i = 1; i < repeats.size(); ++i) {
    if (std::abs(repeats[i].duration_s - median) < std::abs(repeats[best].duration_s - median)) {
      best = i;
    }
  }
  return best;
}

}  // namespace

Spread measure_spread(const std::vector<double>& values, uint64_t seed, int resamples) {
  ROSE_ASSERT(!values.empty() && resamples > 0);
  std::vector<double> sorted = values;
  Spread spread;
  spread.median = median_of(sorted);
  spread.min = sorted.front();
  spread.max = sorted.back();
  // Percentile bootstrap of the median: resample the runs with replacement, seeded so the same
  // results always give the same interval.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  std::vector<double> medians, sample(values.size());
  medians.reserve(size_t(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (double& v : sample) v = values[pick(rng)];
    medians.push_back(median_of(sample));
  }
  std::sort(medians.begin(), medians.end());
  spread.ci_low = percentile_sorted(medians, 2.5);
  spread.ci_high = percentile_sorted(medians, 97.5);
  return spread;
}

BenchReport combine_repeats(const std::vector<BenchReport>& repeats, uint64_t seed) {
  ROSE_ASSERT(!repeats.empty());
  const BenchReport& first = repeats.front();
  std::vector<std::pair<std::string, double>> medians;
  std::map<std::string, Spread> spreads;
  const std::vector<std::pair<std::string, double>> keys = run_numbers(first);
  std::vector<std::vector<std::pair<std::string, double>>> numbers;
  for (const BenchReport& report : repeats) numbers.push_back(run_numbers(report));
  for (size_t k = 0; k < keys.size(); ++k) {
    std::vector<double> values;
    for (const auto& run : numbers) {
      // Every repeat has the same keys in the same order (same percentiles, same --slo).
      ROSE_ASSERT(k < run.size() && run[k].first == keys[k].first);
      if (std::isfinite(run[k].second)) values.push_back(run[k].second);
    }
    if (values.empty()) {
      medians.emplace_back(keys[k].first, std::nan(""));
      continue;
    }
    const Spread spread = measure_spread(values, seed + k);
    medians.emplace_back(keys[k].first, spread.median);
    spreads[keys[k].first] = spread;
  }
  // Every run key, the cluster's router figures included, is now a median; what is not a run key
  // (per-request detail, per-step series, per-replica rows, router name) is one repeat's.
  BenchReport combined = report_from_run_numbers(first.mode, first.prefix_cache, medians);
  const size_t shown = representative_index(repeats);
  const BenchReport& representative = repeats[shown];
  combined.detail = representative.detail;
  combined.step_series = representative.step_series;
  combined.per_replica = representative.per_replica;
  combined.routing = representative.routing;
  combined.representative_repeat = int(shown) + 1;
  combined.repeats = int(repeats.size());
  if (combined.repeats > 1) combined.spread = std::move(spreads);
  return combined;
}

}  // namespace rose
