// precise: asks each replica's own PrefixIndex what it holds (the oracle an approximate index can
// at best reach), plus the prompts routed to it and not yet finished, whose blocks it is about to
// hold: with every request arriving at t=0 no replica has cached anything when the router places
// them. Keys come from the replicas' chain (engine/kv/block_key.h), so they match exactly. Scored
// with load like prefix.
#include <unordered_map>

#include "engine/cluster/load_score.h"
#include "engine/cluster/route_policy.h"
#include "engine/common/error.h"
#include "engine/kv/block_key.h"

namespace rose {
namespace {

struct BlockKeyHash {
  size_t operator()(const BlockKey& key) const {
    return size_t(key.lo ^ (key.hi * 0x9E3779B97F4A7C15ull));
  }
};

class PrecisePolicy final : public RoutePolicy {
 public:
  explicit PrecisePolicy(const PreciseRouterOptions& options)
      : options_(options),
        chain_(options.model_id, options.cache_salt),
        pending_(options.replicas.size()) {
    ROSE_ASSERT(!options.replicas.empty() && options.block_size >= 1);
  }

  RouteChoice pick(const RouteQuery& query, std::span<const ReplicaLoad> loads) override {
    ROSE_ASSERT(loads.size() == options_.replicas.size());
    const int max_blocks = hittable_blocks(query.prompt);
    std::vector<BlockKey> keys;
    chain_.extend(query.prompt, options_.block_size, max_blocks, keys, scratch_);
    std::vector<int> matched(loads.size(), 0);
    std::vector<double> scores(loads.size(), 0.0);
    for (size_t r = 0; r < loads.size(); ++r) {
      const int cached = options_.replicas[r](query.prompt);
      matched[r] = std::max(cached, pending_match(int(r), keys));
      if (max_blocks > 0) scores[r] = double(matched[r]) / max_blocks;
    }
    const std::vector<int> candidates = guarded_candidates(loads, options_.guard);
    const int replica = pick_best_scored(candidates, loads, scores, options_.weights, tie_start_);
    tie_start_ = (replica + 1) % int(loads.size());
    return {replica, matched[size_t(replica)] * options_.block_size};
  }

  void on_routed(const RouteQuery& query, int replica) override {
    std::vector<BlockKey> keys;
    chain_.extend(query.prompt, options_.block_size, hittable_blocks(query.prompt), keys, scratch_);
    for (const BlockKey& key : keys) ++pending_[size_t(replica)][key];
    in_flight_[query.request_index] = {replica, std::move(keys)};
  }

  void on_finished(int request_index, int /*replica*/) override {
    const auto it = in_flight_.find(request_index);
    if (it == in_flight_.end()) return;
    auto& counts = pending_[size_t(it->second.replica)];
    for (const BlockKey& key : it->second.keys) {
      if (--counts[key] == 0) counts.erase(key);
    }
    in_flight_.erase(it);
  }

 private:
  // As PrefixIndex::match_prefix: whole blocks, the last prompt token always computed.
  int hittable_blocks(std::span<const int32_t> prompt) const {
    return prompt.empty() ? 0 : int((prompt.size() - 1) / size_t(options_.block_size));
  }

  int pending_match(int replica, const std::vector<BlockKey>& keys) const {
    const auto& counts = pending_[size_t(replica)];
    int matched = 0;
    while (matched < int(keys.size()) && counts.contains(keys[size_t(matched)])) ++matched;
    return matched;
  }

  struct InFlight {
    int replica = 0;
    std::vector<BlockKey> keys;
  };
  PreciseRouterOptions options_;
  BlockKeyChain chain_;
  std::vector<uint8_t> scratch_;
  // (num_replicas,) keys of prompts routed and not finished -> how many such prompts have them.
  std::vector<std::unordered_map<BlockKey, int, BlockKeyHash>> pending_;
  std::unordered_map<int, InFlight> in_flight_;  // request index -> its replica and keys
  int tie_start_ = 0;
};

}  // namespace

std::unique_ptr<RoutePolicy> make_precise_policy(const PreciseRouterOptions& options) {
  return std::make_unique<PrecisePolicy>(options);
}

}  // namespace rose
