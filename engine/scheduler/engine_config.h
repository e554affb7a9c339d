#pragma once
// The scheduler's budgets and policy for one engine (DESIGN.md, reference/scheduling.md).
#include <string>

namespace rose {

enum class SchedulerMode { kNaive, kOffline, kOnline };
const char* mode_name(SchedulerMode mode);

// Overlapped steps (Engine::step): step N+1 is scheduled and submitted before step N's ids reach
// the host, its decode tokens taken from what N sampled by the backend itself. kAuto: when the
// backend runs submitted steps asynchronously (Backend::overlaps_steps: CUDA). kOn: also with one
// that does not (the same scheduling, run in turn: tests). kOff: one step at a time.
enum class StepOverlap { kAuto, kOff, kOn };

struct EngineConfig {
  SchedulerMode mode = SchedulerMode::kOffline;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int max_concurrency = 0;  // online: requests in flight at most (0: no cap)
  bool prefix_cache = true;
  std::string cache_salt;  // extra key for block 0 (isolates caches)
  // False for streamed runs of any length: a finished request is dropped right after its
  // on_finish callback and its slot reused, and no per-step series is kept, so memory follows the
  // requests in flight, not all ever added; finish() then returns no per-request results.
  bool keep_results = true;
  StepOverlap overlap = StepOverlap::kAuto;
};

}  // namespace rose
