#pragma once
// Runner: what bench and run drive. One Engine is a Runner; a cluster of engines behind a router
// will be another, so the commands never need to know which they hold.
#include <vector>

#include "engine/scheduler/clock.h"
#include "engine/scheduler/request.h"

namespace rose {

class Runner {
 public:
  virtual ~Runner() = default;
  // Runs every request to completion; results in input order. `clock` null: the steady clock.
  virtual RunResult run(const std::vector<EngineRequest>& requests,
                        const RunCallbacks& callbacks = {}, Clock* clock = nullptr) = 0;
  // Drops every cached block key: the next run starts cold.
  virtual void reset_prefix_cache() = 0;
};

}  // namespace rose
