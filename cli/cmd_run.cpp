// `roseinfer run PROMPTS.jsonl`: generate completions through the engine, one JSON line per
// request in input order, to stdout or atomically to -o FILE.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/completions.h"
#include "engine/io/journal.h"
#include "engine/io/prompts.h"
#include "engine/io/requests.h"
#include "engine/scheduler/engine.h"

namespace {

struct RunArgs {
  std::string prompts_path;
  std::string output_path;
  std::string mode = "offline";
  bool no_prefix_cache = false;
  bool skip_invalid = false;
  bool resume = false;
  rose::cli::ModelFlags model;
  rose::cli::EngineFlags engine;
  rose::cli::RequestDefaults defaults;
};

// Thrown from the engine's callbacks when SIGINT/SIGTERM arrived, to stop between steps.
struct RunInterrupted {
  int signal_number;
};

// Everything besides the input file's bytes that changes the tokens a run produces.
std::string result_config(const RunArgs& args, const rose::cli::LoadedModel& model) {
  const rose::cli::RequestDefaults& d = args.defaults;
  return fmt::format(
      "model={};cuda={};dtype={};chat_template={};max_tokens={};temperature={};top_k={};top_p={};"
      "ignore_eos={};seed={};skip_invalid={}",
      model.name, model.cuda, model.cuda ? args.model.dtype : "fp32", args.model.chat_template,
      d.max_tokens, d.temperature, d.top_k, d.top_p, d.ignore_eos, args.engine.seed,
      args.skip_invalid);
}

// Opens OUT.partial: a new journal, or with --resume the old one, whose finished requests are
// put into `done` (by request index). Null without -o (stdout has nothing to resume).
std::unique_ptr<rose::JournalWriter> open_journal(
    const RunArgs& args, const std::string& fingerprint, const rose::PromptFile& file,
    std::vector<std::optional<rose::Completion>>& done) {
  using namespace rose;
  if (args.output_path.empty()) return nullptr;
  const std::filesystem::path path = journal_path_for(args.output_path);
  std::error_code ec;
  // The same checks the atomic output file makes, before the journal beside it is created.
  const std::filesystem::path folder = std::filesystem::path(args.output_path).parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder, ec)) {
    fail("{}: cannot write: folder '{}' does not exist", args.output_path, folder.string());
  }
  if (std::filesystem::is_directory(args.output_path, ec)) {
    fail("{}: is a directory", args.output_path);
  }
  const bool exists = std::filesystem::exists(path, ec);
  if (exists && !args.resume) {
    usage_fail(
        "{} holds the finished requests of an interrupted run: add --resume to continue it, or "
        "delete it to start over",
        path.string());
  }
  if (!exists) {
    if (args.resume)
      cli::notice("--resume: no journal {}; starting from the beginning", path.string());
    return std::make_unique<JournalWriter>(path, fingerprint, int64_t(file.requests.size()));
  }
  const JournalContents journal = read_journal(path);
  if (journal.fingerprint != fingerprint) {
    usage_fail(
        "--resume: {} was written by a run with another input file, model or sampling "
        "configuration (fingerprint {}, this run {}); rerun that command, or delete the journal",
        path.string(), journal.fingerprint, fingerprint);
  }
  int64_t resumed = 0;
  for (const JournalEntry& entry : journal.entries) {
    if (entry.index < 0 || entry.index >= int64_t(done.size()) ||
        file.requests[size_t(entry.index)].id != entry.id) {
      fail("{}: entry for request {} ('{}') does not match {}", path.string(), entry.index,
           entry.id, args.prompts_path);
    }
    resumed += !done[size_t(entry.index)].has_value();
    done[size_t(entry.index)] = entry.completion;
  }
  cli::notice("--resume: {} of {} requests already finished in {}{}", resumed, done.size(),
              path.string(),
              journal.dropped_torn_line ? " (a torn last line was dropped; computed again)" : "");
  return std::make_unique<JournalWriter>(path, journal.valid_bytes);
}

rose::Completion make_completion(const rose::RequestSpec& spec, const rose::EngineRequest& request,
                                 const rose::RequestResult& r,
                                 const rose::cli::LoadedModel& model) {
  rose::Completion c;
  c.prompt_tokens = static_cast<int>(request.prompt.size());
  c.token_ids = r.output_ids;
  c.text = rose::completion_text(spec, model, r.output_ids);
  c.finish_reason = rose::finish_reason_name(r.finish_reason);
  c.error = r.error;
  c.cached_tokens = r.cached_prompt_tokens;
  const rose::Timeline& t = r.timeline;
  c.ttft_ms = t.token_times.empty() ? NAN : (t.token_times.front() - t.arrival) * 1e3;
  c.e2el_ms = t.finish < 0 ? NAN : (t.finish - t.arrival) * 1e3;
  return c;
}

// Runs the requests not in `done` and fills them in; each one is journaled as it finishes. A
// SIGINT/SIGTERM stops between steps, saves the journal, says how to resume and dies of it.
void run_pending(rose::Engine& engine, const std::vector<rose::EngineRequest>& requests,
                 const rose::PromptFile& file, const rose::cli::LoadedModel& model,
                 rose::JournalWriter* journal, std::vector<std::optional<rose::Completion>>& done) {
  using namespace rose;
  std::vector<EngineRequest> pending;
  std::vector<size_t> pending_index;  // engine request k is requests[pending_index[k]]
  for (size_t i = 0; i < requests.size(); ++i) {
    if (done[i]) continue;
    pending.push_back(requests[i]);
    pending_index.push_back(i);
  }
  cli::ProgressLine progress("run", int64_t(requests.size()),
                             int64_t(requests.size() - pending.size()));
  RunCallbacks callbacks;
  callbacks.on_token = [&](int, int32_t) {
    if (!journal) return;
    journal->flush_if_due();
    if (const int signal_number = pending_interrupt()) throw RunInterrupted{signal_number};
  };
  callbacks.on_finish = [&](int k, const RequestResult& result) {
    const size_t i = pending_index[size_t(k)];
    done[i] = make_completion(file.requests[i], requests[i], result, model);
    if (journal) journal->append(JournalEntry{int64_t(i), file.requests[i].id, *done[i]});
    progress.finish_one();
  };
  // Without a journal there is nothing to keep: a signal acts at once, as before.
  defer_interrupts(journal != nullptr);
  int signal_number = 0;
  try {
    if (!pending.empty()) engine.run(pending, callbacks);
    signal_number = pending_interrupt();
  } catch (const RunInterrupted& interrupted) {
    signal_number = interrupted.signal_number;
  }
  progress.clear();
  if (journal) journal->sync();
  if (signal_number == 0) {
    defer_interrupts(false);
    return;
  }
  const size_t finished =
      size_t(std::count_if(done.begin(), done.end(), [](const auto& c) { return c.has_value(); }));
  cli::notice(
      "interrupted: {} of {} requests finished and are kept in {}; to continue, run the same "
      "command with --resume",
      finished, requests.size(), journal->path().string());
  die_of_signal(signal_number);
}

// Output lines in input order: each request's completion, and with --skip-invalid an error record
// where a bad line was, so the output keeps one line per input line.
std::string output_text(const rose::PromptFile& file,
                        const std::vector<std::optional<rose::Completion>>& done,
                        const std::string& model_name) {
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const bool openai_shape =
      std::any_of(file.requests.begin(), file.requests.end(),
                  [](const auto& spec) { return spec.custom_id.has_value(); });
  std::string out;
  size_t next_skip = 0;
  int index = 0;
  auto emit_skips_before = [&](int line) {
    for (; next_skip < file.skipped.size() && file.skipped[next_skip].line < line; ++next_skip) {
      out += rose::invalid_line_json(file.skipped[next_skip], openai_shape, index++);
      out += '\n';
    }
  };
  for (size_t i = 0; i < file.requests.size(); ++i) {
    emit_skips_before(file.requests[i].line);
    out += rose::completion_json_line(file.requests[i], *done[i], model_name, index++, created);
    out += '\n';
  }
  emit_skips_before(std::numeric_limits<int>::max());
  return out;
}

// With --skip-invalid, a line whose chat template raises (roles must alternate, ...) fails alone:
// it joins the skipped lines, so its error record, with the template's message, takes its place.
void skip_unrenderable(rose::PromptFile& file, const rose::ModelBundle& model,
                       const std::string& source) {
  using namespace rose;
  std::vector<RequestSpec> kept;
  for (RequestSpec& spec : file.requests) {
    try {
      if (!spec.messages.empty())
        render_prompt_text(spec, model, fmt::format("{}:{}", source, spec.line));
      kept.push_back(std::move(spec));
    } catch (const Error& e) {
      cli::notice("skipped {}", e.what());
      file.skipped.push_back(SkippedLine{spec.line, e.what()});
    }
  }
  file.requests = std::move(kept);
  std::sort(file.skipped.begin(), file.skipped.end(),
            [](const SkippedLine& a, const SkippedLine& b) { return a.line < b.line; });
  if (file.requests.empty()) fail("{}: no request could be prepared", source);
}

void run_command(RunArgs& args) {
  using namespace rose;
  if (args.resume && args.output_path.empty()) {
    usage_fail("--resume needs -o OUT: the finished requests are kept in OUT.partial");
  }
  // Parse before loading the model: a bad file should fail fast.
  PromptFile file = read_prompt_file(args.prompts_path, args.skip_invalid);
  for (const SkippedLine& skip : file.skipped) cli::notice("skipped {}", skip.message);

  cli::LoadedModel model = cli::open_model(args.model);
  if (args.skip_invalid) skip_unrenderable(file, model, args.prompts_path);
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

  std::vector<std::optional<Completion>> done(requests.size());
  const std::string fingerprint =
      args.output_path.empty() ? ""
                               : run_fingerprint(args.prompts_path, result_config(args, model));
  std::unique_ptr<JournalWriter> journal = open_journal(args, fingerprint, file, done);

  std::unique_ptr<Backend> backend = cli::make_backend(model, args.model, args.engine);
  Engine engine(*backend, cli::engine_config(args.engine, mode, !args.no_prefix_cache),
                model.config().name);
  engine.set_stop_tokenizer(model.tokenizer.get());

  const auto start = std::chrono::steady_clock::now();
  run_pending(engine, requests, file, model, journal.get(), done);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int64_t prompt_tokens = 0, output_tokens = 0, failed = 0;
  for (const std::optional<Completion>& c : done) {
    prompt_tokens += c->prompt_tokens;
    output_tokens += static_cast<int64_t>(c->token_ids.size());
    if (!c->error.empty()) {
      if (failed == 0) cli::notice("a request failed: {}", c->error);
      ++failed;
    }
  }
  const std::string out = output_text(file, done, model.name);
  if (args.output_path.empty()) {
    fmt::print("{}", out);
    std::fflush(stdout);
  } else {
    write_file_atomically(args.output_path, out);
    journal->remove();  // the output holds everything now
  }
  cli::notice(
      "{} requests{}, {} prompt + {} output tokens in {:.3f} s ({:.1f} output tok/s); "
      "device {}, model {}, mode {}{}",
      requests.size(), failed ? fmt::format(" ({} failed)", failed) : "", prompt_tokens,
      output_tokens, seconds, seconds > 0 ? output_tokens / seconds : 0.0, backend->device_name(),
      model.name, mode_name(mode), args.output_path.empty() ? "" : "; wrote " + args.output_path);
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
                  "write the completions here instead of stdout: each finished request goes to "
                  "FILE.partial at once (kept on Ctrl-C, for --resume), FILE is written at the "
                  "end through FILE.tmp.<pid> and a rename");
  cmd->add_option("--mode", args->mode,
                  "scheduler: naive (one request at a time), offline (continuous batching, "
                  "throughput) or online (arrival_time from the file when every line has one)")
      ->check(CLI::IsMember({"naive", "offline", "online"}))
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache,
                "do not reuse KV blocks of shared prompt prefixes (outputs do not change)");
  cmd->add_flag("--skip-invalid", args->skip_invalid,
                "report bad lines on stderr, run the rest and put an error record in the "
                "output where each bad line was, instead of stopping at the first");
  cmd->add_flag("--resume", args->resume,
                "with -o OUT: continue an interrupted run from its journal OUT.partial (finished "
                "requests are not computed again)");
  rose::cli::add_request_flags(cmd, args->defaults);
  rose::cli::add_model_flags(cmd, args->model);
  rose::cli::add_engine_flags(cmd, args->engine,
                              "sampling seed of a request without one: --seed + its index");
  cmd->callback([args, &exit_code] {
    run_command(*args);
    exit_code = 0;
  });
}
