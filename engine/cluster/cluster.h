#pragma once
// Cluster: N engine replicas (each its own backend and KV pool) behind a RoutePolicy, run as one
// Runner; the router places each request when it arrives (DESIGN.md "Scale-out").
//
// The replicas are stepped in turn on one thread, each on a clock of its own that runs only while
// that replica steps (a stopwatch over real compute, or the sim backend's virtual clock), so every
// replica's timeline is the one it would have had running beside the others, and the run is
// deterministic. The next event is always the earliest one: a replica's next step at its own time,
// or the next arrival, which is routed once every busy replica has caught up with it.
//
// The loop reaches each replica through a ReplicaHandle (replica_handle.h): an engine in this
// process, or one on another MPI rank (ranks.h), which answers each call before the loop goes on,
// so placement, order and results are the same wherever the replicas run.
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
  PrefixRouterOptions prefix;  // model_id and capacity_chunks are filled in by the cluster
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
