#pragma once
// The scale-out flags of bench and run (--data-parallel, --router, --backend sim) and what they
// build: the replicas' backends and the Runner (one Engine, or a Cluster of them).
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.h"
#include "engine/backend/sim_backend.h"
#include "engine/cluster/cluster.h"
#include "engine/scheduler/runner.h"

namespace rose::cli {

struct ClusterFlags {
  int data_parallel = 1;
  std::string router = "round_robin";
  std::string backend = "model";  // model: the --device's real compute; sim: the step-time model
  std::string sim_model;          // --backend sim: a `roseinfer calibrate` output
  int router_chunk_tokens = 16;
  int router_max_chunks = 256;
  double router_exploration = 0;  // PrefixRouterOptions::exploration says why
  double router_load_factor = 1.25;
  std::string gpus;  // --device cuda: the node's GPUs for the replicas ("0,1"); empty: 0..N-1
};

void add_cluster_flags(CLI::App* cmd, ClusterFlags& flags);
// Usage errors (exit 2) found before the model loads: under mpirun, a --data-parallel that is not
// a multiple of the ranks; on --device cuda, more of this process's replicas than GPUs, or a bad
// --gpus entry.
void check_cluster_flags(const ModelFlags& model_flags, const ClusterFlags& flags);

// Owns the backends of the replicas this process runs (and the sim backends' clocks): all of them
// in one process, or under mpirun the ranks' share (placement.h: replica i on rank i % ranks).
struct Replicas {
  std::vector<std::unique_ptr<SimClock>> clocks;
  std::vector<std::unique_ptr<Backend>> backends;  // (local replicas,) in replica order
  bool sim = false;
  int total = 1;  // --data-parallel: replicas over every rank
  // The replicas advance at the same time (ClusterConfig::concurrent): sim replicas, and CUDA ones
  // (each on a GPU of its own); CPU replicas would share the cores and skew each other's clocks.
  // ROSEINFER_REPLICAS_AT_ONCE=0 or 1 overrides it, for before/after comparisons with one binary
  // (every rank must see the same value).
  bool concurrent = false;
  std::string device_name() const;
};

// rose::Error for a bad --sim-model file. Each CUDA replica's backend on its own GPU.
Replicas make_replicas(const LoadedModel& model, const ModelFlags& model_flags,
                       const EngineFlags& engine_flags, const ClusterFlags& flags);

// One Engine for a single real replica, else a Cluster (a sim replica needs its virtual clock);
// replicas of other ranks are reached through MPI (ranks.h).
// `stop_tokenizer` matches requests' stop strings (null: such requests are refused).
std::unique_ptr<Runner> make_runner(Replicas& replicas, const EngineConfig& config,
                                    const std::string& model_id, const ClusterFlags& flags,
                                    const Tokenizer* stop_tokenizer);

}  // namespace rose::cli
