// round_robin: replica i % N for the i-th routed request, blind to load and cache (the baseline).
#include "engine/cluster/route_policy.h"

namespace rose {
namespace {

class RoundRobinPolicy final : public RoutePolicy {
 public:
  RouteChoice pick(const RouteQuery& /*query*/, std::span<const ReplicaLoad> loads) override {
    const int replica = int(next_ % uint64_t(loads.size()));
    ++next_;
    return {replica, 0};
  }

 private:
  uint64_t next_ = 0;
};

}  // namespace

std::unique_ptr<RoutePolicy> make_round_robin_policy() {
  return std::make_unique<RoundRobinPolicy>();
}

}  // namespace rose
