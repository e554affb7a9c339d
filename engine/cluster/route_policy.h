#pragma once
// Request routing across data-parallel replicas: a RoutePolicy picks the replica of each request
// when it arrives (DESIGN.md "Scale-out", reference/routing.md); one file per policy.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace rose {

// What the router knows of one replica when it places a request.
struct ReplicaLoad {
  int waiting = 0;  // in its scheduler's waiting queue (not yet admitted)
  int running = 0;  // admitted and not finished
  int kv_used_blocks = 0;
  int kv_total_blocks = 0;
  // Routed to it and not yet taken in by its scheduler (routed_load.h): within one instant, such
  // as an offline run's t=0, the router's own placements are the only load it can see.
  int pending = 0;
  // Requests on the replica not yet admitted: what the load guard and the queue score count.
  int queued() const { return waiting + pending; }
  double kv_utilisation() const {
    return kv_total_blocks > 0 ? double(kv_used_blocks) / kv_total_blocks : 0.0;
  }
};

struct RouteQuery {
  int request_index = 0;
  std::span<const int32_t> prompt;  // (prompt_len,) token ids
  double now = 0;                   // seconds on the cluster's clock
};

struct RouteChoice {
  int replica = 0;
  int predicted_hit_tokens = 0;  // prompt tokens the policy expects that replica to have cached
};

class RoutePolicy {
 public:
  virtual ~RoutePolicy() = default;
  // `loads`: (num_replicas,), never empty.
  virtual RouteChoice pick(const RouteQuery& query, std::span<const ReplicaLoad> loads) = 0;
  // The request was placed on `replica` (the cluster may override a pick, e.g. in tests).
  virtual void on_routed(const RouteQuery& /*query*/, int /*replica*/) {}
  virtual void on_finished(int /*request_index*/, int /*replica*/) {}
};

// The seed's hard thresholds: a replica is a prefix candidate only below both (GAIE's
// QUEUE_THRESHOLD_CRITICAL 5 and KV_CACHE_THRESHOLD 0.8); when no replica is, all are. In a burst
// every queue passes 5 after a few requests per replica and the threshold then separates nothing,
// so a longer queue still passes while this request would leave it within queue_load_factor of
// the mean queue (this request counted): KubeAI's bounded load (CHWBL, meanLoadFactor 1.25), which
// keeps affinity from piling a burst onto a few replicas.
struct LoadGuard {
  int queue_threshold = 5;          // queued requests (ReplicaLoad::queued)
  double queue_load_factor = 1.25;  // 0: the threshold alone
  double kv_threshold = 0.8;        // fraction of the KV pool in use
};

// GAIE's default profile: queue x2 + KV utilisation x2 + prefix x3, the maximum score wins.
struct ScoreWeights {
  double queue = 2.0;
  double kv = 2.0;
  double prefix = 3.0;
};

struct PrefixRouterOptions {
  std::string model_id;  // namespaces the hashes: replicas of other models never match
  int chunk_tokens = 16;
  int max_chunks = 256;  // longer prompts are matched on their first max_chunks chunks
  // (num_replicas,) each replica's LRU capacity in chunks: its KV pool's tokens / chunk_tokens.
  std::vector<int64_t> capacity_chunks;
  LoadGuard guard;
  ScoreWeights weights;
  // Probability of ignoring affinity for one pick (load alone decides), to seed other replicas
  // with a prefix. GAIE's affinity filter bypasses with 0.01; 0 here because on the sim backend's
  // prefix-group studies (results/2026-11-24-exploration: 2-8 replicas, offline and online, even
  // and Zipf-skewed groups, 3 seeds) exploration cost delivered hits in every cell (0.01: -0.7 to
  // -3.5 points, -10 to -14% offline throughput at 2 and 4 replicas) while the load guard already
  // spread hot groups; it helped only online TTFT p50 with one hot group on 8 idle replicas (2.4
  // -> 2.1 ms).
  double exploration = 0;
  uint64_t seed = 0;
};

// How many leading blocks of a prompt one replica's own prefix index holds (the replica may live in
// another process: the cluster asks through its ReplicaHandle).
using CachedPrefixBlocks = std::function<int(std::span<const int32_t> prompt)>;

struct PreciseRouterOptions {
  std::string model_id;  // and cache_salt: the replicas' own, so keys are identical
  std::string cache_salt;
  int block_size = 16;
  std::vector<CachedPrefixBlocks> replicas;  // (num_replicas,) each replica's live index
  LoadGuard guard;
  ScoreWeights weights;
};

std::unique_ptr<RoutePolicy> make_round_robin_policy();
std::unique_ptr<RoutePolicy> make_least_loaded_policy();
std::unique_ptr<RoutePolicy> make_prefix_policy(const PrefixRouterOptions& options);
std::unique_ptr<RoutePolicy> make_precise_policy(const PreciseRouterOptions& options);

// "round_robin", "least_loaded", "prefix", "precise".
const std::vector<std::string>& route_policy_names();
// Throws rose::Error naming the choices when `name` is not a policy.
void check_route_policy_name(const std::string& name);

}  // namespace rose
