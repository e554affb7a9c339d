// least_loaded: fewest requests in the replica (waiting + running + routed and not yet taken in),
// then the lowest KV use; ties rotate so equal replicas share the work (vLLM's internal DP
// balancer, KubeAI's LeastLoad).
#include "engine/cluster/route_policy.h"

namespace rose {
namespace {

class LeastLoadedPolicy final : public RoutePolicy {
 public:
  RouteChoice pick(const RouteQuery& /*query*/, std::span<const ReplicaLoad> loads) override {
    const int n = int(loads.size());
    int best = -1;
    for (int k = 0; k < n; ++k) {
      const int r = (start_ + k) % n;
      if (best < 0 || less_loaded(loads[size_t(r)], loads[size_t(best)])) best = r;
    }
    start_ = (best + 1) % n;
    return {best, 0};
  }

 private:
  static bool less_loaded(const ReplicaLoad& a, const ReplicaLoad& b) {
    const int requests_a = a.queued() + a.running;
    const int requests_b = b.queued() + b.running;
    if (requests_a != requests_b) return requests_a < requests_b;
    return a.kv_utilisation() < b.kv_utilisation();
  }
  int start_ = 0;
};

}  // namespace

std::unique_ptr<RoutePolicy> make_least_loaded_policy() {
  return std::make_unique<LeastLoadedPolicy>();
}

}  // namespace rose
