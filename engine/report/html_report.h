#pragma once
// `roseinfer report`: one self-contained HTML page (inline SVG and CSS, nothing fetched) drawn from
// results JSON files: latency CDFs, throughput, cache and KV figures, a per-request timeline, KV
// and queue over time, per-replica load; several files side by side on the same scales.
#include <filesystem>
#include <string>
#include <vector>

#include "engine/metrics/results_json.h"

namespace rose::report {

struct ReportSource {
  std::string name;  // shown as the column heading (the file name)
  BenchResults results;
};

// Bounds that keep the page small and readable at any request count.
inline constexpr int kMaxCdfPoints = 200;
inline constexpr int kMaxTimelineRows = 200;
inline constexpr int kMaxSeriesBins = 400;

std::string render_html_report(const std::vector<ReportSource>& sources);

// Reads every file (rose::Error naming the file and field on a bad one), renders, and writes
// `output` through a temporary file and a rename.
void write_html_report(const std::vector<std::filesystem::path>& inputs,
                       const std::filesystem::path& output);

}  // namespace rose::report
