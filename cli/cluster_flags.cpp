#include "cli/cluster_flags.h"

#include <cstdlib>

#include "engine/cluster/placement.h"
#include "engine/cluster/ranks.h"
#include "engine/common/error.h"

namespace rose::cli {

void add_cluster_flags(CLI::App* cmd, ClusterFlags& flags) {
  cmd->add_option("--data-parallel", flags.data_parallel,
                  "replicas, each an engine with its own backend and KV pool, behind a router "
                  "(default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--router", flags.router,
                  "how --data-parallel replicas get requests: round_robin, least_loaded, prefix "
                  "(approximate prefix index + load), precise (the replicas' own indexes)")
      ->check(CLI::IsMember(route_policy_names()));
  cmd->add_option("--backend", flags.backend,
                  "model (compute on --device) or sim (no compute: a step-time model advances a "
                  "virtual clock; needs --sim-model and --num-kv-blocks)")
      ->check(CLI::IsMember({"model", "sim"}));
  cmd->add_option("--sim-model", flags.sim_model,
                  "--backend sim: step-time model JSON from `roseinfer calibrate`");
  cmd->add_option("--router-chunk-tokens", flags.router_chunk_tokens,
                  "prefix router: tokens per hashed chunk (default 16)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--router-max-chunks", flags.router_max_chunks,
                  "prefix router: chunks matched at most (default 256)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--router-exploration", flags.router_exploration,
                  "prefix router: probability of placing a request by load alone, to seed other "
                  "replicas with its "
                  "prefix (default 0; GAIE's affinity filter uses 0.01)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--router-load-factor", flags.router_load_factor,
                  "prefix and precise routers: a replica past 5 queued requests stays a "
                  "candidate while it would hold at most this factor of the mean queue "
                  "(default 1.25; 0: the threshold alone)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpus", flags.gpus,
                  "--device cuda with --data-parallel: the GPUs of the replicas, e.g. 0,1 "
                  "(default 0..N-1; with --tensor-parallel T, replica r takes entries r*T.."
                  "r*T+T-1; under mpirun each rank takes its local rank's share)");
}

void check_cluster_flags(const ModelFlags& model_flags, const ClusterFlags& flags) {
  const RankWorld& world = rank_world();
  if (world.size > 1) check_rank_count(flags.data_parallel, world.size);
  if (model_flags.tensor_parallel > 1 && flags.backend == "sim") {
    throw CLI::ValidationError("--tensor-parallel",
                               "needs --backend model (the sim backend "
                               "models one replica's step time)");
  }
  if (model_flags.device != "cuda" || flags.backend == "sim") {
    if (!flags.gpus.empty()) throw CLI::ValidationError("--gpus", "needs --device cuda");
    return;
  }
  const int tp = model_flags.tensor_parallel;
  if (flags.data_parallel == 1 && tp == 1 && flags.gpus.empty()) return;  // the usual one-GPU run
  // Each process's replicas need GPUs of its own node, tp of them each.
  replica_devices(flags.gpus, flags.data_parallel / world.size, world.local_rank,
                  cuda_device_count(), tp);
}

std::string Replicas::device_name() const {
  const std::string one = backends.front()->device_name();
  const int ranks = rank_world().size;
  if (ranks > 1) return fmt::format("{} x {} over {} MPI ranks", total, one, ranks);
  return total == 1 ? one : fmt::format("{} x {}", total, one);
}

Replicas make_replicas(const LoadedModel& model, const ModelFlags& model_flags,
                       const EngineFlags& engine_flags, const ClusterFlags& flags) {
  Replicas replicas;
  replicas.sim = flags.backend == "sim";
  replicas.total = flags.data_parallel;
  replicas.concurrent = replicas.sim || model.cuda;
  if (const char* at_once = std::getenv("ROSEINFER_REPLICAS_AT_ONCE")) {
    replicas.concurrent = std::string(at_once) == "1";
  }
  const RankWorld& world = rank_world();
  const int local = int(rank_replicas(world.rank, world.size, flags.data_parallel).size());
  StepTimeModel step_time;
  if (replicas.sim) {
    if (flags.sim_model.empty())
      throw CLI::ValidationError("--backend sim", "needs --sim-model FILE (roseinfer calibrate)");
    step_time = read_step_time_model(flags.sim_model);
  }
  BackendOptions options = backend_options(model_flags, engine_flags);
  // Replica r's GPUs: devices[r * tp, (r + 1) * tp).
  const int tp = model_flags.tensor_parallel;
  std::vector<int> devices(size_t(local * tp), 0);
  if (!replicas.sim && model.cuda) {
    devices = replica_devices(flags.gpus, local, world.local_rank, cuda_device_count(), tp);
  }
  for (int r = 0; r < local; ++r) {
    if (replicas.sim) {
      replicas.clocks.push_back(std::make_unique<SimClock>());
      replicas.backends.push_back(
          make_sim_backend(model.config(), options, step_time, *replicas.clocks.back()));
    } else {
      const std::vector<int> mine(devices.begin() + r * tp, devices.begin() + (r + 1) * tp);
      replicas.backends.push_back(make_backend_on(model, model_flags, options, mine));
    }
  }
  return replicas;
}

std::unique_ptr<Runner> make_runner(Replicas& replicas, const EngineConfig& config,
                                    const std::string& model_id, const ClusterFlags& flags,
                                    const Tokenizer* stop_tokenizer) {
  if (replicas.total == 1 && !replicas.sim) {
    auto engine = std::make_unique<Engine>(*replicas.backends[0], config, model_id);
    engine->set_stop_tokenizer(stop_tokenizer);
    return engine;
  }
  const RankWorld& world = rank_world();
  std::vector<std::unique_ptr<ReplicaHandle>> members;
  for (int r = 0; r < replicas.total; ++r) {
    const int rank = replica_rank(r, world.size), local = replica_local_index(r, world.size);
    if (rank == world.rank) {
      members.push_back(
          make_local_replica(*replicas.backends[size_t(local)],
                             replicas.sim ? replicas.clocks[size_t(local)].get() : nullptr, config,
                             model_id, stop_tokenizer, r, replicas.total, replicas.concurrent));
    } else {
      members.push_back(make_rank_replica(rank, local, config, model_id, r, replicas.total));
    }
  }
  ClusterConfig cluster;
  cluster.engine = config;
  cluster.model_id = model_id;
  cluster.router = flags.router;
  cluster.stop_tokenizer = stop_tokenizer;
  cluster.concurrent = replicas.concurrent;
  cluster.prefix.chunk_tokens = flags.router_chunk_tokens;
  cluster.prefix.max_chunks = flags.router_max_chunks;
  cluster.prefix.exploration = flags.router_exploration;
  cluster.prefix.guard.queue_load_factor = flags.router_load_factor;
  return std::make_unique<Cluster>(std::move(members), cluster);
}

}  // namespace rose::cli
