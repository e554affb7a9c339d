// prefix: the seed's approximate router-side index (approx_prefix_index.h) scored with load
// (load_score.h): the replica with the longest recorded prefix wins unless load outweighs it.
#include <random>

#include "engine/cluster/approx_prefix_index.h"
#include "engine/cluster/load_score.h"
#include "engine/cluster/route_policy.h"
#include "engine/common/error.h"

namespace rose {
namespace {

class PrefixPolicy final : public RoutePolicy {
 public:
  explicit PrefixPolicy(const PrefixRouterOptions& options)
      : options_(options),
        index_(options.model_id, options.chunk_tokens, options.max_chunks, options.capacity_chunks),
        rng_(options.seed ^ 0x726f75746572ull) {
    if (!(options.exploration >= 0 && options.exploration <= 1))
      fail("router exploration must be in [0, 1], got {}", options.exploration);
  }

  RouteChoice pick(const RouteQuery& query, std::span<const ReplicaLoad> loads) override {
    ROSE_ASSERT(int(loads.size()) == index_.num_replicas());
    remember(query);
    index_.match(hashes_, matched_);
    std::vector<double> scores(loads.size(), 0.0);
    const bool explore = options_.exploration > 0 && uniform01() < options_.exploration;
    if (!hashes_.empty() && !explore) {
      for (size_t r = 0; r < loads.size(); ++r) scores[r] = double(matched_[r]) / hashes_.size();
    }
    const std::vector<int> candidates = guarded_candidates(loads, options_.guard);
    const int replica = pick_best_scored(candidates, loads, scores, options_.weights, tie_start_);
    tie_start_ = (replica + 1) % int(loads.size());
    // The replica computes at least the prompt's last token, so it never hits the whole prompt.
    const int cap = query.prompt.empty() ? 0 : int(query.prompt.size()) - 1;
    return {replica, std::min(matched_[size_t(replica)] * index_.chunk_tokens(), cap)};
  }

  void on_routed(const RouteQuery& query, int replica) override {
    remember(query);
    index_.record(hashes_, replica);
  }

 private:
  // 53 random bits, the same on every standard library (its distributions differ).
  double uniform01() { return double(rng_() >> 11) * 0x1.0p-53; }

  // pick and on_routed of one request hash its prompt once.
  void remember(const RouteQuery& query) {
    if (hashed_request_ == query.request_index && hashed_size_ == query.prompt.size()) return;
    hashes_ = index_.chunk_hashes(query.prompt);
    hashed_request_ = query.request_index;
    hashed_size_ = query.prompt.size();
  }

  PrefixRouterOptions options_;
  ApproxPrefixIndex index_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> hashes_;  // (chunks,) of the request last seen
  int hashed_request_ = -1;
  size_t hashed_size_ = 0;
  std::vector<int> matched_;  // (num_replicas,)
  int tie_start_ = 0;
};

}  // namespace

std::unique_ptr<RoutePolicy> make_prefix_policy(const PrefixRouterOptions& options) {
  return std::make_unique<PrefixPolicy>(options);
}

}  // namespace rose
