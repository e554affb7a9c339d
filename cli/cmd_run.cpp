// `roseinfer run PROMPTS.jsonl`: generate completions through the engine, one JSON line per
// request in input order, to stdout or atomically to -o FILE.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/completions.h"
#include "engine/io/prompts.h"
#include "engine/scheduler/engine.h"

namespace {

struct RunArgs {
  std::string prompts_path;
  std::string output_path;
  std::string mode = "offline";
  bool no_prefix_cache = false;
  bool skip_invalid = false;
  rose::cli::ModelFlags model;
  rose::cli::EngineFlags engine;
  rose::cli::RequestDefaults defaults;
};

void run_command(RunArgs& args) {
  using namespace rose;
  // Parse before loading the model: a bad file should fail fast.
  const PromptFile file = read_prompt_file(args.prompts_path, args.skip_invalid);
  for (const SkippedLine& skip : file.skipped) cli::notice("skipped {}", skip.message);

  cli::LoadedModel model = cli::open_model(args.model);
  const int context = cli::max_model_len(model, args.engine);
  std::vector<EngineRequest> requests = prepare_requests(file.requests, args.prompts_path, model,
                                                         args.defaults, args.engine.seed, context);

  // Online mode replays the file's arrival times when every line has one; otherwise everything
  // arrives at once.
  const SchedulerMode mode = cli::parse_modes(args.mode).front();
  if (mode == SchedulerMode::kOnline) {
    if (const auto times = cli::arrival_times(file.requests)) {
      for (size_t i = 0; i < requests.size(); ++i) requests[i].arrival_s = (*times)[i];
    }
  }

  std::unique_ptr<Backend> backend = cli::make_backend(model, args.model, args.engine);
  Engine engine(*backend, cli::engine_config(args.engine, mode, !args.no_prefix_cache),
                model.config().name);
  engine.set_stop_tokenizer(model.tokenizer.get());
  Runner& runner = engine;

  const auto start = std::chrono::steady_clock::now();
  const RunResult result = runner.run(requests);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  std::string out;
  int64_t prompt_tokens = 0, output_tokens = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestResult& r = result.requests[i];
    Completion c;
    c.prompt_tokens = static_cast<int>(requests[i].prompt.size());
    c.token_ids = r.output_ids;
    c.text = completion_text(file.requests[i], model, r.output_ids);
    c.finish_reason = finish_reason_name(r.finish_reason);
    c.cached_tokens = r.cached_prompt_tokens;
    const Timeline& t = r.timeline;
    c.ttft_ms = t.token_times.empty() ? NAN : (t.token_times.front() - t.arrival) * 1e3;
    c.e2el_ms = t.finish < 0 ? NAN : (t.finish - t.arrival) * 1e3;
    out += completion_json_line(file.requests[i], c, model.name, static_cast<int>(i), created);
    out += '\n';
    prompt_tokens += c.prompt_tokens;
    output_tokens += static_cast<int64_t>(r.output_ids.size());
  }
  if (args.output_path.empty()) {
    fmt::print("{}", out);
    std::fflush(stdout);
  } else {
    write_file_atomically(args.output_path, out);
  }
  cli::notice(
      "{} requests, {} prompt + {} output tokens in {:.3f} s ({:.1f} output tok/s); "
      "device {}, model {}, mode {}{}",
      requests.size(), prompt_tokens, output_tokens, seconds,
      seconds > 0 ? output_tokens / seconds : 0.0, backend->device_name(), model.name,
      mode_name(mode), args.output_path.empty() ? "" : "; wrote " + args.output_path);
}

}  // namespace

void register_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Generate completions for a prompt file (JSONL; see datasets/README.md): one JSON line per "
      "request, in input order, to stdout or -o FILE");
  cmd->add_option("PROMPTS", args->prompts_path,
                  "JSONL file: {\"prompt\" | \"prompt_token_ids\", \"max_tokens\", ...} or OpenAI "
                  "batch lines")
      ->required();
  cmd->add_option("-o,--output", args->output_path,
                  "write the completions here (atomically: FILE.tmp.<pid>, then renamed) instead "
                  "of stdout");
  cmd->add_option("--mode", args->mode,
                  "scheduler: naive (one request at a time), offline (continuous batching, "
                  "throughput) or online (arrival_time from the file when every line has one)")
      ->check(CLI::IsMember({"naive", "offline", "online"}))
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache,
                "do not reuse KV blocks of shared prompt prefixes (outputs do not change)");
  cmd->add_flag("--skip-invalid", args->skip_invalid,
                "report bad lines on stderr and run the rest, instead of stopping at the first");
  rose::cli::add_request_flags(cmd, args->defaults);
  rose::cli::add_model_flags(cmd, args->model);
  rose::cli::add_engine_flags(cmd, args->engine,
                              "sampling seed of a request without one: --seed + its index");
  cmd->callback([args, &exit_code] {
    run_command(*args);
    exit_code = 0;
  });
}
