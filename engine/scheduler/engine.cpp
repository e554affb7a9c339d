#include "engine/scheduler/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
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

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
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
        pool(backend_in.num_kv_blocks(), backend_in.block_size()) {
    if (config.prefix_cache) {
      index = std::make_unique<PrefixIndex>(pool, model_id, config.cache_salt);
    }
    // Sized once for the largest step the budgets allow, so the step loop never reallocates.
    plan.token_ids.reserve(size_t(config.max_num_batched_tokens));
    plan.positions.reserve(size_t(config.max_num_batched_tokens));
    plan.slot_mapping.reserve(size_t(config.max_num_batched_tokens));
    plan.query_start.reserve(size_t(config.max_num_seqs) + 1);
    plan.context_lens.reserve(size_t(config.max_num_seqs));
    plan.do_sample.reserve(size_t(config.max_num_seqs));
    plan.sampling.reserve(size_t(config.max_num_seqs));
    plan.sample_index.reserve(size_t(config.max_num_seqs));
    out.sampled.reserve(size_t(config.max_num_seqs));
  }

  Backend& backend;
  EngineConfig config;
  std::string model_id;
  BlockPool pool;
  std::unique_ptr<PrefixIndex> index;  // null with prefix caching off
  StepPlan plan;
  StepOutput out;
};

Engine::Engine(Backend& backend, const EngineConfig& config, std::string model_id)
    : impl_(std::make_unique<Impl>(backend, config, std::move(model_id))) {}

Engine::~Engine() = default;

void Engine::reset_prefix_cache() {
  if (impl_->index) impl_->index->reset();
}

RunResult Engine::run(const std::vector<EngineRequest>& requests, const RunCallbacks& callbacks,
                      Clock* clock) {
  Impl& m = *impl_;
  const ModelConfig& model = m.backend.config();
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<int32_t>& prompt = requests[i].prompt;
    for (size_t p = 0; p < prompt.size(); ++p) {
      if (prompt[p] < 0 || prompt[p] >= model.vocab_size) {
        fail("request {}: prompt token {} has id {}, outside the model's vocabulary [0, {})", i, p,
             prompt[p], model.vocab_size);
      }
    }
  }
  std::vector<int32_t> eos(model.eos_token_ids.begin(), model.eos_token_ids.end());
  Scheduler scheduler(m.config, m.pool, m.index.get(), std::move(eos));
  scheduler.start(requests, model.max_position_embeddings);

  std::unique_ptr<Clock> own_clock;
  if (!clock) {
    own_clock = make_steady_clock();
    clock = own_clock.get();
  }
  if (m.index) m.index->reset_stats();
  m.pool.reset_peak();
  RunResult result;
  StepStats& stats = result.steps;
  const double weight_bytes = double(m.backend.weight_bytes());
  const double kv_bytes_per_token = double(m.backend.kv_bytes_per_token());

  const double start = clock->now();
  // After sleeping to an arrival, (start + t) - start can round below t; never let `now` fall
  // short of an arrival we have already waited for, or the loop would wait for it forever.
  double waited_until = 0.0;
  try {
    while (!scheduler.done()) {
      const double now = std::max(clock->now() - start, waited_until);
      auto host_start = std::chrono::steady_clock::now();
      scheduler.schedule(now, m.plan);
      stats.schedule_time_s += seconds_since(host_start);
      if (m.plan.num_seqs() == 0) {
        const double next = scheduler.next_arrival();
        // With every request visible and nothing runnable the run could never finish; start()
        // rejects the requests that could cause it, so this is a bug.
        ROSE_ASSERT(std::isfinite(next));
        clock->sleep_until(start + next);
        waited_until = next;
        continue;
      }
      const bool pure_decode = m.plan.is_pure_decode();
      const auto exec_start = std::chrono::steady_clock::now();
      m.backend.execute(m.plan, m.out);
      const double exec_time = seconds_since(exec_start);
      const double sampled_at = clock->now() - start;  // the sampled ids are on the host now

      ++stats.steps;
      stats.execute_time_s += exec_time;
      stats.prefill_tokens += scheduler.last_prefill_tokens();
      stats.decode_tokens += scheduler.last_decode_tokens();
      if (pure_decode) {
        ++stats.decode_steps;
        stats.decode_step_tokens += m.plan.num_seqs();
        stats.decode_time_s += exec_time;
        int64_t context_tokens = 0;
        for (int32_t len : m.plan.context_lens) context_tokens += len;
        stats.decode_bytes += weight_bytes + double(context_tokens) * kv_bytes_per_token;
      }
      host_start = std::chrono::steady_clock::now();
      scheduler.update(m.out, sampled_at, callbacks);
      stats.schedule_time_s += seconds_since(host_start);
      StepSeries& series = result.step_series;
      series.time.push_back(sampled_at);
      series.kv_used_blocks.push_back(m.pool.num_used());
      series.running.push_back(scheduler.num_running());
      series.waiting.push_back(scheduler.num_waiting());
    }
  } catch (...) {
    // A failed step (a backend or callback error) leaves blocks held and keys registered for KV
    // that may never have been written: give the blocks back and forget the keys, so the engine
    // can run again.
    scheduler.release_all();
    if (m.index) m.index->reset();
    throw;
  }

  result.requests.reserve(requests.size());
  double first_arrival = std::numeric_limits<double>::infinity();
  double last_finish = 0.0;
  for (int i = 0; i < scheduler.num_requests(); ++i) {
    const Sequence& seq = scheduler.seq(i);
    RequestResult r = seq.result;
    r.output_ids.assign(seq.tokens.begin() + seq.prompt_len, seq.tokens.end());
    first_arrival = std::min(first_arrival, r.timeline.arrival);
    last_finish = std::max(last_finish, r.timeline.finish);
    result.requests.push_back(std::move(r));
  }
  result.duration_s = requests.empty() ? 0.0 : std::max(0.0, last_finish - first_arrival);
  if (m.index) {
    const PrefixIndex::Stats& s = m.index->stats();
    result.cache = {s.lookups, s.queried_tokens, s.hit_tokens, s.evictions};
  }
  result.kv.block_size = m.pool.block_size();
  result.kv.total_blocks = m.pool.num_blocks();
  result.kv.peak_used_blocks = m.pool.peak_used();
  result.kv.preemptions = scheduler.num_preemptions();
  return result;
}

}  // namespace rose
