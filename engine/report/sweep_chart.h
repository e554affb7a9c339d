#pragma once
// The throughput-latency curve of `bench --sweep` results: one chart per latency metric, x the
// output throughput each sweep point achieved, y its median and its highest chosen percentile,
// one point per sweep point, every sweep file overlaid on the same scales with a legend, the
// --slo bound drawn as a line and the highest point meeting it ringed.
#include <optional>
#include <string>
#include <vector>

#include "engine/metrics/metrics.h"
#include "engine/metrics/results_json.h"
#include "engine/report/html_report.h"

namespace rose::report {

struct SweepPoint {
  double value = 0;  // the swept request rate (inf allowed) or concurrency
  const BenchReport* run = nullptr;
};

// One point per run, in run order; empty when the file is not a sweep (or its values do not
// match its runs, which a hand-edited file could do).
std::vector<SweepPoint> sweep_points(const BenchResults& results);
// The --slo bounds the file was measured under (its config's "slo"); none when it has none.
Slo slo_of(const BenchResults& results);
// The highest swept value at which every request met the SLO: bench's own verdict.
std::optional<double> highest_meeting_slo(const BenchResults& results);
// "4", "0.5", "inf": a swept value as a short label.
std::string sweep_value_label(double value);

// The charts (a row of four), or "" when no source is a sweep.
std::string sweep_charts(const std::vector<ReportSource>& sources);

}  // namespace rose::report
