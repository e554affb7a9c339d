#pragma once
// What the router has placed on each replica and the replica's scheduler has not yet taken in. A
// request added to a replica joins its waiting queue only at the replica's next step, so requests
// routed in one instant (all of an offline run at t=0, online ones that arrive together, or ones
// added while a replica is inside a step) are missing from its waiting and running counts. A load
// guard or score that read those alone saw idle replicas through a whole burst and let affinity
// pile it onto a few (results/2026-11-23-cluster-cpu-2: imbalance 2.78 at 64 replicas). The
// cluster tells this tracker every placement and every finish; a replica's routed requests less
// those it has finished, is running or holds waiting are the ones it has not seen yet.
#include <span>
#include <vector>

#include "engine/cluster/route_policy.h"

namespace rose {

class RoutedLoad {
 public:
  explicit RoutedLoad(int num_replicas);
  void on_routed(int replica);
  void on_finished(int replica);
  // Sets loads[r].pending (one load per replica) from the waiting and running counts in it.
  void fill(std::span<ReplicaLoad> loads) const;

 private:
  std::vector<int> routed_, finished_;  // (num_replicas,)
};

}  // namespace rose
