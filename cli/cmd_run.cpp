// `roseinfer run PROMPTS.jsonl`: generate completions through the engine, one JSON line per
// request in input order, to stdout or atomically to -o FILE. The file is streamed: lines are read
// and prepared at most --window ahead of the engine, completions are journaled (or printed) as
// they finish, so memory follows the window, not the file.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "cli/run_stream.h"
#include "engine/common/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/completions.h"
#include "engine/io/journal.h"
#include "engine/io/prompt_scan.h"
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
  int window = 0;  // prepared requests not yet finished (stdout: not yet printed); 0: 4 x seqs
  rose::cli::ModelFlags model;
  rose::cli::EngineFlags engine;
  rose::cli::RequestDefaults defaults;
};

// A test hook (tests/cli_journal.sh): ROSEINFER_TEST_INTERRUPT stops the run at a chosen point of
// its progress, so that a test of kill -9 and --resume reproduces every state a kill can leave
// instead of firing at a wall-clock moment (which, on a loaded machine, lands anywhere, or after
// the run has ended):
//   N:kill      once this process has journaled N requests (0: as soon as the journal is opened),
//               the journal is written out and the process dies of SIGKILL;
//   N:torn      the same, but the N-th request's line is only half written (a torn last line);
//   N:int       once this process has journaled N requests (N >= 1), SIGINT is raised: the
//               ordinary interrupt path (stop between steps, keep the journal, exit 130);
//   commit:kill SIGKILL once the output is committed, before the journal is removed.
struct TestInterrupt {
  enum class How { kNone, kKill, kTorn, kInt, kCommitKill };
  How how = How::kNone;
  int64_t after = -1;

  static TestInterrupt from_env() {
    TestInterrupt t;
    const char* value = std::getenv("ROSEINFER_TEST_INTERRUPT");
    if (value == nullptr || *value == '\0') return t;
    const std::string spec = value;
    const size_t colon = spec.find(':');
    const std::string point = spec.substr(0, colon);
    const std::string how = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (point == "commit" && how == "kill") {
      t.how = How::kCommitKill;
      return t;
    }
    char* end = nullptr;
    t.after = std::strtoll(point.c_str(), &end, 10);
    const bool number = !point.empty() && end != nullptr && *end == '\0' && t.after >= 0;
    if (number && how == "kill") t.how = How::kKill;
    if (number && t.after >= 1 && how == "torn") t.how = How::kTorn;
    if (number && t.after >= 1 && how == "int") t.how = How::kInt;
    if (t.how == How::kNone)
      rose::fail("ROSEINFER_TEST_INTERRUPT='{}': expected N:kill, N:torn, N:int or commit:kill",
                 spec);
    return t;
  }
};

// Thrown from the engine's callbacks when SIGINT/SIGTERM arrived, to stop between steps.
struct RunInterrupted {
  int signal_number;
};

// The weight flags that change the tokens: none by default (so existing journals still resume).
std::string weights_config(const rose::cli::ModelFlags& flags,
                           const rose::cli::LoadedModel& model) {
  std::string text;
  if (!flags.quantize.empty()) text += ";quantize=" + flags.quantize;
  if (model.cuda && model.format == "gguf" && flags.dtype_given) text += ";dequantize=1";
  return text;
}

// Everything besides the input file's bytes that changes the tokens a run produces.
std::string result_config(const RunArgs& args, const rose::cli::LoadedModel& model) {
  const rose::cli::RequestDefaults& d = args.defaults;
  return fmt::format(
             "model={};cuda={};dtype={};chat_template={};max_tokens={};temperature={};top_k={};top_"
             "p={};"
             "ignore_eos={};seed={};skip_invalid={}{}",
             model.name, model.cuda, model.cuda ? args.model.dtype : "fp32",
             args.model.chat_template, d.max_tokens, d.temperature, d.top_k, d.top_p, d.ignore_eos,
             args.engine.seed, args.skip_invalid, weights_config(args.model, model)) +
         // A split model sums in another order: its tokens may differ, so a journal of one
         // degree does not resume at another. (Absent at 1, so earlier journals still match.)
         (args.model.tensor_parallel > 1
              ? fmt::format(";tensor_parallel={}", args.model.tensor_parallel)
              : std::string());
}

// The journal's finished requests, 8 bytes per request of the file: request index -> id hash | 1
// (0: not finished), so the stream skips them and checks that they are the same requests.
struct ResumedRequests {
  std::vector<uint64_t> id_hash;
  int64_t count = 0;
  bool done(int64_t index) const { return index < int64_t(id_hash.size()) && id_hash[index]; }
};

uint64_t marked_hash(const std::string& id) { return rose::request_id_hash(id) | 1; }

ResumedRequests read_resumed(const std::filesystem::path& path, int64_t num_requests,
                             const RunArgs& args) {
  ResumedRequests resumed;
  resumed.id_hash.assign(size_t(num_requests), 0);
  rose::scan_journal(path, [&](const rose::JournalEntry& entry, uint64_t, uint32_t) {
    if (entry.index < 0 || entry.index >= num_requests) {
      rose::fail("{}: entry for request {} ('{}') does not match {}", path.string(), entry.index,
                 entry.id, args.prompts_path);
    }
    uint64_t& slot = resumed.id_hash[size_t(entry.index)];
    resumed.count += slot == 0;
    slot = marked_hash(entry.id);
  });
  return resumed;
}

// The checks the atomic output file makes, before the journal beside it is created.
void check_output_path(const std::string& output) {
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::path(output).parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder, ec)) {
    rose::fail("{}: cannot write: folder '{}' does not exist", output, folder.string());
  }
  if (std::filesystem::is_directory(output, ec)) rose::fail("{}: is a directory", output);
}

// Opens OUT.partial: a new journal, or with --resume the old one, whose finished requests go to
// `resumed`. Null without -o (stdout has nothing to resume).
std::unique_ptr<rose::JournalWriter> open_journal(const RunArgs& args,
                                                  const std::string& fingerprint,
                                                  int64_t num_requests, ResumedRequests& resumed) {
  using namespace rose;
  if (args.output_path.empty()) return nullptr;
  const std::filesystem::path path = journal_path_for(args.output_path);
  check_output_path(args.output_path);
  std::error_code ec;
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
    return std::make_unique<JournalWriter>(path, fingerprint, num_requests);
  }
  // The header and the torn-tail check first, without keeping the entries.
  const JournalContents head = scan_journal(path, [](const JournalEntry&, uint64_t, uint32_t) {});
  if (head.fingerprint != fingerprint) {
    usage_fail(
        "--resume: {} was written by a run with another input file, model or sampling "
        "configuration (fingerprint {}, this run {}); rerun that command, or delete the journal",
        path.string(), head.fingerprint, fingerprint);
  }
  resumed = read_resumed(path, num_requests, args);
  cli::notice("--resume: {} of {} requests already finished in {}{}", resumed.count, num_requests,
              path.string(),
              head.dropped_torn_line ? " (a torn last line was dropped; computed again)" : "");
  return std::make_unique<JournalWriter>(path, head.valid_bytes);
}

rose::Completion make_completion(const rose::RequestSpec& spec, int prompt_tokens,
                                 const rose::RequestResult& r,
                                 const rose::cli::LoadedModel& model) {
  rose::Completion c;
  c.prompt_tokens = prompt_tokens;
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

// A request between add() and its completion.
struct InFlight {
  int64_t position = 0;
  rose::RequestSpec spec;
  int prompt_tokens = 0;
};

// Everything one streamed run holds: the stream, the engine, the requests in flight, and where
// completions go (the journal with -o, stdout in order without).
struct StreamedRun {
  const RunArgs& args;
  const rose::cli::LoadedModel& model;
  rose::Engine& engine;
  rose::cli::RequestStream& stream;
  rose::JournalWriter* journal;
  const ResumedRequests& resumed;
  rose::cli::ProgressLine& progress;
  TestInterrupt test_interrupt;
  bool online_arrivals = false;
  bool openai_shape = false;
  int context = 0;
  int64_t window = 0;
  int64_t created = 0;
  std::unordered_map<int64_t, InFlight> in_flight;  // by request index
  rose::cli::OrderedEmitter emitter;
  rose::cli::OutputTotals totals;  // stdout runs (-o counts from the journal at the end)
  int64_t next_position = 0;
  bool input_done = false;

  bool window_has_room() const {
    // stdout: lines wait for earlier ones, so the reorder span is what is bounded.
    if (!journal) return emitter.waiting(next_position) < window;
    return int64_t(in_flight.size()) < window;
  }
  void admit(rose::cli::StreamItem& item);
  void fill_window();
  void finished(int index, const rose::RequestResult& result);
  void run();
};

void StreamedRun::admit(rose::cli::StreamItem& item) {
  using namespace rose;
  next_position = item.position + 1;
  if (item.skipped()) {
    if (!journal)
      emitter.put(item.position, invalid_line_json(item.skip, openai_shape, int(item.position)));
    return;
  }
  if (resumed.done(item.index)) {
    if (resumed.id_hash[size_t(item.index)] != marked_hash(item.spec.id)) {
      fail("{}: entry for request {} does not match {}:{} ('{}')", journal->path().string(),
           item.index, args.prompts_path, item.spec.line, item.spec.id);
    }
    return;
  }
  EngineRequest request = prepare_request(item.spec, size_t(item.index), args.prompts_path, model,
                                          args.defaults, args.engine.seed, context);
  if (online_arrivals) request.arrival_s = *item.spec.arrival_time;
  engine.add(request, int(item.index));
  in_flight.emplace(item.index,
                    InFlight{item.position, std::move(item.spec), int(request.prompt.size())});
}

void StreamedRun::fill_window() {
  rose::cli::StreamItem item;
  while (!input_done && window_has_room()) {
    if (!stream.next(item)) {
      input_done = true;
      progress.set_total(stream.requests_seen());
      return;
    }
    admit(item);
  }
}

void StreamedRun::finished(int index, const rose::RequestResult& result) {
  using namespace rose;
  auto node = in_flight.extract(index);
  InFlight& request = node.mapped();
  const Completion c = make_completion(request.spec, request.prompt_tokens, result, model);
  if (journal) {
    const JournalEntry entry{index, request.spec.id, c};
    const TestInterrupt& t = test_interrupt;
    const bool test_point = t.after == journal->entries_appended() + 1;
    if (test_point && t.how == TestInterrupt::How::kTorn) {
      journal->sync();
      const std::string line = journal_entry_line(entry);
      std::ofstream(journal->path(), std::ios::binary | std::ios::app)
          << line.substr(0, line.size() / 2) << std::flush;
      std::raise(SIGKILL);
    }
    journal->append(entry);
    if (test_point && t.how == TestInterrupt::How::kKill) {
      journal->sync();
      std::raise(SIGKILL);
    }
    if (test_point && t.how == TestInterrupt::How::kInt) std::raise(SIGINT);
  } else {
    cli::add_totals(totals, c);
    emitter.put(request.position,
                completion_json_line(request.spec, c, model.name, int(request.position), created));
  }
  progress.finish_one();
}

void StreamedRun::run() {
  using namespace rose;
  RunCallbacks callbacks;
  callbacks.on_token = [&](int, int32_t) {
    if (!journal) return;
    journal->flush_if_due();
    if (const int signal_number = pending_interrupt()) throw RunInterrupted{signal_number};
  };
  callbacks.on_finish = [&](int k, const RequestResult& result) { finished(k, result); };
  engine.start(callbacks);
  for (;;) {
    fill_window();
    if (engine.done()) {
      if (input_done) break;
      continue;
    }
    if (!engine.step(engine.now())) engine.wait_for_arrival();
  }
  engine.finish();
}

// Runs the stream. A SIGINT/SIGTERM stops between steps, saves the journal, says how to resume
// and dies of it. A line that cannot be prepared stops the run as it always did (exit 1); a
// journal this run started is removed then, since its input must change to get past the line.
void run_streamed(StreamedRun& run, bool journal_is_new) {
  using namespace rose;
  // Without a journal there is nothing to keep: a signal acts at once, as before.
  defer_interrupts(run.journal != nullptr);
  int signal_number = 0;
  try {
    run.run();
    signal_number = pending_interrupt();
  } catch (const RunInterrupted& interrupted) {
    signal_number = interrupted.signal_number;
  } catch (const Error&) {
    run.progress.clear();
    if (run.journal && journal_is_new) run.journal->remove();
    throw;
  }
  run.progress.clear();
  if (run.journal) run.journal->sync();
  if (signal_number == 0) {
    defer_interrupts(false);
    return;
  }
  const int64_t finished = run.resumed.count + run.journal->entries_appended();
  cli::notice(
      "interrupted: {} of {} requests finished and are kept in {}; to continue, run the same "
      "command with --resume",
      finished, run.progress.total(), run.journal->path().string());
  die_of_signal(signal_number);
}

// VmHWM of /proc/self/status in KiB (0 where there is none): the peak resident set, printed when
// ROSEINFER_PRINT_PEAK_RSS is set, for the streaming memory test and the README's measurement.
int64_t peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

void run_command(RunArgs& args) {
  using namespace rose;
  if (args.resume && args.output_path.empty()) {
    usage_fail("--resume needs -o OUT: the finished requests are kept in OUT.partial");
  }
  const TestInterrupt test_interrupt = TestInterrupt::from_env();
  // One pass over the file before the model loads: a bad file fails fast, and the total is known.
  const PromptFileScan scan = scan_prompt_file(args.prompts_path, args.skip_invalid);
  for (const SkippedLine& skip : scan.skipped) cli::notice("skipped {}", skip.message);

  cli::LoadedModel model = cli::open_model(args.model);
  const SchedulerMode mode = cli::parse_modes(args.mode).front();
  const std::string fingerprint =
      args.output_path.empty() ? ""
                               : run_fingerprint(args.prompts_path, result_config(args, model));
  ResumedRequests resumed;
  std::unique_ptr<JournalWriter> journal =
      open_journal(args, fingerprint, scan.num_requests, resumed);
  const bool journal_is_new = journal && resumed.count == 0;
  if (journal && test_interrupt.how == TestInterrupt::How::kKill && test_interrupt.after == 0)
    std::raise(SIGKILL);

  std::unique_ptr<Backend> backend = cli::make_backend(model, args.model, args.engine);
  EngineConfig config = cli::engine_config(args.engine, mode, !args.no_prefix_cache);
  config.keep_results = false;  // completions leave through on_finish; nothing piles up
  Engine engine(*backend, config, model.config().name);
  engine.set_stop_tokenizer(model.tokenizer.get());

  cli::RequestStream stream(args.prompts_path, scan, args.skip_invalid, model);
  cli::ProgressLine progress("run", scan.num_requests, resumed.count);
  StreamedRun run{args, model, engine, stream, journal.get(), resumed, progress, test_interrupt};
  // Online mode replays the file's arrival times when every line has one; otherwise everything
  // arrives at once.
  run.online_arrivals = mode == SchedulerMode::kOnline && scan.all_have_arrival_time;
  run.openai_shape = scan.any_custom_id;
  run.context = cli::max_model_len(model, args.engine);
  run.window = args.window > 0 ? args.window : 4 * int64_t(args.engine.max_num_seqs);
  run.created = static_cast<int64_t>(std::time(nullptr));

  const auto start = std::chrono::steady_clock::now();
  run_streamed(run, journal_is_new);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  cli::OutputTotals totals = run.totals;
  if (journal) {
    journal->sync();
    totals = cli::write_output_from_journal(args.prompts_path, journal->path(), args.output_path,
                                            stream.all_skipped(), stream.requests_seen(),
                                            run.openai_shape, model.name);
    if (test_interrupt.how == TestInterrupt::How::kCommitKill) std::raise(SIGKILL);
    journal->remove();  // the output holds everything now
  }
  if (totals.failed) cli::notice("a request failed: {}", totals.first_error);
  cli::notice(
      "{} requests{}, {} prompt + {} output tokens in {:.3f} s ({:.1f} output tok/s); "
      "device {}, model {}, mode {}{}",
      totals.requests, totals.failed ? fmt::format(" ({} failed)", totals.failed) : "",
      totals.prompt_tokens, totals.output_tokens, seconds,
      seconds > 0 ? double(totals.output_tokens) / seconds : 0.0, backend->device_name(),
      model.name, mode_name(mode), args.output_path.empty() ? "" : "; wrote " + args.output_path);
  if (std::getenv("ROSEINFER_PRINT_PEAK_RSS")) cli::notice("peak RSS {} KiB", peak_rss_kib());
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
                "do not reuse KV blocks of shared prompt prefixes (outputs stay the same on the "
                "CPU and with --batch-invariant)");
  cmd->add_flag("--skip-invalid", args->skip_invalid,
                "report bad lines on stderr, run the rest and put an error record in the "
                "output where each bad line was, instead of stopping at the first");
  cmd->add_flag("--resume", args->resume,
                "with -o OUT: continue an interrupted run from its journal OUT.partial (finished "
                "requests are not computed again)");
  cmd->add_option("--window", args->window,
                  "requests read and prepared ahead of the engine and not yet finished (without "
                  "-o: not yet printed, since output keeps input order) at most; the engine sees "
                  "no more than this many at a time. 0: 4 x --max-num-seqs")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  rose::cli::add_request_flags(cmd, args->defaults);
  rose::cli::add_model_flags(cmd, args->model);
  rose::cli::add_tensor_parallel_flag(cmd, args->model);
  rose::cli::add_engine_flags(cmd, args->engine,
                              "sampling seed of a request without one: --seed + its index");
  cmd->callback([args, &exit_code] {
    run_command(*args);
    exit_code = 0;
  });
}
