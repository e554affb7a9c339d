#include "engine/cluster/routed_load.h"

#include "engine/common/error.h"

namespace rose {

RoutedLoad::RoutedLoad(int num_replicas)
    : routed_(size_t(num_replicas), 0), finished_(size_t(num_replicas), 0) {}

void RoutedLoad::on_routed(int replica) { ++routed_.at(size_t(replica)); }

void RoutedLoad::on_finished(int replica) { ++finished_.at(size_t(replica)); }

void RoutedLoad::fill(std::span<ReplicaLoad> loads) const {
  ROSE_ASSERT(loads.size() == routed_.size());
  for (size_t r = 0; r < loads.size(); ++r) {
    ReplicaLoad& load = loads[r];
    load.pending = routed_[r] - finished_[r] - load.waiting - load.running;
    ROSE_ASSERT(load.pending >= 0);
  }
}

}  // namespace rose
