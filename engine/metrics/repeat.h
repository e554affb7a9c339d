#pragma once
// `bench --repeat N`: the same configuration measured N times (each from a cold cache), reduced to
// the median of every number plus its spread (min, max and a seeded bootstrap 95% interval of the
// median), so compare can tell a regression from run-to-run noise.
#include <cstdint>
#include <vector>

#include "engine/metrics/metrics.h"

namespace rose {

// The median of `values` (nonempty) and how far it can move between runs.
Spread measure_spread(const std::vector<double>& values, uint64_t seed, int resamples = 2000);

// One report whose every run key (a cluster's router figures included) is the median over `repeats`
// (same mode and cache setting, at least one), with `spread` and `repeats` set. Per-request
// detail, the step series and a cluster's per-replica rows and router name are those of the repeat
// whose duration is nearest the median (the earliest on a tie), named by representative_repeat.
BenchReport combine_repeats(const std::vector<BenchReport>& repeats, uint64_t seed);

}  // namespace rose
