#pragma once
// ReplicaHandle: what the cluster loop (cluster.h) does with one replica, whether the replica's
// engine runs in this process (make_local_replica) or on another MPI rank (mpi_replica.h). The loop
// only calls these; a remote implementation moves the same calls and their results as messages.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

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

class ReplicaHandle {
 public:
  virtual ~ReplicaHandle() = default;
  virtual ReplicaShape shape() const = 0;
  virtual const ReplicaState& state() const = 0;
  // Begins a run: the replica's clock restarts at 0. Callbacks fire during step(), on this thread,
  // in the order the engine raised them.
  virtual void start(const RunCallbacks& callbacks) = 0;
  // The replica (idle until then) waits for `now`, then queues the request; results of finish()
  // come back in add() order. rose::Error if the request can never run.
  virtual void add(const EngineRequest& request, int index, double now) = 0;
  // One engine step on the replica's clock, or, when nothing can run yet, a wait for its next
  // arrival. A failure is rose::Error "replica R of N failed: ...".
  virtual void step() = 0;
  // Leading prompt blocks the replica's own prefix index holds (0 with the cache off).
  virtual int cached_prefix_blocks(std::span<const int32_t> prompt) = 0;
  // Ends the run: Engine::finish's result, and the seconds the replica spent stepping.
  virtual RunResult finish(double* busy_s) = 0;
  virtual void reset_prefix_cache() = 0;
};

// The replica's engine in this process on `backend` (and `sim_clock`, null for real compute,
// timed by a stopwatch that runs only while the replica steps). `replica`/`num_replicas` name it in
// errors. Backend and clock must outlive the handle.
std::unique_ptr<ReplicaHandle> make_local_replica(Backend& backend, SimClock* sim_clock,
                                                  const EngineConfig& config,
                                                  const std::string& model_id,
                                                  const Tokenizer* stop_tokenizer, int replica,
                                                  int num_replicas);

}  // namespace rose
