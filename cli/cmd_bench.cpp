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

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/prompts.h"
#include "engine/io/workloads.h"
#include "engine/metrics/metrics.h"
#include "engine/metrics/report_table.h"
#include "engine/metrics/results_json.h"
#include "engine/scheduler/engine.h"
#include "roseinfer_version.h"

namespace {

constexpr double kDefaultCudaCopyBandwidthGbps = 3000;  // H100 HBM3, for the % of the floor

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
  std::string percentiles = "50,95,99";
  std::string slo;
  std::string json_path;
  bool save_detailed = false;
  bool keep_cache = false;
  double copy_bandwidth_gbps = 0;
  rose::cli::ModelFlags model;
  rose::cli::EngineFlags engine;
  rose::cli::RequestDefaults defaults;
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

// One report per (mode, prefix cache) combination, each with its own engine on `backend`.
std::vector<rose::BenchReport> run_all(const BenchContext& b, rose::Backend& backend,
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
      EngineConfig config = cli::engine_config(b.args.engine, mode, cache);
      config.max_concurrency = b.args.max_concurrency;
      Engine engine(backend, config, model_id);
      engine.set_stop_tokenizer(b.tokenizer);
      std::vector<EngineRequest> requests = b.in.base;
      for (size_t i = 0; i < requests.size(); ++i) {
        requests[i].arrival_s = mode == SchedulerMode::kOnline ? b.arrivals.times[i] : 0.0;
      }
      const RunResult result =
          run_measured(engine, warmup, requests,
                       fmt::format("{}, prefix cache {}", mode_name(mode), cache ? "on" : "off"),
                       b.args.keep_cache);
      reports.push_back(make_report(result, requests, mode_name(mode), cache, b.percentiles, b.slo,
                                    b.copy_bandwidth));
      fmt::print("\n{}", render_report_table(reports.back()));
      std::fflush(stdout);
    }
  }
  return reports;
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
  c.emplace_back("keep_cache_between_runs", args.keep_cache);
  c.emplace_back("block_size", static_cast<int64_t>(backend.block_size()));
  c.emplace_back("num_kv_blocks", static_cast<int64_t>(backend.num_kv_blocks()));
  c.emplace_back("max_num_seqs", static_cast<int64_t>(args.engine.max_num_seqs));
  c.emplace_back("max_num_batched_tokens",
                 static_cast<int64_t>(args.engine.max_num_batched_tokens));
  c.emplace_back("max_model_len", static_cast<int64_t>(context));
  c.emplace_back("gpu_memory_utilization", args.engine.gpu_memory_utilization);
  c.emplace_back("cuda_graphs", model.cuda && !args.engine.no_cuda_graph);
  c.emplace_back("percentiles", args.percentiles);
  c.emplace_back("slo", args.slo.empty() ? ConfigValue() : ConfigValue(args.slo));
  c.emplace_back("copy_bandwidth_gbps",
                 b.copy_bandwidth ? ConfigValue(*b.copy_bandwidth) : ConfigValue());
  return c;
}

void write_bench_json(const BenchContext& b, const rose::cli::LoadedModel& model,
                      const rose::Backend& backend, int context,
                      const std::vector<rose::BenchReport>& reports) {
  using namespace rose;
  BenchResults results;
  results.roseinfer_version = ROSEINFER_VERSION;
  results.git_commit = ROSEINFER_GIT_COMMIT;
  results.date = utc_timestamp_now();
  results.command = cli::command_line();
  results.model = model.name;
  results.device = backend.device_name();
  results.config = bench_config_entries(b, model, backend, context);
  results.workload.name = b.in.name;
  results.workload.num_requests = static_cast<int64_t>(b.in.base.size());
  results.workload.total_input_tokens = b.in.input_tokens;
  // What changes the computed tokens besides the requests themselves.
  results.workload.fingerprint = workload_fingerprint(
      b.in.base, fmt::format("model={};dtype={}", model.config().name,
                             model.cuda ? b.args.model.dtype : std::string("fp32")));
  results.runs = reports;
  write_file_atomically(b.args.json_path, results_to_json(results, b.args.save_detailed));
  cli::notice("wrote {}", b.args.json_path);
}

void bench_command(BenchArgs& args) {
  using namespace rose;
  std::vector<double> percentiles;
  parse_percentiles(args.percentiles, &percentiles);
  Slo slo;
  if (!args.slo.empty()) parse_slo(args.slo, &slo);
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
  if (args.copy_bandwidth_opt->count()) {
    b.copy_bandwidth = args.copy_bandwidth_gbps;
  } else if (model.cuda) {
    b.copy_bandwidth = kDefaultCudaCopyBandwidthGbps;
  }

  std::unique_ptr<Backend> backend = cli::make_backend(model, args.model, args.engine);
  fmt::print("roseinfer bench: {} requests ({} input tokens) from {}; model {} on {}\n",
             in.base.size(), in.input_tokens, in.name, model.name, backend->device_name());
  if (args.mode == "online" || args.mode == "all") {
    fmt::print("online arrivals: {}{}\n", arrivals.text,
               args.max_concurrency ? fmt::format(", at most {} in flight", args.max_concurrency)
                                    : std::string());
  }
  std::fflush(stdout);

  const std::vector<BenchReport> reports = run_all(b, *backend, model.config().name);
  if (reports.size() > 1) fmt::print("\n{}", render_summary_table(reports));
  std::fflush(stdout);
  if (!args.json_path.empty()) write_bench_json(b, model, *backend, context, reports);

  int failed = 0;
  for (const BenchReport& r : reports) failed += r.failed;
  if (failed > 0) fail("{} request(s) failed across {} run(s)", failed, reports.size());
}

}  // namespace

void register_bench_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<BenchArgs>();
  args->workload.name.clear();  // set only by --dataset-name
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure TTFT, TPOT, ITL, end-to-end latency, throughput and prefix-cache hits on a prompt "
      "file or a synthetic workload, per scheduler mode and prefix-cache setting");
  auto* file_opt = cmd->add_option("PROMPTS", args->prompts_path,
                                   "JSONL prompt file (as for run; arrival_time drives online mode "
                                   "when every line has one and --request-rate is not given)");
  auto* dataset_opt =
      cmd->add_option("--dataset-name,--dataset", args->workload.name,
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
  cmd->add_option("--dataset-path", args->workload.dataset_path,
                  "ShareGPT JSON file for --dataset-name sharegpt");
  cmd->add_flag("--skip-invalid", args->skip_invalid, "skip bad prompt-file lines, reporting them");
  cmd->add_option("--mode", args->mode,
                  "naive (one request at a time), offline (all at t=0, throughput), online "
                  "(arrivals over time, latency) or all three")
      ->check(CLI::IsMember({"naive", "offline", "online", "all"}))
      ->capture_default_str();
  auto* no_cache =
      cmd->add_flag("--no-prefix-cache", args->no_prefix_cache, "run with the prefix cache off");
  cmd->add_flag("--both-cache-settings", args->both_cache_settings,
                "run every mode with the prefix cache on and off")
      ->excludes(no_cache);
  args->num_prompts_opt =
      cmd->add_option("--num-prompts", args->num_prompts,
                      "requests: a synthetic workload's count (default: the workload's own; random "
                      "and shared-prefix 1000), or the first N lines of a prompt file")
          ->check(CLI::PositiveNumber);
  cmd->add_option("--random-input-len", args->workload.random_input_len,
                  "random/shared-prefix: prompt tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  args->random_output_len_opt =
      cmd->add_option("--random-output-len", args->random_output_len,
                      "random/shared-prefix: output tokens (default 128); sharegpt: the cap "
                      "(default 1024)")
          ->check(CLI::PositiveNumber);
  cmd->add_option("--random-range-ratio", args->workload.random_range_ratio,
                  "random: lengths uniform in [len*(1-r), len*(1+r)]")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  args->random_prefix_len_opt =
      cmd->add_option("--random-prefix-len", args->random_prefix_len,
                      "random: shared prefix tokens before each prompt (default 0); "
                      "shared-prefix: shared part of the prompt (default 60%)")
          ->check(CLI::NonNegativeNumber);
  cmd->add_option("--num-prefix-groups", args->workload.num_prefix_groups,
                  "shared-prefix: distinct shared prefixes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  args->request_rate_opt =
      cmd->add_option("--request-rate", args->request_rate,
                      "online: mean requests per second (inf: all at once; default inf, or the "
                      "file's arrival_time)")
          ->check(CLI::Validator(
              [](std::string& v) -> std::string {
                if (v == "inf") return "";
                double r = 0;
                return parse_double(v, r) && r > 0 ? "" : "must be a positive number or inf";
              },
              "RATE"));
  cmd->add_option("--burstiness", args->burstiness,
                  "online: gamma shape of the arrival gaps (1: Poisson; < 1 burstier)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-concurrency", args->max_concurrency,
                  "online: requests in flight at most (0: no cap)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--warmup", args->warmup,
                  "extra requests (copies of the first ones) run before each measured run and "
                  "excluded from every number")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--percentiles", args->percentiles, "latency percentiles to report")
      ->check(
          CLI::Validator([](std::string& v) { return parse_percentiles(v, nullptr); }, "Q,Q,..."))
      ->capture_default_str();
  cmd->add_option("--slo", args->slo,
                  "goodput bounds in ms, e.g. ttft=200,tpot=50,e2el=2000 (any subset)")
      ->check(CLI::Validator([](std::string& v) { return parse_slo(v, nullptr); }, "SLO"));
  cmd->add_option("--json", args->json_path,
                  "write the results (versioned schema, vLLM-style keys) to FILE, atomically");
  cmd->add_flag("--save-detailed", args->save_detailed,
                "add per-request arrays (lengths, ttft, itl, e2el, cached tokens) to --json");
  cmd->add_flag("--keep-cache-between-runs", args->keep_cache,
                "keep what --warmup cached for the measured run (each mode and cache setting "
                "still has its own engine, so runs never share a cache)");
  args->copy_bandwidth_opt =
      cmd->add_option("--copy-bandwidth-gbps", args->copy_bandwidth_gbps,
                      "device copy bandwidth in GB/s for the decode '% of floor' figure (default "
                      "3000 on CUDA, none on the CPU)")
          ->check(CLI::PositiveNumber);
  rose::cli::add_request_flags(cmd, args->defaults);
  rose::cli::add_model_flags(cmd, args->model);
  rose::cli::add_engine_flags(cmd, args->engine,
                              "workload and arrival seed; sampling seed of request i is seed + i");
  cmd->callback([args, &exit_code] {
    bench_command(*args);
    exit_code = 0;
  });
}
