#include "engine/metrics/report_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "engine/common/error.h"
#include "engine/metrics/results_json.h"

namespace rose {

void TextTable::add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

std::string TextTable::render(int indent) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (row.size() < 2) continue;  // section lines do not widen the columns
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  const std::string margin(size_t(indent), ' ');
  for (const auto& row : rows_) {
    std::string line = margin;
    if (row.size() == 1) {
      line += row[0];
    } else {
      for (size_t c = 0; c < row.size(); ++c) {
        if (c == 0) {
          line += fmt::format("{:<{}}", row[c], widths[c]);
        } else if (c < left_aligned_columns_) {
          line += fmt::format("  {:<{}}", row[c], widths[c]);
        } else {
          line += fmt::format("  {:>{}}", row[c], widths[c]);
        }
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

TableFormat parse_table_format(std::string_view text, std::string_view flag) {
  if (text == "table" || text == "text") return TableFormat::kText;
  if (text == "md" || text == "markdown") return TableFormat::kMarkdown;
  if (text == "csv") return TableFormat::kCsv;
  fail("{}: unknown table format '{}' (table, md or csv)", flag, text);
}

namespace {

std::string markdown_cell(const std::string& cell) {
  std::string out;
  for (char c : cell) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// RFC 4180: quoted when it holds a comma, quote or line break; quotes doubled.
std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
  std::string out(1, '"');
  for (char c : cell) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

std::string TextTable::render_as(TableFormat format, int indent) const {
  if (format == TableFormat::kText) return render(indent);
  std::string out;
  bool header_done = false;
  for (const auto& row : rows_) {
    // Appended piece by piece: GCC 12 misreports "literal" + std::string as an overlapping copy.
    if (row.size() == 1) {
      if (format == TableFormat::kMarkdown) {
        out.append("\n**").append(markdown_cell(row[0])).append("**\n\n");
      } else {
        out.append(csv_cell(row[0])).append("\n");
      }
      header_done = false;  // a section starts a new table
      continue;
    }
    for (size_t c = 0; c < row.size(); ++c) {
      if (format == TableFormat::kMarkdown) {
        out.append("| ").append(markdown_cell(row[c])).append(" ");
      } else {
        out.append(c ? "," : "").append(csv_cell(row[c]));
      }
    }
    out.append(format == TableFormat::kMarkdown ? "|\n" : "\n");
    if (format == TableFormat::kMarkdown && !header_done) {
      for (size_t c = 0; c < row.size(); ++c) out += c < left_aligned_columns_ ? "|---" : "|---:";
      out += "|\n";
    }
    header_done = true;
  }
  return out;
}

namespace {

// "1234567" -> "1,234,567"; `digits` is a plain decimal text with an optional sign and fraction.
std::string group_thousands(const std::string& digits) {
  const size_t start = (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) ? 1 : 0;
  size_t end = digits.find('.');
  if (end == std::string::npos) end = digits.size();
  std::string out = digits.substr(0, start);
  for (size_t i = start; i < end; ++i) {
    out += digits[i];
    const size_t remaining = end - i - 1;
    if (remaining > 0 && remaining % 3 == 0) out += ',';
  }
  out += digits.substr(end);
  return out;
}

}  // namespace

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  const double magnitude = std::fabs(value);
  std::string text;
  if (magnitude == 0.0) {
    text = "0";
  } else if (magnitude < 10.0) {
    text = fmt::format("{:.3f}", value);
  } else if (magnitude < 100.0) {
    text = fmt::format("{:.2f}", value);
  } else if (magnitude < 1000.0) {
    text = fmt::format("{:.1f}", value);
  } else {
    text = fmt::format("{:.0f}", value);
  }
  return group_thousands(text);
}

std::string format_count(int64_t value) { return group_thousands(fmt::format("{}", value)); }

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return format_number(fraction);
  return fmt::format("{:.1f}%", fraction * 100.0);
}

namespace {

std::string cache_label(bool prefix_cache) {
  return prefix_cache ? "prefix cache on" : "prefix cache off";
}

// "== title ==" on the terminal, a markdown heading, or a one-field CSV record.
std::string section_heading(const std::string& title, TableFormat format) {
  switch (format) {
    case TableFormat::kMarkdown:
      return fmt::format("### {}\n\n", title);
    case TableFormat::kCsv:
      return csv_cell(fmt::format("# {}", title)) + '\n';
    case TableFormat::kText:
      break;
  }
  return fmt::format("== {} ==\n", title);
}

std::optional<double> chosen_percentile(const Distribution& d, double q) {
  for (const auto& [chosen, value] : d.percentiles) {
    if (chosen == q) return value;
  }
  return std::nullopt;
}

// Names the first failed request, so a failed bench says why without rerunning it with run.
std::string first_failure_line(const BenchReport& r, TableFormat format) {
  const std::string line = fmt::format("first failure: {}", r.first_failure);
  switch (format) {
    case TableFormat::kMarkdown:  // a bold line: md output is headings, tables and bold notes
      return "**" + markdown_cell(line) + "**\n\n";
    case TableFormat::kCsv:
      return csv_cell("# " + line) + '\n';
    case TableFormat::kText:
      break;
  }
  return "  " + line + '\n';
}

// Mean, the chosen percentiles and max of each latency. The percentile columns come from the
// report itself, so --percentiles changes the table.
std::string latency_table(const BenchReport& r, TableFormat format) {
  std::vector<double> qs;
  for (const auto& [q, value] : r.ttft_ms.percentiles) qs.push_back(q);
  TextTable latency;
  std::vector<std::string> header = {"latency (ms)", "mean"};
  for (double q : qs) header.push_back(percentile_key(q));
  header.push_back("max");
  latency.add_row(header);
  const std::pair<const char*, const Distribution*> rows[] = {
      {"TTFT", &r.ttft_ms}, {"TPOT", &r.tpot_ms},   {"ITL", &r.itl_ms},
      {"E2E", &r.e2el_ms},  {"queue", &r.queue_ms},
  };
  for (const auto& [name, dist] : rows) {
    std::vector<std::string> cells = {name, format_number(dist->mean)};
    for (double q : qs) {
      const std::optional<double> v = chosen_percentile(*dist, q);
      cells.push_back(v ? format_number(*v) : "-");
    }
    cells.push_back(format_number(dist->max));
    latency.add_row(std::move(cells));
  }
  return latency.render_as(format, 2);
}

// "8.0 KiB": a collective's message size.
std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

// Tensor parallel: "64 all-reduces of 8.0 KiB + 1 all-gather of 6.1 KiB per decode step of 1
// row: 0.62 ms (14% of the step), 1.3 GB/s bus (measured standalone at these sizes)".
std::string collectives_text(const CollectiveFigures& f) {
  const auto plural = [](int64_t n, const char* word) {
    return fmt::format("{} {}{}", format_count(n), word, n == 1 ? "" : "s");
  };
  const std::string share = std::isfinite(f.decode_step_fraction)
                                ? format_percent(f.decode_step_fraction) + " of the step"
                                : std::string("no pure-decode step to compare");
  const char* how = f.fused_add_norm
                        ? "each all-reduce timed as its fused add-norm over the plain add-norm, "
                          "the gather standalone, at these sizes"
                        : "measured standalone at these sizes";
  return fmt::format("{} of {} + {} of {} per decode step of {}: {} ms ({}), {} GB/s bus ({})",
                     plural(f.all_reduces_per_step, "all-reduce"), bytes_text(f.all_reduce_bytes),
                     plural(f.all_gathers_per_step, "all-gather"), bytes_text(f.all_gather_bytes),
                     plural(f.rows, "row"), format_number(f.ms_per_decode_step), share,
                     format_number(f.all_reduce_bus_gbps), how);
}

// Throughputs, token counts, cache and KV use, bandwidth and step counts, one figure a row.
std::string totals_table(const BenchReport& r, TableFormat format) {
  TextTable totals(/*left_aligned_columns=*/2);
  // Markdown and CSV need a header row; the aligned text reads better without one.
  if (format != TableFormat::kText) totals.add_row({"figure", "value"});
  totals.add_row({"requests/s", format_number(r.request_throughput)});
  totals.add_row({"output tok/s", format_number(r.output_throughput)});
  totals.add_row({"total tok/s", format_number(r.total_token_throughput)});
  if (r.goodput) totals.add_row({"goodput req/s", format_number(*r.goodput)});
  totals.add_row({"tokens in / out", fmt::format("{} / {}", format_count(r.total_input_tokens),
                                                 format_count(r.total_output_tokens))});
  if (r.prefix_cache) {
    totals.add_row(
        {"prefix cache",
         fmt::format("{} lookups, {} of {} tokens hit ({}), {} evictions",
                     format_count(r.cache.lookups), format_count(r.cache.hit_tokens),
                     format_count(r.cache.queried_tokens), format_percent(r.cache.hit_rate()),
                     format_count(r.cache.evictions))});
  } else {
    totals.add_row({"prefix cache", "off"});
  }
  const double kv_usage =
      r.kv.total_blocks > 0 ? double(r.kv.peak_used_blocks) / r.kv.total_blocks : 0.0;
  totals.add_row(
      {"KV peak", fmt::format("{} of {} blocks ({}), {} preemptions",
                              format_count(r.kv.peak_used_blocks), format_count(r.kv.total_blocks),
                              format_percent(kv_usage), format_count(r.kv.preemptions))});
  std::string decode = fmt::format("{} GB/s", format_number(r.decode_gbps));
  if (r.bandwidth_floor_fraction) {
    decode += fmt::format(" ({} of the copy-bandwidth floor)",
                          format_percent(*r.bandwidth_floor_fraction));
  }
  totals.add_row({"decode bandwidth", decode});
  if (r.collectives) totals.add_row({"collectives", collectives_text(*r.collectives)});
  totals.add_row({"prefill / decode", fmt::format("{} tok/s prefill, {} tok/s in pure-decode steps",
                                                  format_number(r.prefill_throughput),
                                                  format_number(r.decode_throughput))});
  std::string steps =
      fmt::format("{} ({} prefill tokens computed, {} decode tokens", format_count(r.steps.steps),
                  format_count(r.steps.prefill_tokens), format_count(r.steps.decode_tokens));
  // Overlapped steps (engine.h): how many were enqueued before the ids of the one before.
  if (r.steps.steps_ahead > 0) {
    steps += fmt::format("; {} enqueued ahead", format_count(r.steps.steps_ahead));
  }
  totals.add_row({"steps", steps + ")"});
  return totals.render_as(format, 2);
}

}  // namespace

std::string render_report_table(const BenchReport& r, TableFormat format) {
  const std::string title =
      fmt::format("{}, {}: {} completed, {} failed, {} s", r.mode, cache_label(r.prefix_cache),
                  format_count(r.completed), format_count(r.failed), format_number(r.duration_s));
  std::string out = section_heading(title, format);
  if (r.failed > 0) out += first_failure_line(r, format);
  out += latency_table(r, format);
  out += (format == TableFormat::kText ? "" : "\n") + totals_table(r, format);
  if (!r.per_replica.empty()) out += render_cluster_table(r, format);
  return out;
}

namespace {

// The keys a reader compares between repeated runs; the JSON's "spread" has every key.
constexpr const char* kHeadlineKeys[] = {
    "request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
    "median_tpot_ms",     "p99_tpot_ms",       "median_e2el_ms", "p99_e2el_ms",
};
// And a cluster run's router figures, which only cluster runs have.
constexpr const char* kRoutingKeys[] = {
    "routing_predicted_hit_rate",
    "routing_delivered_hit_rate",
    "routing_available_hit_rate",
    "request_imbalance",
    "token_imbalance",
};

}  // namespace

std::string render_spread_table(const BenchReport& r, TableFormat format) {
  TextTable table;
  table.add_row({"key", "median", "min", "max", "95% interval"});
  auto add = [&](const char* key) {
    const auto it = r.spread.find(key);
    if (it == r.spread.end()) return;  // e.g. p99 when --percentiles leaves it out
    const Spread& s = it->second;
    table.add_row({key, format_number(s.median), format_number(s.min), format_number(s.max),
                   fmt::format("[{}, {}]", format_number(s.ci_low), format_number(s.ci_high))});
  };
  for (const char* key : kHeadlineKeys) add(key);
  for (const char* key : kRoutingKeys) add(key);
  return section_heading(fmt::format("spread over {} runs", r.repeats), format) +
         table.render_as(format, 2);
}

std::string render_cluster_table(const BenchReport& r, TableFormat format) {
  const RoutingFigures& g = r.routing_figures;
  const std::string router = fmt::format(
      "router {}: hit rate predicted {}, delivered {}, available anywhere {}; imbalance "
      "(max/mean) {} requests, {} tokens",
      r.routing.router, format_percent(g.predicted_hit_rate), format_percent(g.delivered_hit_rate),
      format_percent(g.available_hit_rate), format_number(g.request_imbalance),
      format_number(g.token_imbalance));
  // With --repeat the figures above are medians; the rows below are one run's.
  const std::string rows_from =
      r.repeats > 1 ? fmt::format("replica rows: run {} of {} (duration nearest the median)",
                                  r.representative_repeat, r.repeats)
                    : std::string();
  std::string out;
  switch (format) {
    case TableFormat::kMarkdown:
      out.append("\n**").append(markdown_cell(router)).append("**\n\n");
      if (!rows_from.empty()) out.append(markdown_cell(rows_from)).append("\n\n");
      break;
    case TableFormat::kCsv:
      out = csv_cell("# " + router) + '\n';
      if (!rows_from.empty()) out += csv_cell("# " + rows_from) + '\n';
      break;
    case TableFormat::kText:
      out = "  " + router + '\n';
      if (!rows_from.empty()) out += "  " + rows_from + '\n';
      break;
  }
  TextTable table;
  table.add_row(
      {"replica", "requests", "tokens in", "tokens out", "hit rate", "KV peak", "busy (s)"});
  for (size_t i = 0; i < r.per_replica.size(); ++i) {
    const ReplicaStats& s = r.per_replica[i];
    table.add_row({fmt::format("{}", i), format_count(s.requests), format_count(s.prompt_tokens),
                   format_count(s.output_tokens), format_percent(s.cache.hit_rate()),
                   fmt::format("{} of {}", format_count(s.kv_peak_used_blocks),
                               format_count(s.kv_total_blocks)),
                   format_number(s.busy_s)});
  }
  return out + table.render_as(format, 2);
}

std::string render_summary_table(const std::vector<BenchReport>& reports, TableFormat format) {
  TextTable table;
  std::vector<std::string> header = {""};
  std::vector<std::string> cache_row = {""};
  for (const BenchReport& r : reports) {
    header.push_back(r.mode);
    cache_row.push_back(r.prefix_cache ? "cache on" : "cache off");
  }
  if (format == TableFormat::kText) {
    table.add_row(std::move(header));
    table.add_row(std::move(cache_row));
  } else {  // one header row: "offline, cache on"
    for (size_t c = 1; c < header.size(); ++c) header[c] += ", " + cache_row[c];
    table.add_row(std::move(header));
  }
  auto add = [&](const char* name, auto value_of) {
    std::vector<std::string> cells = {name};
    for (const BenchReport& r : reports) cells.push_back(value_of(r));
    table.add_row(std::move(cells));
  };
  auto percentile_cell = [](const Distribution& d, double q) {
    const std::optional<double> v = chosen_percentile(d, q);
    return v ? format_number(*v) : std::string("-");
  };
  add("duration (s)", [](const BenchReport& r) { return format_number(r.duration_s); });
  add("requests/s", [](const BenchReport& r) { return format_number(r.request_throughput); });
  add("output tok/s", [](const BenchReport& r) { return format_number(r.output_throughput); });
  add("TTFT p50 (ms)", [](const BenchReport& r) { return format_number(r.ttft_ms.median); });
  add("TTFT p99 (ms)", [&](const BenchReport& r) { return percentile_cell(r.ttft_ms, 99); });
  add("TPOT p50 (ms)", [](const BenchReport& r) { return format_number(r.tpot_ms.median); });
  add("TPOT p99 (ms)", [&](const BenchReport& r) { return percentile_cell(r.tpot_ms, 99); });
  add("cache hit rate", [](const BenchReport& r) {
    return r.prefix_cache ? format_percent(r.cache.hit_rate()) : std::string("-");
  });
  add("failed", [](const BenchReport& r) { return format_count(r.failed); });
  return section_heading("summary", format) + table.render_as(format, 2);
}

namespace {

// Seven significant digits (far below any run-to-run noise, and short enough to read in a
// PR); a missing value is an empty cell.
std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.7g}", v);
}

// Every run's flat keys, and their union in first-seen order (runs of one bench share keys except
// optional ones such as goodput, so the order stays the JSON's).
struct RunKeys {
  std::vector<std::string> keys;
  std::vector<std::map<std::string, double>> values;  // one per run
};

RunKeys collect_run_keys(const std::vector<BenchReport>& reports) {
  RunKeys out;
  for (const BenchReport& r : reports) {
    std::map<std::string, double>& values = out.values.emplace_back();
    for (const auto& [key, value] : run_numbers(r)) {
      if (std::find(out.keys.begin(), out.keys.end(), key) == out.keys.end()) {
        out.keys.push_back(key);
      }
      values[key] = value;
    }
  }
  return out;
}

std::vector<std::string> spread_cells(const BenchReport& r) {
  std::vector<std::string> cells;
  for (const char* key : kHeadlineKeys) {
    const auto it = r.spread.find(key);
    if (it == r.spread.end()) {
      cells.insert(cells.end(), 4, "");
      continue;
    }
    for (double v : {it->second.min, it->second.max, it->second.ci_low, it->second.ci_high}) {
      cells.push_back(csv_number(v));
    }
  }
  return cells;
}

}  // namespace

std::string render_runs_csv(const std::vector<BenchReport>& reports,
                            const std::string& sweep_parameter,
                            const std::vector<double>& sweep_values) {
  const bool sweep = !sweep_parameter.empty() && sweep_values.size() == reports.size();
  const bool slo = std::any_of(reports.begin(), reports.end(),
                               [](const BenchReport& r) { return r.goodput.has_value(); });
  const bool repeats = std::any_of(reports.begin(), reports.end(),
                                   [](const BenchReport& r) { return r.repeats > 1; });
  const RunKeys keys = collect_run_keys(reports);
  std::vector<std::string> header;
  if (sweep) header.push_back(sweep_parameter);
  header.insert(header.end(), {"mode", "prefix_cache", "repeats"});
  if (slo) header.push_back("meets_slo");
  header.insert(header.end(), keys.keys.begin(), keys.keys.end());
  if (repeats) {
    for (const char* key : kHeadlineKeys) {
      for (const char* stat : {"_min", "_max", "_ci95_low", "_ci95_high"}) {
        header.push_back(std::string(key) + stat);
      }
    }
  }
  TextTable table;
  table.add_row(std::move(header));
  for (size_t i = 0; i < reports.size(); ++i) {
    const BenchReport& r = reports[i];
    std::vector<std::string> cells;
    if (sweep) cells.push_back(csv_number(sweep_values[i]));
    cells.insert(cells.end(),
                 {r.mode, r.prefix_cache ? "true" : "false", fmt::format("{}", r.repeats)});
    if (slo) cells.push_back(meets_slo(r) ? "true" : "false");
    for (const std::string& key : keys.keys) {
      const auto it = keys.values[i].find(key);
      cells.push_back(it == keys.values[i].end() ? "" : csv_number(it->second));
    }
    if (repeats) {
      const std::vector<std::string> spread = spread_cells(r);
      cells.insert(cells.end(), spread.begin(), spread.end());
    }
    table.add_row(std::move(cells));
  }
  return table.render_as(TableFormat::kCsv);
}

}  // namespace rose
