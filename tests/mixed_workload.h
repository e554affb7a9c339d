#pragma once
// The engine tests' mixed workload, shared by test_engine and test_cluster: shared system prefixes
// of several lengths, duplicates, a one-token prompt, a prompt longer than the token budget,
// different output lengths and staggered arrivals, over a 1000-token fake vocabulary.
#include <cstdint>
#include <vector>

#include "engine/scheduler/engine_config.h"
#include "engine/scheduler/request.h"
#include "tests/fake_backend.h"

namespace rose::testing {

constexpr int kMixedVocab = 1000;

// The engine tests' budgets: 8 sequences, 64 tokens a step. `overlap` kOn: each step planned and
// submitted before the last one's ids are applied (a fake backend runs them in turn), which must
// change no output.
inline EngineConfig config_for(SchedulerMode mode, bool prefix_cache,
                               StepOverlap overlap = StepOverlap::kAuto) {
  EngineConfig c;
  c.mode = mode;
  c.prefix_cache = prefix_cache;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.overlap = overlap;
  return c;
}

inline std::vector<int32_t> make_tokens(int n, uint64_t seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t(mix(seed, uint64_t(i)) % kMixedVocab));
  return t;
}

inline std::vector<EngineRequest> mixed_requests() {
  const std::vector<int32_t> system = make_tokens(40, 1);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 24; ++i) {
    EngineRequest r;
    if (i % 3 == 0) r.prompt = system;
    if (i % 3 == 1) r.prompt.assign(system.begin(), system.begin() + 21);
    const std::vector<int32_t> tail = make_tokens(1 + (i * 7) % 30, 100 + uint64_t(i % 5));
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_tokens = 1 + (i * 5) % 12;
    r.ignore_eos = true;
    r.arrival_s = 0.01 * i;
    requests.push_back(r);
  }
  EngineRequest single;
  single.prompt = {7};
  single.max_tokens = 5;
  requests.push_back(single);
  EngineRequest longer;
  longer.prompt = make_tokens(150, 9);
  longer.max_tokens = 4;
  requests.push_back(longer);
  return requests;
}

}  // namespace rose::testing
