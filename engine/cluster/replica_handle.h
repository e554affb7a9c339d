#pragma once
// ReplicaHandle: what the cluster loop (cluster.h) does with one replica, whether the replica's
// engine runs in this process (make_local_replica) or on another MPI rank (ranks.h). The loop
// only calls these; a remote implementation moves the same calls and their results as messages.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/sim_backend.h"
#include "engine/scheduler/engine_config.h"
#include "engine/scheduler/request.h"

namespace rose {

class Backend;
class Tokenizer;

// What the router and the loop read between calls; refreshed by every call that changes it.
struct ReplicaState {
  int waiting = 0;  // Engine::num_waiting
  int running = 0;  // Engine::num_running
  int kv_used_blocks = 0;
  bool done = true;  // every added request has finished
  double now = 0;    // the replica's own clock (seconds since start)
};

// Fixed for a replica's life.
struct ReplicaShape {
  int block_size = 16;
  int num_kv_blocks = 0;
};

// The callbacks a replica's steps raised during an advance, recorded instead of fired so that the
// loop can deliver every replica's on its own thread in one deterministic order (cluster.h). Each
// event carries the replica's clock at the start of the step that raised it.
struct ReplicaEvent {
  double step_start = 0;
  int index = 0;      // the request, as given to add()
  int32_t token = 0;  // on_token's (when result < 0)
  int result = -1;    // on_finish: its result in ReplicaEvents::results; -1: an on_token
};
struct ReplicaEvents {
  std::vector<ReplicaEvent> events;  // in the order the engine raised them
  std::vector<RequestResult> results;
  void clear() {
    events.clear();
    results.clear();
  }
};

class ReplicaHandle {
 public:
  virtual ~ReplicaHandle() = default;
  virtual ReplicaShape shape() const = 0;
  // Not to be read between begin_advance() and end_advance().
  virtual const ReplicaState& state() const = 0;
  // Begins a run: the replica's clock restarts at 0. Its steps' on_finish are recorded (and their
  // on_token too when `record_tokens`) for end_advance().
  virtual void start(bool record_tokens) = 0;
  // The replica (idle until then) waits for `now`, then queues the request; results of finish()
  // come back in add() order. rose::Error if the request can never run.
  virtual void add(const EngineRequest& request, int index, double now) = 0;
  // Advances the replica to `until`: steps while it holds unfinished requests and its clock is
  // before `until` (a step begun before `until` ends past it; when nothing can run yet, it waits
  // for its next arrival). A replica on another rank, or one with a thread of its own, works from
  // begin_advance() on, beside the caller; otherwise end_advance() does the work.
  virtual void begin_advance(double until) = 0;
  // True when end_advance() would not wait (always for a replica without a thread).
  virtual bool advance_ready() = 0;
  // Waits for the advance begun; appends the events it raised to `events`. A failed step is
  // rose::Error "replica R of N failed: ...".
  virtual void end_advance(ReplicaEvents& events) = 0;
  // Leading prompt blocks the replica's own prefix index holds (0 with the cache off).
  virtual int cached_prefix_blocks(std::span<const int32_t> prompt) = 0;
  // Ends the run: Engine::finish's result, and the seconds the replica spent stepping.
  virtual RunResult finish(double* busy_s) = 0;
  virtual void reset_prefix_cache() = 0;
};

// The replica's engine in this process on `backend` (and `sim_clock`, null for real compute,
// timed by a stopwatch that runs only while the replica steps). `replica`/`num_replicas` name it in
// errors. `threaded`: it advances on a thread of its own (started at the first advance, ended with
// the handle), beside the other replicas. Backend and clock must outlive the handle.
std::unique_ptr<ReplicaHandle> make_local_replica(Backend& backend, SimClock* sim_clock,
                                                  const EngineConfig& config,
                                                  const std::string& model_id,
                                                  const Tokenizer* stop_tokenizer, int replica,
                                                  int num_replicas, bool threaded);

}  // namespace rose
