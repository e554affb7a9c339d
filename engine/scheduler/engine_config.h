#pragma once
// The scheduler's budgets and policy for one engine (DESIGN.md, reference/scheduling.md).
#include <string>

namespace rose {

enum class SchedulerMode { kNaive, kOffline, kOnline };
const char* mode_name(SchedulerMode mode);

struct EngineConfig {
  SchedulerMode mode = SchedulerMode::kOffline;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int max_concurrency = 0;  // online: requests in flight at most (0: no cap)
  bool prefix_cache = true;
  std::string cache_salt;  // extra key for block 0 (isolates caches)
};

}  // namespace rose
