#pragma once
// Tensor-parallel ranks as threads of one process on the CPU (collective.h): for tests and CI,
// which have no GPUs. fp32 only. Sums run in rank order, so results do not depend on timing.
#include <memory>
#include <vector>

#include "engine/parallel/collective.h"

namespace rose {

// One Collective per rank; rank r's must be used from one thread at a time.
std::vector<std::unique_ptr<Collective>> make_thread_collectives(int size);

}  // namespace rose
