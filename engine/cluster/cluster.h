#pragma once
// Cluster: N engine replicas (each its own backend and KV pool) behind a RoutePolicy, run as one
// Runner; the router places each request when it arrives (DESIGN.md "Scale-out").
//
// Each replica keeps a clock of its own that runs only while that replica steps (a stopwatch over
// real compute, or the sim backend's virtual clock), so every replica's timeline is the one it
// would have had running beside the others. Between two arrivals the replicas do not see each
// other, so before each arrival every replica still busy before it advances to it (a step begun
// before the arrival is finished, past it), at the same time when `concurrent` (each in-process
// replica on a thread of its own, each remote one on its rank), else one after the other; then the
// router reads their states and places the request. A replica stands exactly where the earliest-
// event loop of one thread (step the busy replica furthest behind, lower number first; route an
// arrival once no busy replica is behind it) would have had it, so placement and results do not
// depend on `concurrent`, and on the sim backend they are the same bit for bit on every run.
// Callbacks (RunCallbacks, and the router's on_finished) fire on the caller's thread after each
// advance, in that loop's order: by the clock at the start of the step that raised them, then by
// replica number. They come once per advance, so in offline mode (one advance, to the end) at the
// end of the run.
//
// The loop reaches each replica through a ReplicaHandle (replica_handle.h): an engine in this
// process, or one on another MPI rank (ranks.h), so placement, order and results are the same
// wherever the replicas run.
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/sim_backend.h"
#include "engine/cluster/replica_handle.h"
#include "engine/cluster/route_policy.h"
#include "engine/scheduler/engine.h"
#include "engine/scheduler/runner.h"

namespace rose {

struct ClusterReplica {
  Backend* backend = nullptr;
  SimClock* sim_clock = nullptr;  // the sim backend's clock; null: real compute, timed by stopwatch
};

struct ClusterConfig {
  EngineConfig engine;
  std::string model_id;
  std::string router = "round_robin";         // route_policy_names()
  const Tokenizer* stop_tokenizer = nullptr;  // every replica's Engine::set_stop_tokenizer
  // model_id and capacity_chunks are filled in by the cluster; its guard serves precise too.
  PrefixRouterOptions prefix;
  // The replicas advance at the same time (above): for replicas on distinct GPUs, on the sim
  // backend, or on other ranks. CPU replicas of one process would share its cores, and each one's
  // stopwatch would count the time the others took from it. The Cluster constructor of backends
  // gives each replica a thread of its own when set; handles come made.
  bool concurrent = false;
};

class Cluster : public Runner {
 public:
  // Throws rose::Error for an unknown router or no replicas. Backends must outlive the cluster.
  Cluster(const std::vector<ClusterReplica>& replicas, const ClusterConfig& config);
  // Replicas in this process or elsewhere (replica_handle.h), made with config.engine.
  Cluster(std::vector<std::unique_ptr<ReplicaHandle>> replicas, const ClusterConfig& config);
  ~Cluster() override;

  // `clock` is unused: each replica keeps its own time (above). Results in input order, with
  // per_replica and routing filled in. A replica that fails fails the run with its number.
  RunResult run(const std::vector<EngineRequest>& requests, const RunCallbacks& callbacks = {},
                Clock* clock = nullptr) override;
  void reset_prefix_cache() override;
  int num_replicas() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rose
