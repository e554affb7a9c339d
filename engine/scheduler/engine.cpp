#include "engine/scheduler/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>

#include "engine/common/error.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/prefix_index.h"
#include "engine/scheduler/scheduler.h"

namespace rose {

const char* mode_name(SchedulerMode mode) {
  switch (mode) {
    case SchedulerMode::kNaive:
      return "naive";
    case SchedulerMode::kOffline:
      return "offline";
    case SchedulerMode::kOnline:
      return "online";
  }
  return "unknown";
}

namespace {

class SteadyClock : public Clock {
 public:
  double now() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void sleep_until(double t) override {
    const double wait = t - now();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
};

// A step the backend was not sized for would fail mid-run as "step plan: ..."; refuse it here.
void check_budgets(const EngineConfig& config, const PlanLimits& limits) {
  if (config.max_num_seqs > limits.max_num_seqs) {
    fail("max_num_seqs {} is more than the backend was sized for ({})", config.max_num_seqs,
         limits.max_num_seqs);
  }
  if (config.max_num_batched_tokens > limits.max_num_tokens) {
    fail("max_num_batched_tokens {} is more than the backend was sized for ({})",
         config.max_num_batched_tokens, limits.max_num_tokens);
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::unique_ptr<Clock> make_steady_clock() { return std::make_unique<SteadyClock>(); }

struct Engine::Impl {
  Impl(Backend& backend_in, const EngineConfig& config_in, std::string model_id_in)
      : backend(backend_in),
        config(config_in),
        model_id(std::move(model_id_in)),
        pool(backend_in.limits().num_kv_blocks, backend_in.limits().block_size) {
    check_budgets(config, backend.limits());
    if (config.prefix_cache) {
      index = std::make_unique<PrefixIndex>(pool, model_id, config.cache_salt);
    }
    // Sized once for the largest step the budgets allow, so the step loop never reallocates.
    for (StepPlan* p : {&plan, &next_plan}) {
      p->token_ids.reserve(size_t(config.max_num_batched_tokens));
      p->positions.reserve(size_t(config.max_num_batched_tokens));
      p->slot_mapping.reserve(size_t(config.max_num_batched_tokens));
      p->query_start.reserve(size_t(config.max_num_seqs) + 1);
      p->context_lens.reserve(size_t(config.max_num_seqs));
      p->do_sample.reserve(size_t(config.max_num_seqs));
      p->sampling.reserve(size_t(config.max_num_seqs));
      p->sample_index.reserve(size_t(config.max_num_seqs));
    }
    out.sampled.reserve(size_t(config.max_num_seqs));
  }

  // What record_step() needs of a submitted step, taken when it was scheduled.
  struct Submitted {
    bool pure_decode = false;
    int num_seqs = 0;
    int prefill_tokens = 0;
    int decode_tokens = 0;
    int64_t context_tokens = 0;
    std::chrono::steady_clock::time_point at;
  };

  Scheduler& running_scheduler() {
    ROSE_ASSERT(scheduler != nullptr);  // start() first
    return *scheduler;
  }
  // Schedules a step into `into` and submits it; false (nothing submitted) for an empty plan.
  bool schedule_and_submit(double now, StepPlan& into, Submitted& record);
  // Waits for the oldest submitted step (`current`), records it and applies its ids.
  void collect_and_apply();
  void record_step(const Submitted& step, double exec_time);
  // Waits for the backend's submitted steps and drops their outputs.
  void drain() {
    for (; submitted > 0; --submitted) {
      try {
        backend.collect(out);
      } catch (...) {  // the run is being abandoned or has ended: its error was reported
      }
    }
  }
  // A failed step (a backend or callback error) leaves blocks held and keys registered for KV
  // that may never have been written: give the blocks back and forget the keys, so the engine
  // can run again.
  void abandon_run() {
    drain();
    scheduler->release_all();
    if (index) index->reset();
  }

  Backend& backend;
  EngineConfig config;
  std::string model_id;
  BlockPool pool;
  std::unique_ptr<PrefixIndex> index;  // null with prefix caching off
  StepPlan plan;                       // the oldest submitted step's
  StepPlan next_plan;                  // overlapped: the step submitted after it
  StepOutput out;
  bool overlap = false;     // this run overlaps steps (EngineConfig::overlap, resolved at start())
  int submitted = 0;        // steps submitted to the backend and not yet collected (0-2)
  Submitted current, next;  // of `plan` and `next_plan`
  // When the last step's ids reached the host: an overlapped step's time starts there, not at its
  // submission (it was queued behind the step before).
  std::chrono::steady_clock::time_point last_collect;

  // The current run (between start() and finish()).
  std::unique_ptr<Scheduler> scheduler;
  RunCallbacks callbacks;
  std::unique_ptr<Clock> own_clock;  // when start() was given none
  Clock* clock = nullptr;
  double start_time = 0.0;  // clock->now() at start()
  // After sleeping to an arrival, (start + t) - start can round below t; never let `now` fall
  // short of an arrival we have already waited for, or the loop would wait for it forever.
  double waited_until = 0.0;
  StepStats stats;
  StepSeries series;  // per-step KV use and queue lengths (the report draws them)
  const Tokenizer* stop_tokenizer = nullptr;  // for requests' stop strings
};

Engine::Engine(Backend& backend, const EngineConfig& config, std::string model_id)
    : impl_(std::make_unique<Impl>(backend, config, std::move(model_id))) {}

Engine::~Engine() = default;

void Engine::reset_prefix_cache() {
  if (impl_->index) impl_->index->reset();
}

void Engine::set_stop_tokenizer(const Tokenizer* tokenizer) { impl_->stop_tokenizer = tokenizer; }

RunResult Engine::run(const std::vector<EngineRequest>& requests, const RunCallbacks& callbacks,
                      Clock* clock) {
  start(callbacks, clock);
  for (size_t i = 0; i < requests.size(); ++i) add(requests[i], int(i));
  while (!done()) {
    if (!step(now())) wait_for_arrival();
  }
  return finish();
}

void Engine::start(const RunCallbacks& callbacks, Clock* clock) {
  Impl& m = *impl_;
  const ModelConfig& model = m.backend.config();
  std::vector<int32_t> eos(model.eos_token_ids.begin(), model.eos_token_ids.end());
  m.scheduler = std::make_unique<Scheduler>(m.config, m.pool, m.index.get(), std::move(eos));
  m.scheduler->set_stop_tokenizer(m.stop_tokenizer);
  m.scheduler->start(m.backend.limits().max_model_len);
  m.drain();  // a caller that ended the last run early
  m.overlap = m.config.overlap == StepOverlap::kOn ||
              (m.config.overlap == StepOverlap::kAuto && m.backend.overlaps_steps());
  m.callbacks = callbacks;
  m.own_clock.reset();
  if (!clock) {
    m.own_clock = make_steady_clock();
    clock = m.own_clock.get();
  }
  m.clock = clock;
  if (m.index) m.index->reset_stats();
  m.pool.reset_peak();
  m.stats = StepStats{};
  m.series = StepSeries{};
  m.waited_until = 0.0;
  m.last_collect = {};
  m.start_time = clock->now();
}

void Engine::add(const EngineRequest& request, int index) {
  Impl& m = *impl_;
  const int vocab_size = m.backend.config().vocab_size;
  const std::vector<int32_t>& prompt = request.prompt;
  for (size_t p = 0; p < prompt.size(); ++p) {
    if (prompt[p] < 0 || prompt[p] >= vocab_size) {
      fail("request {}: prompt token {} has id {}, outside the model's vocabulary [0, {})", index,
           p, prompt[p], vocab_size);
    }
  }
  m.running_scheduler().add(request, index);
}

bool Engine::done() const { return impl_->running_scheduler().done() && impl_->submitted == 0; }

double Engine::now() const {
  const Impl& m = *impl_;
  return std::max(m.clock->now() - m.start_time, m.waited_until);
}

double Engine::next_arrival() const { return impl_->running_scheduler().next_arrival(); }

void Engine::wait_for_arrival() {
  Impl& m = *impl_;
  const double next = next_arrival();
  // With every request visible and nothing runnable the run could never finish; add() rejects
  // the requests that could cause it, so this is a bug: say what the scheduler holds.
  if (!std::isfinite(next)) {
    const Scheduler& s = m.running_scheduler();
    std::fprintf(stderr,
                 "roseinfer: internal error: nothing runnable after %lld steps: %d waiting, %d "
                 "running, %d of %d KV blocks free, limits %d tokens / %d seqs per step\n",
                 static_cast<long long>(m.stats.steps), s.num_waiting(), s.num_running(),
                 m.pool.num_free(), m.pool.num_blocks(), m.config.max_num_batched_tokens,
                 m.config.max_num_seqs);
  }
  ROSE_ASSERT(std::isfinite(next));
  m.clock->sleep_until(m.start_time + next);
  m.waited_until = std::max(m.waited_until, next);
}

bool Engine::step(double now) {
  Impl& m = *impl_;
  Scheduler& scheduler = m.running_scheduler();
  try {
    if (m.submitted == 0) {
      if (scheduler.done()) return false;
      if (!m.schedule_and_submit(now, m.plan, m.current)) return false;
    }
    // Step N runs. Overlapped, step N+1 is planned from the rows that go on and queued behind it
    // now, so the GPU starts it as soon as N ends, while the host applies N's ids.
    const bool ahead = m.overlap && scheduler.continue_ahead() &&
                       m.schedule_and_submit(std::max(now, this->now()), m.next_plan, m.next);
    m.collect_and_apply();
    if (ahead) {
      ++m.stats.steps_ahead;
      std::swap(m.plan, m.next_plan);
      m.current = m.next;
    }
  } catch (...) {
    m.abandon_run();
    throw;
  }
  return true;
}

bool Engine::Impl::schedule_and_submit(double now, StepPlan& into, Submitted& record) {
  const auto host_start = std::chrono::steady_clock::now();
  scheduler->schedule(now, into);
  stats.schedule_time_s += seconds_since(host_start);
  if (into.num_seqs() == 0) return false;
  record.pure_decode = into.is_pure_decode();
  record.num_seqs = into.num_seqs();
  record.prefill_tokens = scheduler->last_prefill_tokens();
  record.decode_tokens = scheduler->last_decode_tokens();
  record.context_tokens = 0;  // read for pure-decode steps only (record_step)
  if (record.pure_decode) {
    for (int32_t len : into.context_lens) record.context_tokens += len;
  }
  record.at = std::chrono::steady_clock::now();
  backend.submit(into);
  ++submitted;
  return true;
}

void Engine::Impl::collect_and_apply() {
  backend.collect(out);
  --submitted;
  const auto collected = std::chrono::steady_clock::now();
  const double sampled_at = clock->now() - start_time;  // the sampled ids are on the host
  const auto began = std::max(current.at, last_collect);
  last_collect = collected;
  record_step(current, std::chrono::duration<double>(collected - began).count());
  const auto host_start = std::chrono::steady_clock::now();
  scheduler->update(out, sampled_at, callbacks);
  stats.schedule_time_s += seconds_since(host_start);
  if (!config.keep_results) return;  // a streamed run of any length keeps no series
  series.time.push_back(sampled_at);
  series.kv_used_blocks.push_back(pool.num_used());
  series.running.push_back(scheduler->num_running());
  series.waiting.push_back(scheduler->num_waiting());
}

void Engine::Impl::record_step(const Submitted& step, double exec_time) {
  ++stats.steps;
  stats.execute_time_s += exec_time;
  stats.prefill_tokens += step.prefill_tokens;
  stats.decode_tokens += step.decode_tokens;
  if (!step.pure_decode) return;
  ++stats.decode_steps;
  stats.decode_step_tokens += step.num_seqs;
  stats.decode_time_s += exec_time;
  stats.decode_bytes += double(backend.weight_bytes()) +
                        double(step.context_tokens) * double(backend.kv_bytes_per_token());
}

int Engine::num_waiting() const { return impl_->scheduler ? impl_->scheduler->num_waiting() : 0; }
int Engine::num_running() const { return impl_->scheduler ? impl_->scheduler->num_running() : 0; }
int Engine::kv_used_blocks() const { return impl_->pool.num_used(); }
const PrefixIndex* Engine::prefix_index() const { return impl_->index.get(); }

RunResult Engine::finish() {
  Impl& m = *impl_;
  Scheduler& scheduler = m.running_scheduler();
  m.drain();  // ended before done(): a step planned ahead may still be running
  RunResult result;
  result.steps = m.stats;
  result.step_series = std::move(m.series);
  result.requests.reserve(size_t(scheduler.num_requests()));
  double first_arrival = std::numeric_limits<double>::infinity();
  double last_finish = 0.0;
  const int kept = m.config.keep_results ? scheduler.num_requests() : 0;
  for (int i = 0; i < kept; ++i) {
    const Sequence& seq = scheduler.seq(i);
    RequestResult r = seq.result;
    r.output_ids.assign(seq.tokens.begin() + seq.prompt_len, seq.tokens.end());
    first_arrival = std::min(first_arrival, r.timeline.arrival);
    last_finish = std::max(last_finish, r.timeline.finish);
    result.requests.push_back(std::move(r));
  }
  result.duration_s = result.requests.empty() ? 0.0 : std::max(0.0, last_finish - first_arrival);
  if (m.index) {
    const PrefixIndex::Stats& s = m.index->stats();
    result.cache = {s.lookups, s.queried_tokens, s.hit_tokens, s.evictions};
  }
  result.kv.block_size = m.pool.block_size();
  result.kv.total_blocks = m.pool.num_blocks();
  result.kv.peak_used_blocks = m.pool.peak_used();
  result.kv.preemptions = scheduler.num_preemptions();
  m.scheduler.reset();
  m.own_clock.reset();
  m.clock = nullptr;
  return result;
}

}  // namespace rose
