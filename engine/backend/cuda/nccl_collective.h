#pragma once
// Tensor-parallel collectives between the GPUs of one process over NCCL (engine/parallel/
// collective.h): one communicator per GPU, made together by ncclCommInitAll; each rank's
// operations are enqueued on its backend's stream, so CUDA graphs capture them. All-reduces up to
// peer_all_reduce_max_bytes() go through peer memory instead (peer_all_reduce.h) when the GPUs
// reach each other's memory.
// Built only when NCCL is found (CMake: ROSEINFER_HAVE_NCCL).
#include <memory>
#include <vector>

#include "engine/parallel/collective.h"

namespace rose {

// One Collective per GPU in `devices`, rank r on devices[r].
std::vector<std::unique_ptr<Collective>> make_nccl_collectives(const std::vector<int>& devices);

}  // namespace rose
