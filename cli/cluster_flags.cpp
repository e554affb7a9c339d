#include "cli/cluster_flags.h"

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
                  "prefix router: probability of ignoring affinity for a request (default 0.01)")
      ->check(CLI::Range(0.0, 1.0));
}

void check_cluster_flags(const ModelFlags& model_flags, const ClusterFlags& flags) {
  if (model_flags.device != "cuda" || flags.backend == "sim" || flags.data_parallel <= 1) return;
  const int gpus = cuda_device_count();
  if (flags.data_parallel > gpus) {
    throw CLI::ValidationError(
        "--data-parallel", fmt::format("{} replicas on --device cuda, but {} GPU(s) are present",
                                       flags.data_parallel, gpus));
  }
}

std::string Replicas::device_name() const {
  const std::string one = backends.front()->device_name();
  return backends.size() == 1 ? one : fmt::format("{} x {}", backends.size(), one);
}

Replicas make_replicas(const LoadedModel& model, const ModelFlags& model_flags,
                       const EngineFlags& engine_flags, const ClusterFlags& flags) {
  Replicas replicas;
  replicas.sim = flags.backend == "sim";
  if (!replicas.sim && model.cuda && flags.data_parallel > 1) {
    throw CLI::ValidationError("--data-parallel",
                               "more replicas than the one GPU a process drives today; use "
                               "--device cpu or --backend sim");
  }
  StepTimeModel step_time;
  if (replicas.sim) {
    if (flags.sim_model.empty())
      throw CLI::ValidationError("--backend sim", "needs --sim-model FILE (roseinfer calibrate)");
    step_time = read_step_time_model(flags.sim_model);
  }
  const BackendOptions options = backend_options(model_flags, engine_flags);
  for (int r = 0; r < flags.data_parallel; ++r) {
    if (replicas.sim) {
      replicas.clocks.push_back(std::make_unique<SimClock>());
      replicas.backends.push_back(
          make_sim_backend(model.config(), options, step_time, *replicas.clocks.back()));
    } else {
      replicas.backends.push_back(make_backend(model, model_flags, engine_flags));
    }
  }
  return replicas;
}

std::unique_ptr<Runner> make_runner(Replicas& replicas, const EngineConfig& config,
                                    const std::string& model_id, const ClusterFlags& flags,
                                    const Tokenizer* stop_tokenizer) {
  if (replicas.backends.size() == 1 && !replicas.sim) {
    auto engine = std::make_unique<Engine>(*replicas.backends[0], config, model_id);
    engine->set_stop_tokenizer(stop_tokenizer);
    return engine;
  }
  std::vector<ClusterReplica> members;
  for (size_t r = 0; r < replicas.backends.size(); ++r) {
    members.push_back(
        {replicas.backends[r].get(), replicas.sim ? replicas.clocks[r].get() : nullptr});
  }
  ClusterConfig cluster;
  cluster.engine = config;
  cluster.model_id = model_id;
  cluster.router = flags.router;
  cluster.stop_tokenizer = stop_tokenizer;
  cluster.prefix.chunk_tokens = flags.router_chunk_tokens;
  cluster.prefix.max_chunks = flags.router_max_chunks;
  cluster.prefix.exploration = flags.router_exploration;
  return std::make_unique<Cluster>(std::move(members), cluster);
}

}  // namespace rose::cli
