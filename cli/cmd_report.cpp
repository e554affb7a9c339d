// `roseinfer report RESULTS.json [MORE.json...] -o report.html`: flags only; the page is drawn by
// engine/report/html_report.cpp from saved results, where it is unit-tested.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/report/html_report.h"

namespace {

// A bad results file is a usage error for report, as for compare: exit 2.
constexpr int kReportUsageError = 2;

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string output = "report.html";
};

}  // namespace

void register_report_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Draw one self-contained HTML page (inline SVG, nothing fetched) from `bench --json` "
      "results: latency CDFs, throughput, cache and KV, request timelines (with "
      "--save-detailed), the throughput-latency curve of --sweep results with the SLO; several "
      "files side by side on the same scales (sweeps overlaid)");
  cmd->add_option("RESULTS", args->inputs, "results JSON files (bench --json)");
  cmd->add_option("-o,--output", args->output, "HTML file to write (atomically)")
      ->capture_default_str();
  cmd->callback([args, &exit_code] {
    if (args->inputs.empty()) {
      fmt::print(stderr, "roseinfer report: give at least one results JSON file\n");
      exit_code = kReportUsageError;
      return;
    }
    std::vector<std::filesystem::path> inputs(args->inputs.begin(), args->inputs.end());
    try {
      rose::report::write_html_report(inputs, args->output);
    } catch (const rose::Error& e) {
      fmt::print(stderr, "roseinfer report: {}\n", e.what());
      exit_code = kReportUsageError;
      return;
    }
    fmt::print(stderr, "wrote {}\n", args->output);
    exit_code = 0;
  });
}
