// `roseinfer bench`: build the backend once, run the workload under each (mode, prefix cache)
// combination asked for, print a report table per run and a side-by-side summary, and optionally
// write the versioned results JSON (engine/metrics/results_json.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "engine/cluster/ranks.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/prompts.h"
#include "engine/io/workloads.h"
#include "engine/metrics/metrics.h"
#include "engine/metrics/repeat.h"
#include "engine/metrics/report_table.h"
#include "engine/metrics/results_json.h"
#include "engine/scheduler/engine.h"
#include "roseinfer_version.h"

namespace {

// Timed calls of each collective per measurement (--tensor-parallel N > 1, after each run).
constexpr int kCollectiveTimingCalls = 100;

struct BenchArgs {
  std::string prompts_path;
  bool skip_invalid = false;
  rose::WorkloadOptions workload;
  int num_prompts = 0;
  int random_output_len = 128;
  int random_prefix_len = 0;
  CLI::Option* num_prompts_opt = nullptr;
  CLI::Option* random_output_len_opt = nullptr;
  CLI::Option* random_prefix_len_opt = nullptr;
  CLI::Option* request_rate_opt = nullptr;
  CLI::Option* copy_bandwidth_opt = nullptr;
  std::string mode = "offline";
  bool no_prefix_cache = false;
  bool both_cache_settings = false;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int max_concurrency = 0;
  int warmup = 0;
  int repeat = 1;
  std::string sweep;  // "request-rate=1,2,inf" or "max-concurrency=1,4,16"
  std::string percentiles = "50,95,99";
  std::string slo;
  std::string json_path;
  std::string format = "table";
  rose::TableFormat table_format = rose::TableFormat::kText;  // parsed from `format`
  bool save_detailed = false;
  bool keep_cache = false;
  double copy_bandwidth_gbps = 0;
  rose::cli::ModelFlags model;
  rose::cli::EngineFlags engine;
  rose::cli::RequestDefaults defaults;
  rose::cli::ClusterFlags cluster;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, sep);) parts.push_back(part);
  return parts;
}

bool parse_double(const std::string& text, double& out) {
  try {
    size_t used = 0;
    out = std::stod(text, &used);
    return used == text.size() && std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

// "50,95,99" -> {50, 95, 99}; "" on success, else what is wrong.
std::string parse_percentiles(const std::string& text, std::vector<double>* out) {
  std::vector<double> values;
  for (const std::string& part : split(text, ',')) {
    double q = 0;
    if (!parse_double(part, q) || q < 0 || q > 100) {
      return "each percentile must be a number in [0, 100], got '" + part + "'";
    }
    values.push_back(q);
  }
  if (values.empty()) return "give at least one percentile, e.g. 50,95,99";
  if (out) *out = values;
  return "";
}

// "ttft=MS,tpot=MS,e2el=MS" (any subset) -> Slo.
std::string parse_slo(const std::string& text, rose::Slo* out) {
  rose::Slo slo;
  for (const std::string& part : split(text, ',')) {
    const size_t eq = part.find('=');
    double ms = 0;
    if (eq == std::string::npos || !parse_double(part.substr(eq + 1), ms) || ms <= 0) {
      return "expected ttft=MS,tpot=MS,e2el=MS with positive milliseconds, got '" + part + "'";
    }
    const std::string key = part.substr(0, eq);
    if (key == "ttft") {
      slo.ttft_ms = ms;
    } else if (key == "tpot") {
      slo.tpot_ms = ms;
    } else if (key == "e2el") {
      slo.e2el_ms = ms;
    } else {
      return "unknown SLO metric '" + key + "' (ttft, tpot or e2el)";
    }
  }
  if (out) *out = slo;
  return "";
}

// `--sweep PARAM=V,V,...`: the online runs of one sweep, one per value.
struct SweepSpec {
  std::string parameter;       // as in the results JSON: request_rate or max_concurrency
  std::vector<double> values;  // in the order given; request rates may be inf
};

// "" on success, else what is wrong.
std::string parse_sweep(const std::string& text, SweepSpec* out) {
  const size_t eq = text.find('=');
  const std::string name = text.substr(0, eq);
  SweepSpec spec;
  if (eq == std::string::npos || (name != "request-rate" && name != "max-concurrency")) {
    return "expected request-rate=R,R,... or max-concurrency=N,N,..., got '" + text + "'";
  }
  const bool rate = name == "request-rate";
  spec.parameter = rate ? "request_rate" : "max_concurrency";
  for (const std::string& part : split(text.substr(eq + 1), ',')) {
    double v = 0;
    if (rate && part == "inf") {
      v = std::numeric_limits<double>::infinity();
    } else if (!parse_double(part, v) || v <= 0 || (!rate && v != std::floor(v))) {
      return fmt::format("each {} must be a positive {}, got '{}'", name,
                         rate ? "number or inf" : "integer", part);
    }
    spec.values.push_back(v);
  }
  if (spec.values.empty()) return "give at least one value after " + name + "=";
  if (out) *out = spec;
  return "";
}

struct Progress {
  bool enabled = isatty(STDERR_FILENO) != 0;
  std::string label;
  int total = 0;
  int done = 0;
  std::chrono::steady_clock::time_point last_draw;

  void finish_one() {
    ++done;
    const auto now = std::chrono::steady_clock::now();
    if (!enabled || (done < total && now - last_draw < std::chrono::milliseconds(100))) return;
    last_draw = now;
    fmt::print(stderr, "\r  {}: {}/{} requests", label, done, total);
    std::fflush(stderr);
  }
  void clear() {
    if (enabled) fmt::print(stderr, "\r\033[K");
  }
};

// The workload's specs (a prompt file, or a synthetic workload sized for the model), tokenized
// into the base requests before any clock starts.
struct BenchInput {
  bool from_file = false;
  rose::PromptFile file;
  std::string name;  // the prompt file's path or the workload's name
  std::vector<rose::EngineRequest> base;
  int64_t input_tokens = 0;
};

rose::PromptFile read_bench_file(BenchArgs& args) {
  rose::PromptFile file = rose::read_prompt_file(args.prompts_path, args.skip_invalid);
  for (const rose::SkippedLine& skip : file.skipped) rose::cli::notice("skipped {}", skip.message);
  if (args.num_prompts_opt->count() &&
      static_cast<size_t>(args.num_prompts) < file.requests.size()) {
    file.requests.resize(static_cast<size_t>(args.num_prompts));  // the file's first N
  }
  return file;
}

BenchInput load_bench_input(BenchArgs& args, const rose::cli::LoadedModel& model, int context,
                            rose::PromptFile file) {
  using namespace rose;
  BenchInput in;
  in.from_file = !args.prompts_path.empty();
  in.file = std::move(file);
  std::string source = args.prompts_path;
  in.name = args.prompts_path;
  if (!in.from_file) {
    WorkloadOptions& w = args.workload;
    if (args.num_prompts_opt->count()) w.num_prompts = args.num_prompts;
    if (args.random_output_len_opt->count()) w.random_output_len = args.random_output_len;
    if (args.random_prefix_len_opt->count()) w.random_prefix_len = args.random_prefix_len;
    w.seed = args.engine.seed;
    w.vocab_size = model.config().vocab_size;
    w.max_model_len = context;
    w.replica_kv_tokens = int64_t(args.engine.num_kv_blocks) * args.engine.block_size;
    in.file.requests = make_workload(w, model.tokenizer.get());
    source = "dataset " + w.name;
    in.name = w.name;
  }
  in.base =
      prepare_requests(in.file.requests, source, model, args.defaults, args.engine.seed, context);
  for (const EngineRequest& r : in.base) in.input_tokens += static_cast<int64_t>(r.prompt.size());
  return in;
}

// Online arrivals: --request-rate (Poisson or gamma), else the file's arrival_time when every
// line has one, else all at once.
struct OnlineArrivals {
  std::vector<double> times;  // (num requests,)
  std::string text;           // how they were made, for the header line
  bool trace = false;         // from the file
};

OnlineArrivals online_arrivals(const BenchArgs& args, const BenchInput& in) {
  OnlineArrivals a;
  std::optional<std::vector<double>> file_times;
  // Files, and workloads that carry their own arrivals (chat), replay them.
  if (!args.request_rate_opt->count()) {
    file_times = rose::cli::arrival_times(in.file.requests);
  }
  if (file_times) {
    a.times = std::move(*file_times);
    a.text = "the file's arrival_time";
    a.trace = true;
    return a;
  }
  a.times = rose::make_arrival_times(static_cast<int>(in.base.size()), args.request_rate,
                                     args.burstiness, args.engine.seed);
  a.text = std::isinf(args.request_rate)
               ? std::string("all at once (--request-rate inf)")
               : fmt::format("{} req/s, burstiness {}", args.request_rate, args.burstiness);
  return a;
}

// The warm-up run (cache reset after it unless `keep_cache`), then the measured run, with a
// progress line on stderr for each.
rose::RunResult run_measured(rose::Runner& runner, const std::vector<rose::EngineRequest>& warmup,
                             const std::vector<rose::EngineRequest>& requests,
                             const std::string& label, bool keep_cache) {
  using namespace rose;
  Progress progress;
  RunCallbacks callbacks;
  callbacks.on_finish = [&](int, const RequestResult&) { progress.finish_one(); };
  if (!warmup.empty()) {
    progress.total = static_cast<int>(warmup.size());
    progress.label = label + " (warm-up)";
    runner.run(warmup, callbacks);
    progress.clear();
    // The measured run starts cold unless asked otherwise.
    if (!keep_cache) runner.reset_prefix_cache();
    progress.done = 0;
  }
  progress.label = label;
  progress.total = static_cast<int>(requests.size());
  const RunResult result = runner.run(requests, callbacks);
  progress.clear();
  return result;
}

struct BenchContext {
  const BenchArgs& args;
  const BenchInput& in;
  const OnlineArrivals& arrivals;
  const std::vector<double>& percentiles;
  const rose::Slo& slo;
  std::optional<double> copy_bandwidth;
  const rose::Tokenizer* tokenizer = nullptr;  // for requests' stop strings
};

// One measured run of `mode` and `cache` with a fresh runner (an engine, or a cluster of them
// with --data-parallel), so its cache starts cold.
rose::BenchReport run_once(const BenchContext& b, rose::cli::Replicas& replicas,
                           const std::string& model_id, rose::SchedulerMode mode, bool cache,
                           const std::vector<rose::EngineRequest>& warmup,
                           const std::string& label) {
  using namespace rose;
  EngineConfig config = cli::engine_config(b.args.engine, mode, cache);
  config.max_concurrency = b.args.max_concurrency;
  const std::unique_ptr<Runner> runner =
      cli::make_runner(replicas, config, model_id, b.args.cluster, b.tokenizer);
  std::vector<EngineRequest> requests = b.in.base;
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].arrival_s = mode == SchedulerMode::kOnline ? b.arrivals.times[i] : 0.0;
  }
  const RunResult result = run_measured(*runner, warmup, requests, label, b.args.keep_cache);
  BenchReport report =
      make_report(result, requests, mode_name(mode), cache, b.percentiles, b.slo, b.copy_bandwidth);
  if (b.args.model.tensor_parallel > 1) {
    // After the run, with nothing else running: the collectives of one decode step at the run's
    // mean decode batch, on the first replica (its GPUs' links stand for every replica's).
    const std::optional<CollectiveTiming> timing = replicas.backends.front()->time_collectives(
        mean_decode_batch(result.steps), kCollectiveTimingCalls);
    if (timing) report.collectives = collective_figures(*timing, result.steps);
  }
  return report;
}

// One report per (mode, prefix cache) combination; with --repeat N, the median of N cold runs.
std::vector<rose::BenchReport> run_all(const BenchContext& b, rose::cli::Replicas& replicas,
                                       const std::string& model_id) {
  using namespace rose;
  std::vector<EngineRequest> warmup;
  for (int i = 0; i < b.args.warmup; ++i) {
    warmup.push_back(b.in.base[static_cast<size_t>(i) % b.in.base.size()]);
    warmup.back().arrival_s = 0;
  }
  std::vector<bool> cache_settings = {!b.args.no_prefix_cache};
  if (b.args.both_cache_settings) cache_settings = {true, false};
  std::vector<BenchReport> reports;
  for (SchedulerMode mode : cli::parse_modes(b.args.mode)) {
    for (bool cache : cache_settings) {
      std::string label = fmt::format("{}, prefix cache {}", mode_name(mode), cache ? "on" : "off");
      std::vector<BenchReport> repeats;
      for (int r = 0; r < b.args.repeat; ++r) {
        const std::string run_label =
            b.args.repeat > 1 ? fmt::format("{} (run {}/{})", label, r + 1, b.args.repeat) : label;
        repeats.push_back(run_once(b, replicas, model_id, mode, cache, warmup, run_label));
      }
      reports.push_back(repeats.size() > 1 ? combine_repeats(repeats, b.args.engine.seed)
                                           : std::move(repeats.front()));
      // CSV is one table of every run, printed at the end (a second header would break it).
      if (b.args.table_format == TableFormat::kCsv) continue;
      fmt::print("\n{}", render_report_table(reports.back(), b.args.table_format));
      if (reports.back().repeats > 1) {
        fmt::print("\n{}", render_spread_table(reports.back(), b.args.table_format));
      }
      std::fflush(stdout);
    }
  }
  return reports;
}

std::string sweep_value_text(double v) {
  return std::isinf(v) ? std::string("inf") : rose::format_number(v);
}

// One online run per sweep point on the same requests: a new arrival schedule per request rate
// (same seed, so points differ only in rate), or a new in-flight cap on the usual arrivals.
std::vector<rose::BenchReport> run_sweep(const BenchContext& b, rose::cli::Replicas& replicas,
                                         const std::string& model_id, const SweepSpec& spec) {
  using namespace rose;
  std::vector<BenchReport> reports;
  for (double value : spec.values) {
    BenchArgs point_args = b.args;
    OnlineArrivals point_arrivals = b.arrivals;
    if (spec.parameter == "request_rate") {
      point_arrivals.times = make_arrival_times(static_cast<int>(b.in.base.size()), value,
                                                b.args.burstiness, b.args.engine.seed);
    } else {
      point_args.max_concurrency = static_cast<int>(value);
    }
    const BenchContext point{point_args,       b.in,       point_arrivals, b.percentiles, b.slo,
                             b.copy_bandwidth, b.tokenizer};
    const std::string label = fmt::format("online, {} {}", spec.parameter, sweep_value_text(value));
    reports.push_back(run_once(point, replicas, model_id, SchedulerMode::kOnline,
                               !b.args.no_prefix_cache, {}, label));
  }
  return reports;
}

// Per point: throughput and latency percentiles, goodput under --slo; then the highest point that
// meets the SLO.
std::string render_sweep(const SweepSpec& spec, const std::vector<rose::BenchReport>& reports,
                         rose::TableFormat format, bool with_slo) {
  using rose::format_number;
  rose::TextTable table;
  std::vector<std::string> header = {spec.parameter, "req/s",    "out tok/s",
                                     "TTFT p50",     "TTFT p99", "TPOT p50",
                                     "TPOT p99",     "E2E p50",  "E2E p99"};
  if (with_slo) header.push_back("goodput req/s");
  table.add_row(header);
  auto p99 = [](const rose::Distribution& d) {
    for (const auto& [q, v] : d.percentiles) {
      if (q == 99) return format_number(v);
    }
    return std::string("-");
  };
  std::optional<double> best;
  for (size_t i = 0; i < reports.size(); ++i) {
    const rose::BenchReport& r = reports[i];
    std::vector<std::string> cells = {sweep_value_text(spec.values[i]),
                                      format_number(r.request_throughput),
                                      format_number(r.output_throughput),
                                      format_number(r.ttft_ms.median),
                                      p99(r.ttft_ms),
                                      format_number(r.tpot_ms.median),
                                      p99(r.tpot_ms),
                                      format_number(r.e2el_ms.median),
                                      p99(r.e2el_ms)};
    if (with_slo) cells.push_back(r.goodput ? format_number(*r.goodput) : "-");
    table.add_row(std::move(cells));
    if (rose::meets_slo(r) && (!best || spec.values[i] > *best)) best = spec.values[i];
  }
  const bool md = format == rose::TableFormat::kMarkdown;
  const std::string title = fmt::format("sweep over {} (latencies in ms)", spec.parameter);
  std::string out = md ? "\n### " + title + "\n\n" : "\n== " + title + " ==\n";
  out += table.render_as(format, 2);
  if (!with_slo) return out;
  const std::string verdict =
      best ? fmt::format("highest {} meeting the SLO: {}", spec.parameter, sweep_value_text(*best))
           : fmt::format("no {} met the SLO", spec.parameter);
  // In markdown a bold paragraph, so a pasted sweep is headings, a table and bold notes only.
  return out + (md ? fmt::format("\n**{}**\n", verdict) : verdict + "\n");
}

// What besides the requests changes the computed tokens. Weights kept quantized add their types;
// otherwise the text is what earlier results files hold, so they still compare.
std::string fingerprint_config(const rose::cli::LoadedModel& model, const rose::Backend& backend,
                               const std::string& dtype) {
  const std::string compute_dtype = model.cuda ? dtype : std::string("fp32");
  std::string text = fmt::format("model={};dtype={}", model.config().name, compute_dtype);
  if (backend.weight_types() != compute_dtype) text += ";weights=" + backend.weight_types();
  return text;
}

// The % of floor's denominator: --copy-bandwidth-gbps, else what the first replica measures now,
// before any run holds KV (a fixed figure read 122% on an H200, whose HBM outruns the H100's).
std::optional<double> copy_bandwidth(const BenchArgs& args, rose::Backend& backend) {
  if (args.copy_bandwidth_opt->count()) return args.copy_bandwidth_gbps;
  return backend.measure_copy_bandwidth_gbps();
}

// Where that figure came from: "given", "measured", or null where there is none (the CPU).
const char* copy_bandwidth_source(const BenchArgs& args, const std::optional<double>& gbps) {
  if (args.copy_bandwidth_opt->count()) return "given";
  return gbps ? "measured" : nullptr;
}

// The "config" object of the results file: every flag that shaped the numbers.
std::vector<std::pair<std::string, rose::ConfigValue>> bench_config_entries(
    const BenchContext& b, const rose::cli::LoadedModel& model, const rose::Backend& backend,
    int context) {
  using rose::ConfigValue;
  const BenchArgs& args = b.args;
  std::vector<std::pair<std::string, ConfigValue>> c;
  c.emplace_back("model", model.name);
  c.emplace_back("device", model.cuda ? "cuda" : "cpu");
  c.emplace_back("dtype", model.cuda ? args.model.dtype : std::string("fp32"));
  c.emplace_back("weights", backend.weight_types());
  if (args.model.tensor_parallel > 1) {
    c.emplace_back("tensor_parallel", static_cast<int64_t>(args.model.tensor_parallel));
  }
  c.emplace_back("mode", args.mode);
  c.emplace_back("prefix_cache", args.both_cache_settings
                                     ? std::string("both")
                                     : std::string(args.no_prefix_cache ? "off" : "on"));
  c.emplace_back("dataset", b.in.name);
  c.emplace_back("seed", static_cast<int64_t>(args.engine.seed));
  if (!b.in.from_file) {
    const rose::WorkloadOptions& w = args.workload;
    c.emplace_back("num_prompts", static_cast<int64_t>(b.in.base.size()));
    c.emplace_back("random_input_len", static_cast<int64_t>(w.random_input_len));
    c.emplace_back("random_output_len", w.random_output_len
                                            ? ConfigValue(int64_t(*w.random_output_len))
                                            : ConfigValue());
    c.emplace_back("random_range_ratio", w.random_range_ratio);
    c.emplace_back("random_prefix_len", w.random_prefix_len
                                            ? ConfigValue(int64_t(*w.random_prefix_len))
                                            : ConfigValue());
    c.emplace_back("num_prefix_groups", static_cast<int64_t>(w.num_prefix_groups));
  }
  c.emplace_back("request_rate",
                 args.request_rate_opt->count()
                     ? ConfigValue(args.request_rate)
                     : ConfigValue(std::string(b.arrivals.trace ? "trace" : "inf")));
  c.emplace_back("burstiness", args.burstiness);
  c.emplace_back("max_concurrency", static_cast<int64_t>(args.max_concurrency));
  c.emplace_back("warmup", static_cast<int64_t>(args.warmup));
  c.emplace_back("repeat", static_cast<int64_t>(args.repeat));
  c.emplace_back("sweep", args.sweep.empty() ? ConfigValue() : ConfigValue(args.sweep));
  c.emplace_back("keep_cache_between_runs", args.keep_cache);
  c.emplace_back("block_size", static_cast<int64_t>(backend.block_size()));
  c.emplace_back("num_kv_blocks", static_cast<int64_t>(backend.num_kv_blocks()));
  c.emplace_back("data_parallel", static_cast<int64_t>(args.cluster.data_parallel));
  c.emplace_back("router", args.cluster.router);
  c.emplace_back("backend", args.cluster.backend);
  c.emplace_back("max_num_seqs", static_cast<int64_t>(args.engine.max_num_seqs));
  c.emplace_back("max_num_batched_tokens",
                 static_cast<int64_t>(args.engine.max_num_batched_tokens));
  c.emplace_back("max_model_len", static_cast<int64_t>(context));
  c.emplace_back("gpu_memory_utilization", args.engine.gpu_memory_utilization);
  c.emplace_back("cuda_graphs", model.cuda && !args.engine.no_cuda_graph);
  // Whether steps may overlap (where the backend runs them asynchronously: results' steps_ahead
  // counts those that did).
  c.emplace_back("overlap", !args.engine.no_overlap);
  c.emplace_back("batch_invariant", model.cuda && args.engine.batch_invariant);
  c.emplace_back("percentiles", args.percentiles);
  c.emplace_back("slo", args.slo.empty() ? ConfigValue() : ConfigValue(args.slo));
  c.emplace_back("copy_bandwidth_gbps",
                 b.copy_bandwidth ? ConfigValue(*b.copy_bandwidth) : ConfigValue());
  const char* source = copy_bandwidth_source(args, b.copy_bandwidth);
  c.emplace_back("copy_bandwidth_source",
                 source ? ConfigValue(std::string(source)) : ConfigValue());
  return c;
}

void write_bench_json(const BenchContext& b, const rose::cli::LoadedModel& model,
                      const rose::Backend& backend, const std::string& device_name, int context,
                      const std::vector<rose::BenchReport>& reports, const SweepSpec& sweep) {
  using namespace rose;
  BenchResults results;
  results.roseinfer_version = ROSEINFER_VERSION;
  results.git_commit = ROSEINFER_GIT_COMMIT;
  results.date = utc_timestamp_now();
  results.command = cli::command_line();
  results.model = model.name;
  results.device = device_name;
  results.config = bench_config_entries(b, model, backend, context);
  results.workload.name = b.in.name;
  results.workload.num_requests = static_cast<int64_t>(b.in.base.size());
  results.workload.total_input_tokens = b.in.input_tokens;
  // What changes the computed tokens besides the requests themselves.
  results.workload.fingerprint =
      workload_fingerprint(b.in.base, fingerprint_config(model, backend, b.args.model.dtype));
  results.runs = reports;
  results.sweep_parameter = sweep.parameter;
  results.sweep_values = sweep.values;
  write_file_atomically(b.args.json_path, results_to_json(results, b.args.save_detailed));
  cli::notice("wrote {}", b.args.json_path);
}

// An MPI rank other than 0 (ranks.h): the same flags build this rank's replicas, which serve rank
// 0's calls; rank 0 reads the workload and writes every report.
void serve_rank(BenchArgs& args) {
  using namespace rose;
  cli::LoadedModel model = cli::open_model(args.model);
  cli::Replicas replicas = cli::make_replicas(model, args.model, args.engine, args.cluster);
  std::vector<ServedBackend> served;
  for (size_t r = 0; r < replicas.backends.size(); ++r) {
    served.push_back(
        {replicas.backends[r].get(), replicas.sim ? replicas.clocks[r].get() : nullptr});
  }
  serve_rank_replicas(served, model.tokenizer.get(), replicas.concurrent);
}

void bench_command(BenchArgs& args) {
  using namespace rose;
  std::vector<double> percentiles;
  parse_percentiles(args.percentiles, &percentiles);
  Slo slo;
  if (!args.slo.empty()) parse_slo(args.slo, &slo);
  args.table_format = parse_table_format(args.format, "--format");
  cli::check_cluster_flags(args.model, args.cluster);
  if (rank_world().rank != 0) return serve_rank(args);
  // Under mpirun, the other ranks serve until this is destroyed (also on an error).
  const RankPeers peers;
  if (args.prompts_path.empty() && args.workload.name.empty()) {
    throw CLI::ValidationError(
        "bench: give a prompt file or --dataset-name (random, shared-prefix, sharegpt, seed000, "
        "nano256, serve, grid:B:PP:TG)");
  }
  // Parse before loading the model: a bad file should fail fast.
  PromptFile file;
  if (!args.prompts_path.empty()) file = read_bench_file(args);
  cli::LoadedModel model = cli::open_model(args.model);
  const int context = cli::max_model_len(model, args.engine);
  const BenchInput in = load_bench_input(args, model, context, std::move(file));
  const OnlineArrivals arrivals = online_arrivals(args, in);
  BenchContext b{args, in, arrivals, percentiles, slo, std::nullopt, model.tokenizer.get()};
  cli::Replicas replicas = cli::make_replicas(model, args.model, args.engine, args.cluster);
  const Backend* backend = replicas.backends.front().get();
  b.copy_bandwidth = copy_bandwidth(args, *replicas.backends.front());
  // With md or csv, stdout holds only the tables (a PR paste, a CSV file): this goes to stderr.
  std::FILE* info = args.table_format == TableFormat::kText ? stdout : stderr;
  fmt::print(info, "roseinfer bench: {} requests ({} input tokens) from {}; model {} on {}\n",
             in.base.size(), in.input_tokens, in.name, model.name, replicas.device_name());
  if (b.copy_bandwidth) {
    fmt::print(info, "copy bandwidth: {:.0f} GB/s ({}), the floor decode's GB/s is held against\n",
               *b.copy_bandwidth, copy_bandwidth_source(args, b.copy_bandwidth));
  }
  if (args.mode == "online" || args.mode == "all") {
    fmt::print(info, "online arrivals: {}{}\n", arrivals.text,
               args.max_concurrency ? fmt::format(", at most {} in flight", args.max_concurrency)
                                    : std::string());
  }
  std::fflush(info);

  SweepSpec sweep;
  if (!args.sweep.empty()) parse_sweep(args.sweep, &sweep);
  const std::vector<BenchReport> reports = sweep.values.empty()
                                               ? run_all(b, replicas, model.config().name)
                                               : run_sweep(b, replicas, model.config().name, sweep);
  if (args.table_format == TableFormat::kCsv) {
    fmt::print("{}", render_runs_csv(reports, sweep.parameter, sweep.values));
  } else if (!sweep.values.empty()) {
    fmt::print("{}", render_sweep(sweep, reports, args.table_format, !args.slo.empty()));
  } else if (reports.size() > 1) {
    fmt::print("\n{}", render_summary_table(reports, args.table_format));
  }
  std::fflush(stdout);
  if (!args.json_path.empty()) {
    write_bench_json(b, model, *backend, replicas.device_name(), context, reports, sweep);
  }

  int failed = 0;
  for (const BenchReport& r : reports) failed += r.failed;
  if (failed > 0) fail("{} request(s) failed across {} run(s)", failed, reports.size());
}

// register_bench_command's phases, one per group of flags; the groups are added in this order,
// which is the order --help lists them in.

// What to run: a prompt file or a named synthetic workload (the two exclude each other).
void add_input_flags(CLI::App* cmd, BenchArgs& args) {
  auto* file_opt = cmd->add_option("PROMPTS", args.prompts_path,
                                   "JSONL prompt file (as for run; arrival_time drives online mode "
                                   "when every line has one and --request-rate is not given)");
  auto* dataset_opt =
      cmd->add_option("--dataset-name,--dataset", args.workload.name,
                      "synthetic workload: random, shared-prefix, sharegpt, seed000 (64 x one "
                      "856-token prompt, 16 out), nano256 (256 x [100,1024] in and out), serve "
                      "(500 x 550 tokens, 330 shared, 150 out), grid:B:PP:TG");
  file_opt->excludes(dataset_opt);
  dataset_opt->check(CLI::Validator(
      [](std::string& name) -> std::string {
        try {
          rose::check_workload_name(name);
        } catch (const rose::Error& e) {
          // CLI11 already names the flag.
          std::string message = e.what();
          const std::string flag = "--dataset-name ";
          if (message.rfind(flag, 0) == 0) message.erase(0, flag.size());
          return message;
        }
        return "";
      },
      "SPEC"));
  cmd->add_option("--dataset-path", args.workload.dataset_path,
                  "ShareGPT JSON file for --dataset-name sharegpt");
  cmd->add_flag("--skip-invalid", args.skip_invalid, "skip bad prompt-file lines, reporting them");
}

// Which runs: scheduler modes and prefix-cache settings.
void add_run_selection_flags(CLI::App* cmd, BenchArgs& args) {
  cmd->add_option("--mode", args.mode,
                  "naive (one request at a time), offline (all at t=0, throughput), online "
                  "(arrivals over time, latency) or all three")
      ->check(CLI::IsMember({"naive", "offline", "online", "all"}))
      ->capture_default_str();
  auto* no_cache =
      cmd->add_flag("--no-prefix-cache", args.no_prefix_cache, "run with the prefix cache off");
  cmd->add_flag("--both-cache-settings", args.both_cache_settings,
                "run every mode with the prefix cache on and off")
      ->excludes(no_cache);
}

// The synthetic workloads' sizes; the *_opt handles tell bench_command which were given.
void add_workload_shape_flags(CLI::App* cmd, BenchArgs& args) {
  args.num_prompts_opt =
      cmd->add_option("--num-prompts", args.num_prompts,
                      "requests: a synthetic workload's count (default: the workload's own; random "
                      "and shared-prefix 1000), or the first N lines of a prompt file")
          ->check(CLI::PositiveNumber);
  cmd->add_option("--random-input-len", args.workload.random_input_len,
                  "random/shared-prefix: prompt tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  args.random_output_len_opt =
      cmd->add_option("--random-output-len", args.random_output_len,
                      "random/shared-prefix: output tokens (default 128); sharegpt: the cap "
                      "(default 1024)")
          ->check(CLI::PositiveNumber);
  cmd->add_option("--random-range-ratio", args.workload.random_range_ratio,
                  "random: lengths uniform in [len*(1-r), len*(1+r)]")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  args.random_prefix_len_opt =
      cmd->add_option("--random-prefix-len", args.random_prefix_len,
                      "random: shared prefix tokens before each prompt (default 0); "
                      "shared-prefix: shared part of the prompt (default 60%)")
          ->check(CLI::NonNegativeNumber);
  cmd->add_option("--num-prefix-groups", args.workload.num_prefix_groups,
                  "shared-prefix: distinct shared prefixes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// How online requests arrive.
void add_arrival_flags(CLI::App* cmd, BenchArgs& args) {
  args.request_rate_opt =
      cmd->add_option("--request-rate", args.request_rate,
                      "online: mean requests per second (inf: all at once; default inf, or the "
                      "file's arrival_time)")
          ->check(CLI::Validator(
              [](std::string& v) -> std::string {
                if (v == "inf") return "";
                double r = 0;
                return parse_double(v, r) && r > 0 ? "" : "must be a positive number or inf";
              },
              "RATE"));
  cmd->add_option("--burstiness", args.burstiness,
                  "online: gamma shape of the arrival gaps (1: Poisson; < 1 burstier)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-concurrency", args.max_concurrency,
                  "online: requests in flight at most (0: no cap)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// How each run is measured and judged: warm-up, repeats, sweeps, percentiles, SLOs.
void add_measurement_flags(CLI::App* cmd, BenchArgs& args) {
  cmd->add_option("--warmup", args.warmup,
                  "extra requests (copies of the first ones) run before each measured run and "
                  "excluded from every number")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--repeat", args.repeat,
                  "measure each mode and cache setting N times (each from a cold cache); the "
                  "results hold the median and the spread (min, max, bootstrap 95% interval)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--sweep", args.sweep,
                  "online runs, one per point on the same workload: request-rate=1,2,4,inf or "
                  "max-concurrency=1,4,16; prints throughput and latency per point and, with "
                  "--slo, the highest point every request of which met the SLO")
      ->check(CLI::Validator([](std::string& v) { return parse_sweep(v, nullptr); }, "PARAM=V,..."))
      ->excludes("--repeat")
      ->excludes("--both-cache-settings");
  cmd->add_option("--percentiles", args.percentiles, "latency percentiles to report")
      ->check(
          CLI::Validator([](std::string& v) { return parse_percentiles(v, nullptr); }, "Q,Q,..."))
      ->capture_default_str();
  cmd->add_option("--slo", args.slo,
                  "goodput bounds in ms, e.g. ttft=200,tpot=50,e2el=2000 (any subset)")
      ->check(CLI::Validator([](std::string& v) { return parse_slo(v, nullptr); }, "SLO"));
}

// Where the results go and what they hold.
void add_output_flags(CLI::App* cmd, BenchArgs& args) {
  cmd->add_option("--json", args.json_path,
                  "write the results (versioned schema, vLLM-style keys) to FILE, atomically");
  cmd->add_option("--format", args.format,
                  "table (aligned text), md (markdown tables only on stdout) or csv (one table "
                  "on stdout: a row per run or sweep point, every results key); with md and csv "
                  "the header lines go to stderr")
      ->check(CLI::IsMember({"table", "text", "md", "markdown", "csv"}))
      ->capture_default_str();
  cmd->add_flag("--save-detailed", args.save_detailed,
                "add per-request arrays (lengths, ttft, itl, e2el, cached tokens) to --json");
  cmd->add_flag("--keep-cache-between-runs", args.keep_cache,
                "keep what --warmup cached for the measured run (each mode and cache setting "
                "still has its own engine, so runs never share a cache)");
  args.copy_bandwidth_opt =
      cmd->add_option("--copy-bandwidth-gbps", args.copy_bandwidth_gbps,
                      "device copy bandwidth in GB/s for the decode '% of floor' figure (default: "
                      "measured at start by device-to-device copies, summed over "
                      "--tensor-parallel GPUs; none on the CPU)")
          ->check(CLI::PositiveNumber);
}

}  // namespace

void register_bench_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<BenchArgs>();
  args->workload.name.clear();  // set only by --dataset-name
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure TTFT, TPOT, ITL, end-to-end latency, throughput and prefix-cache hits on a prompt "
      "file or a synthetic workload, per scheduler mode and prefix-cache setting");
  add_input_flags(cmd, *args);
  add_run_selection_flags(cmd, *args);
  add_workload_shape_flags(cmd, *args);
  add_arrival_flags(cmd, *args);
  add_measurement_flags(cmd, *args);
  add_output_flags(cmd, *args);
  rose::cli::add_request_flags(cmd, args->defaults);
  rose::cli::add_model_flags(cmd, args->model);
  rose::cli::add_tensor_parallel_flag(cmd, args->model);
  rose::cli::add_engine_flags(cmd, args->engine,
                              "workload and arrival seed; sampling seed of request i is seed + i");
  rose::cli::add_cluster_flags(cmd, args->cluster);
  cmd->callback([args, &exit_code] {
    bench_command(*args);
    exit_code = 0;
  });
}
