#pragma once
// A Backend over one model split across devices (shard_plan.h): one shard backend per rank, each
// driven by its own thread, all executing every step together; rank 0's sampled ids and logits
// are the step's (every rank samples the same gathered logits).
#include <functional>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/parallel/collective.h"

namespace rose {

// Makes one rank's backend from its shard of the weights (make_cpu_backend, make_cuda_backend).
using ShardBackendFactory =
    std::function<std::unique_ptr<Backend>(const WeightSource& shard, const BackendOptions&)>;

// `collectives` (degree,): rank r's; `devices` (degree,): rank r's options.device. Shards are
// built at the same time on their threads (a GPU backend's warm-up runs collectives). Throws
// rose::Error when the model cannot be split over `degree` (tensor_parallel_refusal).
std::unique_ptr<Backend> make_tensor_parallel_backend(
    const WeightSource& weights, const BackendOptions& options, const std::vector<int>& devices,
    std::vector<std::unique_ptr<Collective>> collectives, const ShardBackendFactory& make_shard);

// The CPU: `degree` ranks as threads (thread_collective.h), for tests and CI.
std::unique_ptr<Backend> make_cpu_tensor_parallel_backend(const WeightSource& weights,
                                                          const BackendOptions& options,
                                                          int degree);

// GPUs `devices`, rank r on devices[r], over NCCL (engine/backend/cuda/nccl_collective.h).
// Throws rose::Error when this roseinfer was built without CUDA or NCCL.
std::unique_ptr<Backend> make_cuda_tensor_parallel_backend(const WeightSource& weights,
                                                           const BackendOptions& options,
                                                           const std::vector<int>& devices);

}  // namespace rose
