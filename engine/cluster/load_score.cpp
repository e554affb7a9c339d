#include "engine/cluster/load_score.h"

#include <algorithm>
#include <cstdint>

#include "engine/common/error.h"

namespace rose {

std::vector<int> guarded_candidates(std::span<const ReplicaLoad> loads, const LoadGuard& guard) {
  int64_t total = 1;  // the request being placed
  for (const ReplicaLoad& load : loads) total += load.queued();
  const double bound = guard.queue_load_factor * double(total) / double(loads.size());
  std::vector<int> candidates;
  for (int r = 0; r < int(loads.size()); ++r) {
    const ReplicaLoad& load = loads[size_t(r)];
    const bool queue_ok = load.queued() <= guard.queue_threshold || load.queued() + 1 <= bound;
    if (queue_ok && load.kv_utilisation() <= guard.kv_threshold) candidates.push_back(r);
  }
  if (candidates.empty()) {
    for (int r = 0; r < int(loads.size()); ++r) candidates.push_back(r);
  }
  return candidates;
}

int pick_best_scored(std::span<const int> candidates, std::span<const ReplicaLoad> loads,
                     std::span<const double> prefix_scores, const ScoreWeights& weights,
                     int tie_start) {
  ROSE_ASSERT(!candidates.empty() && prefix_scores.size() == loads.size());
  int max_queue = 0;
  for (int r : candidates) max_queue = std::max(max_queue, loads[size_t(r)].queued());
  const int n = int(loads.size());
  int best = -1;
  double best_score = 0;
  int best_order = 0;  // distance from tie_start, smaller wins a tie
  for (int r : candidates) {
    const ReplicaLoad& load = loads[size_t(r)];
    const double queue_score = max_queue == 0 ? 1.0 : double(max_queue - load.queued()) / max_queue;
    const double score = weights.queue * queue_score + weights.kv * (1.0 - load.kv_utilisation()) +
                         weights.prefix * prefix_scores[size_t(r)];
    const int order = ((r - tie_start) % n + n) % n;
    if (best < 0 || score > best_score || (score == best_score && order < best_order)) {
      best = r;
      best_score = score;
      best_order = order;
    }
  }
  return best;
}

}  // namespace rose
