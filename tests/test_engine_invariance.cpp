// Batch invariance on the CPU backend (preset "tiny", synthetic weights): the shared-prefix,
// skewed-length, greedy+seeded workload of tests/invariance_workload.h gives the same tokens in
// every scheduler mode with the prefix cache on or off, through chunked prefill and preemption.
// The CPU kernels reduce each row on its own in a fixed order, so this holds by construction; the
// test keeps it so (the GPU test holds the CUDA backend's --batch-invariant mode to the same).
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/weights.h"
#include "engine/scheduler/engine.h"
#include "tests/invariance_workload.h"

using namespace rose;
using namespace rose::testing;

namespace {

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;
  int64_t preemptions = 0;
};

// A 20-block pool (320 tokens) against ~1,100 prompt tokens: requests are preempted and
// recomputed; a 64-token budget chunks every prompt longer than that.
Outcome run_cpu(const WeightSource& weights, const InvarianceSetting& s) {
  BackendOptions options;
  options.block_size = 16;
  options.num_kv_blocks = 20;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 64;
  options.batch_invariant = true;
  std::unique_ptr<Backend> backend = make_cpu_backend(weights, options);
  EngineConfig config;
  config.mode = s.mode;
  config.prefix_cache = s.prefix_cache;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 64;
  Engine engine(*backend, config, "tiny");
  const RunResult result =
      engine.run(invariance_requests(weights.config().vocab_size, 20, 90, 250));
  Outcome out;
  out.preemptions = result.kv.preemptions;
  for (const RequestResult& r : result.requests) out.tokens.push_back(r.output_ids);
  return out;
}

}  // namespace

TEST_CASE("cpu backend: identical tokens in every mode x prefix cache, with preemption") {
  const std::unique_ptr<WeightSource> weights = open_model("tiny");
  const Outcome reference = run_cpu(*weights, {SchedulerMode::kOffline, true, false});
  REQUIRE(reference.tokens.size() == 14);
  for (const auto& t : reference.tokens) REQUIRE(!t.empty());
  CHECK(reference.preemptions > 0);
  for (const InvarianceSetting& s : invariance_settings(false)) {
    CAPTURE(s.name());
    const Outcome got = run_cpu(*weights, s);
    const TokenDiff d = diff_tokens(got.tokens, reference.tokens);
    CHECK(d.requests == 14);
    CHECK(d.differing == 0);
  }
}
