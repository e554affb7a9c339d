#pragma once
// The batch-invariance workload shared by the CPU test (tests/test_engine_invariance.cpp) and the
// GPU test (tests/gpu/test_cuda_batch_invariance.cpp): shared prefixes of two lengths, skewed
// prompt lengths (one near `long_prompt`), a one-token prompt, greedy and seeded-sampling requests,
// run under every scheduler mode x prefix cache x CUDA graphs; then a count of the tokens that
// differ from a reference run. Scaled by the caller to the model (tiny on the CPU, llama-1b
// shapes on the GPU).
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "engine/scheduler/engine_config.h"
#include "engine/scheduler/request.h"

namespace rose::testing {

inline std::vector<int32_t> invariance_tokens(int n, int32_t seed, int vocab) {
  std::vector<int32_t> t;
  uint64_t x = uint64_t(seed) * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < n; ++i) {
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    t.push_back(int32_t(x % uint64_t(vocab)));
  }
  return t;
}

// `short_prefix` < `long_prefix` < `long_prompt` tokens. Odd requests sample (temperature 0.8,
// top-k 40 or top-p 0.9, a seed each), even ones are greedy.
inline std::vector<EngineRequest> invariance_requests(int vocab, int short_prefix, int long_prefix,
                                                      int long_prompt) {
  const std::vector<int32_t> a = invariance_tokens(short_prefix, 1, vocab);
  const std::vector<int32_t> b = invariance_tokens(long_prefix, 2, vocab);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 12; ++i) {
    EngineRequest r;
    if (i % 3 == 0) r.prompt = a;
    if (i % 3 == 1) r.prompt = b;
    const std::vector<int32_t> tail = invariance_tokens(1 + (i * 13) % 29, 100 + i % 5, vocab);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_tokens = 4 + (i * 7) % 17;
    r.ignore_eos = true;
    if (i % 2 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_k = i % 4 == 1 ? 40 : 0;
      r.sampling.top_p = i % 4 == 3 ? 0.9f : 1.0f;
      r.sampling.seed = 1000 + uint64_t(i);
    }
    r.arrival_s = 0.001 * i;
    requests.push_back(r);
  }
  EngineRequest one;
  one.prompt = {7};
  one.max_tokens = 9;
  one.ignore_eos = true;
  requests.push_back(one);
  EngineRequest longest;
  longest.prompt = invariance_tokens(long_prompt, 9, vocab);
  longest.max_tokens = 12;
  longest.ignore_eos = true;
  longest.sampling.temperature = 0.7f;
  longest.sampling.seed = 77;
  requests.push_back(longest);
  return requests;
}

struct InvarianceSetting {
  SchedulerMode mode;
  bool prefix_cache;
  bool cuda_graphs;
  std::string name() const {
    const char* m = mode == SchedulerMode::kNaive    ? "naive"
                    : mode == SchedulerMode::kOnline ? "online"
                                                     : "offline";
    return std::string(m) + (prefix_cache ? "/cache-on" : "/cache-off") +
           (cuda_graphs ? "/graphs-on" : "/graphs-off");
  }
};

// Every mode x cache setting; with `graphs` both graph settings, else graphs off only.
inline std::vector<InvarianceSetting> invariance_settings(bool graphs) {
  std::vector<InvarianceSetting> out;
  for (SchedulerMode mode :
       {SchedulerMode::kOffline, SchedulerMode::kOnline, SchedulerMode::kNaive})
    for (bool cache : {true, false})
      for (bool g : graphs ? std::vector<bool>{true, false} : std::vector<bool>{false})
        out.push_back({mode, cache, g});
  return out;
}

struct TokenDiff {
  int requests = 0;
  int64_t generated = 0;  // tokens of the compared run
  int64_t differing = 0;  // positions that differ, plus any length difference
};

inline TokenDiff diff_tokens(const std::vector<std::vector<int32_t>>& got,
                             const std::vector<std::vector<int32_t>>& want) {
  TokenDiff d;
  d.requests = int(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    d.generated += int64_t(got[i].size());
    const size_t common = i < want.size() ? std::min(got[i].size(), want[i].size()) : 0;
    for (size_t j = 0; j < common; ++j) d.differing += got[i][j] != want[i][j];
    const size_t other = i < want.size() ? want[i].size() : 0;
    d.differing += int64_t(std::max(got[i].size(), other) - common);
  }
  return d;
}

// "| comparison | requests | generated tokens | differing tokens |" rows, markdown.
inline std::string diff_table_header() {
  return "| comparison | requests | generated tokens | differing tokens |\n|---|---|---|---|\n";
}
inline std::string diff_table_row(const std::string& comparison, const TokenDiff& d) {
  std::ostringstream s;
  s << "| " << comparison << " | " << d.requests << " | " << d.generated << " | " << d.differing
    << " |\n";
  return s.str();
}

}  // namespace rose::testing
