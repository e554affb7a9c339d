// `roseinfer compare BASE.json NEW.json`: flags to CompareOptions; all logic is in
// engine/metrics/compare.cpp, where it is unit-tested.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/metrics/compare.h"

namespace {

struct CompareArgs {
  std::string base_path, next_path;
  std::string max_regression = "5%";
  std::vector<std::string> metrics;
  bool metrics_only = false;
  bool force = false;
  std::string format = "table";
};

}  // namespace

void register_compare_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare two `bench --json` results run by run; exit 1 when a metric regressed beyond its "
      "threshold (for CI), 2 on a usage or file error");
  // Not marked required: a missing file argument is reported by the callback with exit 2, like
  // every other compare usage error.
  cmd->add_option("BASE", args->base_path, "baseline results JSON");
  cmd->add_option("NEW", args->next_path, "new results JSON");
  cmd->add_option("--max-regression", args->max_regression,
                  "allowed change in the bad direction, percent of the base value (default 5%)");
  cmd->add_option("--metric", args->metrics,
                  "NAME[:THRESHOLD]: also check run key NAME (e.g. p95_e2el_ms:10%), or override "
                  "a default metric's threshold; repeatable")
      ->allow_extra_args(false);
  cmd->add_flag("--metrics-only", args->metrics_only,
                "check only the --metric names, not the defaults (output and request throughput, "
                "median and p99 of TTFT, TPOT, ITL)");
  cmd->add_flag("--force", args->force, "compare even when the workload fingerprints differ");
  cmd->add_option("--format", args->format, "table (aligned text), md (markdown) or csv")
      ->capture_default_str();

  cmd->callback([args, &exit_code]() {
    if (args->base_path.empty() || args->next_path.empty()) {
      std::cerr << "roseinfer compare: needs two files: BASE.json NEW.json\n";
      exit_code = rose::kCompareUsageError;
      return;
    }
    rose::CompareOptions options;
    rose::TableFormat format = rose::TableFormat::kText;
    try {
      format = rose::parse_table_format(args->format, "--format");
      options.max_regression_percent =
          rose::parse_threshold_percent(args->max_regression, "--max-regression");
      for (const std::string& spec : args->metrics) {
        options.metrics.push_back(rose::parse_metric_spec(spec));
      }
    } catch (const rose::Error& e) {
      std::cerr << "roseinfer compare: " << e.what() << "\n";
      exit_code = rose::kCompareUsageError;
      return;
    }
    options.only_listed_metrics = args->metrics_only;
    options.force = args->force;
    exit_code =
        rose::run_compare(args->base_path, args->next_path, options, std::cout, std::cerr, format);
  });
}
