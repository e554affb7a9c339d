#pragma once
// The load half of routing shared by the prefix and precise policies: the seed's threshold guard,
// then GAIE's weighted scores (queue, KV utilisation, prefix match), maximum wins.
#include <span>
#include <vector>

#include "engine/cluster/route_policy.h"

namespace rose {

// Replicas under both bounds of `guard`: queued <= queue_threshold or queued + 1 <=
// queue_load_factor * (total queued + 1) / replicas, and KV use <= kv_threshold; every replica
// when none is (affinity must not stall).
std::vector<int> guarded_candidates(std::span<const ReplicaLoad> loads, const LoadGuard& guard);

// The candidate with the highest weights.queue * (maxQ - q) / maxQ (1 when no candidate has a
// queue) + weights.kv * (1 - kv utilisation) + weights.prefix * prefix_scores[r]; q counts queued
// requests (ReplicaLoad::queued), maxQ the longest queue among the candidates. GAIE divides by the
// spread (maxQ - minQ) instead, so one request's difference, 11 queued against 12, scores the full
// weight and outweighs half a prompt matched (2 > 3 x 0.5): in a burst, where every queue is long
// and close to the others, that split groups (64 sim replicas: 33.6% delivered of 46.9% available).
// Ties go to the first candidate at or after `tie_start` (mod replicas), so equal replicas are
// used in turn rather than the lowest index always.
// `prefix_scores`: (num_replicas,) in [0, 1].
int pick_best_scored(std::span<const int> candidates, std::span<const ReplicaLoad> loads,
                     std::span<const double> prefix_scores, const ScoreWeights& weights,
                     int tie_start);

}  // namespace rose
