// Route policies on hand-computed cases: round robin order, least-loaded ordering and tie rotation,
// the approximate index (hash chaining from the model id, longest match, LRU eviction by capacity,
// head-outlives-tail), the load guard and score weights, exploration, and the precise policy
// against real PrefixIndexes (cached and routed-but-unfinished prompts); the router's count of
// requests placed and not yet taken in, and the guard, scores and least_loaded counting them.
#include <doctest/doctest.h>
#include <xxhash.h>

#include <numeric>
#include <vector>

#include "engine/cluster/approx_prefix_index.h"
#include "engine/cluster/load_score.h"
#include "engine/cluster/route_policy.h"
#include "engine/cluster/routed_load.h"
#include "engine/common/error.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/prefix_index.h"

using namespace rose;

namespace {

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

RouteQuery query_of(int index, const std::vector<int32_t>& prompt) { return {index, prompt, 0.0}; }

ReplicaLoad load(int waiting, int running, int kv_used, int kv_total = 100, int pending = 0) {
  return {waiting, running, kv_used, kv_total, pending};
}

// Placed by the router and not yet taken in by the replica's scheduler.
ReplicaLoad pending(int n) { return load(0, 0, 0, 100, n); }

PrefixRouterOptions prefix_options(int replicas, int64_t capacity) {
  PrefixRouterOptions o;
  o.model_id = std::string("m");  // assigning a literal trips GCC 12's -Wrestrict false positive
  o.chunk_tokens = 4;
  o.capacity_chunks.assign(size_t(replicas), capacity);
  o.exploration = 0;
  return o;
}

}  // namespace

TEST_CASE("round_robin cycles through the replicas whatever their load") {
  auto policy = make_round_robin_policy();
  const std::vector<ReplicaLoad> loads{load(9, 9, 90), load(0, 0, 0), load(0, 0, 0)};
  const std::vector<int32_t> prompt{1, 2, 3};
  std::vector<int> picks;
  for (int i = 0; i < 5; ++i) picks.push_back(policy->pick(query_of(i, prompt), loads).replica);
  CHECK(picks == std::vector<int>{0, 1, 2, 0, 1});
}

TEST_CASE("least_loaded: fewest waiting + running, then lowest KV use, equal ones in turn") {
  auto policy = make_least_loaded_policy();
  const std::vector<int32_t> prompt{1};
  // totals 3, 1, 1: replicas 1 and 2 tie on requests; 2 uses less KV.
  CHECK(
      policy->pick(query_of(0, prompt), std::vector{load(2, 1, 0), load(0, 1, 50), load(1, 0, 10)})
          .replica == 2);
  // All equal: the rotation goes on after the last pick (2), so 0, then 1.
  const std::vector<ReplicaLoad> equal{load(0, 0, 0), load(0, 0, 0), load(0, 0, 0)};
  CHECK(policy->pick(query_of(1, prompt), equal).replica == 0);
  CHECK(policy->pick(query_of(2, prompt), equal).replica == 1);
}

TEST_CASE(
    "approximate index: chunk i is XXH64 of its tokens seeded by chunk i-1, root = model id") {
  ApproxPrefixIndex index("llama", 4, 256, {100});
  const std::vector<int32_t> prompt = iota_tokens(11, 7);  // two full chunks and 3 tokens left over
  const uint64_t root = XXH64("llama", 5, 0);
  const uint64_t h0 = XXH64(prompt.data(), 16, root);
  const uint64_t h1 = XXH64(prompt.data() + 4, 16, h0);
  CHECK(index.chunk_hashes(prompt) == std::vector<uint64_t>{h0, h1});
  // Another model never shares a hash; max_chunks truncates.
  ApproxPrefixIndex other("qwen", 4, 1, {100});
  const std::vector<uint64_t> other_hashes = other.chunk_hashes(prompt);
  REQUIRE(other_hashes.size() == 1);
  CHECK(other_hashes[0] != h0);
  CHECK(index.chunk_hashes(iota_tokens(3, 0)).empty());  // shorter than a chunk
}

TEST_CASE("approximate index: longest match per replica stops at its first missing chunk") {
  ApproxPrefixIndex index("m", 4, 256, {100, 100, 100});
  const std::vector<int32_t> a = iota_tokens(16, 0);  // chunks c0..c3
  const auto ha = index.chunk_hashes(a);
  index.record(std::span(ha).first(3), 0);  // c0 c1 c2
  index.record(std::span(ha).first(1), 1);  // c0
  // Replica 2 holds c1 alone, which counts for nothing without c0.
  index.record(std::span(ha).subspan(1, 1), 2);
  std::vector<int> matched;
  index.match(ha, matched);
  CHECK(matched == std::vector<int>{3, 1, 0});
  // A different first chunk matches nothing anywhere, though the later tokens agree.
  std::vector<int32_t> b = a;
  b[0] = 999;
  index.match(index.chunk_hashes(b), matched);
  CHECK(matched == std::vector<int>{0, 0, 0});
}

TEST_CASE("approximate index: LRU eviction by capacity keeps a prefix's head longest") {
  ApproxPrefixIndex index("m", 4, 256, {3});
  const auto p = index.chunk_hashes(iota_tokens(8, 0));    // h0 h1
  const auto q = index.chunk_hashes(iota_tokens(8, 100));  // g0 g1
  index.record(p, 0);                                      // LRU order, most recent first: h0 h1
  index.record(q, 0);  // g0 g1 h0 h1 -> over capacity 3: h1 goes
  CHECK(index.size(0) == 3);
  CHECK(index.holds(0, p[0]));
  CHECK_FALSE(index.holds(0, p[1]));
  std::vector<int> matched;
  index.match(p, matched);
  CHECK(matched == std::vector<int>{1});
  // Using p again makes it recent: g0 g1 are now the oldest and g1 goes, then g0.
  index.record(p, 0);  // h0 h1 g0 (g1 evicted)
  CHECK_FALSE(index.holds(0, q[1]));
  CHECK(index.holds(0, q[0]));
  index.match(q, matched);
  CHECK(matched == std::vector<int>{1});
}

TEST_CASE("load guard: only replicas under the queue and KV thresholds, or all when none is") {
  const LoadGuard guard;  // 5 waiting, 0.8 KV
  CHECK(guarded_candidates(std::vector{load(6, 0, 0), load(5, 0, 80), load(0, 0, 81)}, guard) ==
        std::vector<int>{1});
  CHECK(guarded_candidates(std::vector{load(6, 0, 0), load(0, 0, 90)}, guard) ==
        std::vector<int>{0, 1});
}

TEST_CASE("load guard: past the threshold, a queue passes while within 1.25x the mean queue") {
  // Queued 10, 12 and 20, all past 5. With this request 43 queued, a mean of 14.33: the bound is
  // 1.25 x 14.33 = 17.9, and a replica passes if it would hold no more: 11 and 13 do, 21 not.
  const std::vector<ReplicaLoad> burst{pending(10), pending(12), pending(20)};
  CHECK(guarded_candidates(burst, LoadGuard{}) == std::vector<int>{0, 1});
  // Load factor 0: the threshold alone, which none is under, so every replica.
  LoadGuard threshold_only;
  threshold_only.queue_load_factor = 0;
  CHECK(guarded_candidates(burst, threshold_only) == std::vector<int>{0, 1, 2});
  // Waiting and pending count alike; the KV threshold still applies.
  CHECK(guarded_candidates(std::vector{load(10, 0, 0), load(0, 0, 90, 100, 12), pending(20)},
                           LoadGuard{}) == std::vector<int>{0});
}

TEST_CASE("scores: queue x2 + (1 - KV) x2 + prefix x3 by default, weights configurable") {
  // Queue score (maxQ - q) / maxQ: 1 for the empty replica, 0 for the one with 4.
  const std::vector<ReplicaLoad> loads{load(0, 0, 50), load(4, 0, 50)};
  const std::vector<double> prefix{0.0, 1.0};
  const std::vector<int> both{0, 1};
  // r0: 2*1 + 2*0.5 + 0 = 3; r1: 2*0 + 2*0.5 + 3*1 = 4.
  CHECK(pick_best_scored(both, loads, prefix, ScoreWeights{}, 0) == 1);
  // prefix weight 0.5: r1 = 1 + 0.5 = 1.5 < 3.
  CHECK(pick_best_scored(both, loads, prefix, ScoreWeights{2, 2, 0.5}, 0) == 0);
  // Equal scores: the first at or after tie_start.
  const std::vector<double> none{0.0, 0.0};
  const std::vector<ReplicaLoad> same{load(1, 0, 0), load(1, 0, 0)};
  CHECK(pick_best_scored(both, same, none, ScoreWeights{}, 1) == 1);
  CHECK(pick_best_scored(both, same, none, ScoreWeights{}, 0) == 0);
}

TEST_CASE("prefix policy: follows the longest match, predicts its tokens, yields to the guard") {
  auto policy = make_prefix_policy(prefix_options(2, 1000));
  const std::vector<int32_t> shared = iota_tokens(12, 0);
  const std::vector<int32_t> first = concat(shared, {500, 501});
  const std::vector<ReplicaLoad> idle{load(0, 0, 0), load(0, 0, 0)};
  // Nothing recorded: no prediction; place the first on replica 1 by hand.
  CHECK(policy->pick(query_of(0, first), idle).predicted_hit_tokens == 0);
  policy->on_routed(query_of(0, first), 1);
  const std::vector<int32_t> second = concat(shared, {600, 601, 602, 603});
  RouteChoice choice = policy->pick(query_of(1, second), idle);
  CHECK(choice.replica == 1);
  CHECK(choice.predicted_hit_tokens == 12);  // 3 of its 4 chunks
  // Replica 1 over the queue threshold: the guard sends the request to replica 0.
  choice = policy->pick(query_of(2, second), std::vector{load(0, 0, 0), load(6, 0, 0)});
  CHECK(choice.replica == 0);
  CHECK(choice.predicted_hit_tokens == 0);
  // A prompt made only of recorded chunks still leaves its last token to compute.
  policy->on_routed(query_of(3, shared), 1);
  CHECK(policy->pick(query_of(4, shared), idle).predicted_hit_tokens == 11);
}

TEST_CASE("prefix policy in a burst: affinity holds up to 1.25x the mean queue, not past it") {
  auto policy = make_prefix_policy(prefix_options(3, 1000));
  const std::vector<int32_t> shared = iota_tokens(12, 0);
  policy->on_routed(query_of(0, concat(shared, {500})), 2);
  const std::vector<int32_t> prompt = concat(shared, {600, 601, 602, 603});  // 3 of 4 chunks held
  // Queued 10, 10, 13: bound 1.25 x 34 / 3 = 14.2 >= 14, so replica 2 stays a candidate, and its
  // match outweighs the longest queue: 0 + 2 + 3 x 0.75 = 4.25 against 2 x 3/13 + 2 = 2.46.
  RouteChoice choice =
      policy->pick(query_of(1, prompt), std::vector{pending(10), pending(10), pending(13)});
  CHECK(choice.replica == 2);
  CHECK(choice.predicted_hit_tokens == 12);
  // Queued 10, 10, 14: bound 1.25 x 35 / 3 = 14.6 < 15: replica 2 is left out.
  choice = policy->pick(query_of(2, prompt), std::vector{pending(10), pending(10), pending(14)});
  CHECK(choice.replica != 2);
  CHECK(choice.predicted_hit_tokens == 0);
}

TEST_CASE("prefix policy: exploration 1 ignores affinity, replicas are used in turn") {
  PrefixRouterOptions o = prefix_options(2, 1000);
  o.exploration = 1.0;
  auto policy = make_prefix_policy(o);
  const std::vector<int32_t> prompt = iota_tokens(16, 0);
  const std::vector<ReplicaLoad> idle{load(0, 0, 0), load(0, 0, 0)};
  policy->on_routed(query_of(0, prompt), 1);
  CHECK(policy->pick(query_of(1, prompt), idle).replica == 0);
  CHECK(policy->pick(query_of(2, prompt), idle).replica == 1);
  o.exploration = 1.5;
  CHECK_THROWS_AS(make_prefix_policy(o), Error);
}

TEST_CASE("precise policy: the replicas' own indexes, plus prompts routed and not finished") {
  constexpr int kBlock = 4;
  BlockPool pool0(16, kBlock), pool1(16, kBlock);
  PrefixIndex index0(pool0, "m", ""), index1(pool1, "m", "");
  const std::vector<int32_t> cached = iota_tokens(12, 0);
  // Replica 1 holds cached's first two blocks.
  std::vector<BlockKey> keys;
  index1.extend_keys(cached, 2, keys);
  for (int b = 0; b < 2; ++b) {
    index1.insert(keys[size_t(b)], pool1.allocate(),
                  std::span<const int32_t>(cached).subspan(size_t(b) * kBlock, kBlock));
  }
  PreciseRouterOptions o;
  o.model_id = "m";
  o.block_size = kBlock;
  o.replicas = {[&](std::span<const int32_t> p) { return index0.cached_prefix_blocks(p); },
                [&](std::span<const int32_t> p) { return index1.cached_prefix_blocks(p); }};
  auto policy = make_precise_policy(o);
  const std::vector<ReplicaLoad> idle{load(0, 0, 0), load(0, 0, 0)};
  const std::vector<int32_t> prompt = concat(cached, {77, 78});
  RouteChoice choice = policy->pick(query_of(0, prompt), idle);
  CHECK(choice.replica == 1);
  CHECK(choice.predicted_hit_tokens == 8);
  CHECK(index1.cached_prefix_blocks(prompt) == 2);
  // Another prompt routed to replica 0 and still running: its blocks count there.
  const std::vector<int32_t> other = iota_tokens(13, 200);
  policy->on_routed(query_of(1, other), 0);
  choice = policy->pick(query_of(2, concat(iota_tokens(12, 200), {5, 6})), idle);
  CHECK(choice.replica == 0);
  CHECK(choice.predicted_hit_tokens == 12);
  policy->on_finished(1, 0);
  CHECK(policy->pick(query_of(3, other), idle).predicted_hit_tokens == 0);
}

TEST_CASE("routed load: requests placed and not yet waiting, running or finished are pending") {
  RoutedLoad routed(3);
  for (int r : {0, 0, 0, 1}) routed.on_routed(r);
  // Nothing stepped yet (an offline run's t=0): every placement is pending.
  std::vector<ReplicaLoad> loads{load(0, 0, 0), load(0, 0, 0), load(0, 0, 0)};
  routed.fill(loads);
  CHECK(loads[0].pending == 3);
  CHECK(loads[1].pending == 1);
  CHECK(loads[2].pending == 0);
  CHECK(loads[0].queued() == 3);
  // Replica 0 stepped: it runs one, one waits; one finished; replica 1 took its one in.
  routed.on_finished(0);
  routed.on_routed(0);  // placed after that step: not seen yet
  loads = {load(1, 1, 10), load(1, 0, 0), load(0, 0, 0)};
  routed.fill(loads);
  CHECK(loads[0].pending == 1);  // 4 routed - 1 finished - 1 waiting - 1 running
  CHECK(loads[0].queued() == 2);
  CHECK(loads[1].pending == 0);
  CHECK(loads[1].queued() == 1);
}

TEST_CASE("pending requests count as queued for the guard, the queue score and least_loaded") {
  // Replica 0 has 6 placed and none taken in: over the guard's 5 (and over 1.25 x the mean queue,
  // 1.25 x 7 / 2 = 4.4 < 6 + 1), though its waiting count is 0.
  const LoadGuard guard;
  CHECK(guarded_candidates(std::vector{pending(6), pending(0)}, guard) == std::vector<int>{1});
  // Queue score over queued (pending 4 vs 0): r0 = 0 + 2 + 3 * 0.5 = 3.5 < r1 = 2 + 2 = 4.
  const std::vector<double> half{0.5, 0.0};
  const std::vector<int> both{0, 1};
  CHECK(pick_best_scored(both, std::vector{pending(4), pending(0)}, half, ScoreWeights{}, 0) == 1);
  // The queue score is relative to the longest queue, not to the spread: 12 queued against 10
  // costs r0 2 x 2/12 = 0.33 of r1's queue score, less than a half-prompt match gains (3 x 0.5):
  // r0 = 0 + 2 + 1.5 = 3.5, r1 = 2 x 2/12 + 2 = 2.33. Over the spread, r1's 2 would win (4).
  CHECK(pick_best_scored(both, std::vector{pending(12), pending(10)}, half, ScoreWeights{}, 0) ==
        0);
  // least_loaded: replica 0 placed 2, replica 1 runs 1: 1 is the less loaded.
  auto policy = make_least_loaded_policy();
  const std::vector<int32_t> prompt{1};
  CHECK(policy->pick(query_of(0, prompt), std::vector{pending(2), load(0, 1, 0)}).replica == 1);
}

TEST_CASE("policy names: the four, and an unknown one is an error naming them") {
  CHECK(route_policy_names().size() == 4);
  for (const std::string& name : route_policy_names()) CHECK_NOTHROW(check_route_policy_name(name));
  CHECK_THROWS_WITH_AS(check_route_policy_name("random"),
                       doctest::Contains("expected round_robin, least_loaded, prefix or precise"),
                       Error);
}
