#pragma once
// Text tables for stdout: one block per BenchReport, a side-by-side summary of several, and the
// column-aligning helper both (and compare's table) use.
#include <string>
#include <string_view>
#include <vector>

#include "engine/metrics/metrics.h"

namespace rose {

// How tables are printed: aligned text for the terminal, GitHub markdown or CSV for pasting.
enum class TableFormat { kText, kMarkdown, kCsv };
// "table" (or "text"), "md" (or "markdown"), "csv"; throws rose::Error naming `flag` otherwise.
TableFormat parse_table_format(std::string_view text, std::string_view flag);

// Rows of cells; the first `left_aligned_columns` columns (labels, text) are left-aligned, the rest
// (numbers) right-aligned. A row with one cell is a section line printed as is.
class TextTable {
 public:
  explicit TextTable(size_t left_aligned_columns = 1)
      : left_aligned_columns_(left_aligned_columns) {}
  void add_row(std::vector<std::string> cells);
  std::string render(int indent = 0) const;
  // The first row is the header. A one-cell row becomes a bold line (markdown) or a one-field
  // record (CSV) between tables.
  std::string render_as(TableFormat format, int indent = 0) const;

 private:
  size_t left_aligned_columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Readable numbers: thousands separators, and decimals that shrink as the value grows
// (0.123, 12.35, 123.5, 1,235).
std::string format_number(double value);
// An integer count with thousands separators.
std::string format_count(int64_t value);
// 0.9375 -> "93.8%".
std::string format_percent(double fraction);

// One block: latency rows (TTFT, TPOT, ITL, E2E, queue) x (mean, chosen percentiles, max), then
// throughput, prefix cache, KV and decode bandwidth lines.
std::string render_report_table(const BenchReport& report, TableFormat format = TableFormat::kText);
// With --repeat N: the headline numbers' median, [min, max] and bootstrap 95% interval over the N
// runs, so a reader sees how far one number can move between runs of the same configuration.
std::string render_spread_table(const BenchReport& report, TableFormat format = TableFormat::kText);
// A cluster run's router line (three hit rates, imbalance) and per-replica rows; part of the above.
std::string render_cluster_table(const BenchReport& report,
                                 TableFormat format = TableFormat::kText);
// Runs as columns (mode x prefix cache), headline numbers as rows. For --mode all or cache on/off.
std::string render_summary_table(const std::vector<BenchReport>& reports,
                                 TableFormat format = TableFormat::kText);
// `bench --format csv`: one table, one header row, one row per run (per sweep point when
// `sweep_values` has one value per report), every flat key of the results JSON as a plain number
// (no thousands separators), so the output loads into a spreadsheet or a data frame as is. A key
// a run lacks is an empty cell; with --repeat the headline keys' spread adds columns.
std::string render_runs_csv(const std::vector<BenchReport>& reports,
                            const std::string& sweep_parameter = "",
                            const std::vector<double>& sweep_values = {});

}  // namespace rose
