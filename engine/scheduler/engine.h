#pragma once
// The step loop: scheduler.schedule(now) -> backend.submit(plan) -> backend.collect(out) ->
// scheduler.update(out, now), over one paged KV pool with prefix caching (DESIGN.md,
// reference/scheduling.md). Overlapped (EngineConfig::overlap; by default where the backend runs
// steps asynchronously), step N+1 is scheduled and submitted between N's submit and collect: the
// rows of N that go on decode a previous_step_token (sampling_rule.h) that the backend reads from
// what N sampled, so the GPU never waits for the host between steps. Outputs are the same as one
// step at a time; a request that N ends on EOS or a stop string costs a row of N+1, dropped.
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/scheduler/clock.h"
#include "engine/scheduler/engine_config.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/runner.h"

namespace rose {

class PrefixIndex;
class Tokenizer;

class Engine : public Runner {
 public:
  Engine(Backend& backend, const EngineConfig& config, std::string model_id);
  ~Engine() override;
  // Runs every request to completion and returns per-request results in input order:
  // start(), add() each, step() until done, finish().
  RunResult run(const std::vector<EngineRequest>& requests, const RunCallbacks& callbacks = {},
                Clock* clock = nullptr) override;
  // Drops every cached block key: the next run starts cold.
  void reset_prefix_cache() override;
  // The tokenizer that requests' stop strings are matched with (null: such requests are refused).
  void set_stop_tokenizer(const Tokenizer* tokenizer);

  // The step API, for callers that interleave arrivals with steps (a cluster, streamed input).
  // Begins a run: `clock`'s now() becomes time 0 (null: the steady clock, owned by the engine).
  void start(const RunCallbacks& callbacks = {}, Clock* clock = nullptr);
  // Queues a request; rose::Error if it can never run (bad token id, too long, ...). `index` is
  // what the callbacks report for it; results come back in the order of add().
  void add(const EngineRequest& request, int index);
  // Runs one step at `now` (seconds since start()). False when nothing could run at `now`: every
  // added request has finished, or the rest arrive later (next_arrival()).
  bool step(double now);
  bool done() const;  // every added request has finished
  // Seconds since start(), never below an arrival already waited for by wait_for_arrival().
  double now() const;
  // Arrival of the first added request not yet visible, +inf when all are.
  double next_arrival() const;
  // Sleeps until next_arrival() (which must be finite).
  void wait_for_arrival();
  // Ends the run: per-request results in add() order (none with config.keep_results off: they
  // went to on_finish) and the run's stats.
  RunResult finish();

  // What a router sees between steps: requests waiting for admission, running, KV blocks in use,
  // and the prefix index (null with the cache off) that the precise router asks.
  int num_waiting() const;
  int num_running() const;
  int kv_used_blocks() const;
  const PrefixIndex* prefix_index() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rose
