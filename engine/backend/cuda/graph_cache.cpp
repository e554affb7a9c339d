// The CUDA backend's decode-step graphs: bucket choice, capture and replay (graph_cache.h).
#include "engine/backend/cuda/graph_cache.h"

#include <algorithm>

#include "kernels/cuda/check.cuh"

namespace rose {

int GraphCache::bucket(int num_seqs) const {
  int bucket = num_seqs <= 1 ? 1 : num_seqs <= 2 ? 2 : num_seqs <= 4 ? 4 : num_seqs <= 8 ? 8 : 0;
  if (bucket == 0) bucket = (num_seqs + 7) / 8 * 8;
  return std::min(bucket, max_seqs_);
}

std::vector<int> GraphCache::buckets() const {
  std::vector<int> buckets;
  for (int s = 1; s <= max_seqs_; ++s) {
    const int b = bucket(s);
    if (buckets.empty() || buckets.back() != b) buckets.push_back(b);
  }
  return buckets;
}

GraphCache::Run GraphCache::run(int bucket, cudaStream_t stream,
                                const std::function<void()>& forward, int variant) {
  auto it = graphs_.find({bucket, variant});
  if (it != graphs_.end()) {
    ROSE_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
    return Run::kReplayed;
  }
  forward();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ROSE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    forward();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  ROSE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  ROSE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  ROSE_CUDA_CHECK(cudaGraphDestroy(graph));
  // Uploads it now (warm-up), not at its first replay: that one paid ~0.16 ms more on the host
  // (results/2026-11-24-small-steps/step_times).
  ROSE_CUDA_CHECK(cudaGraphUpload(exec, stream));
  graphs_[{bucket, variant}] = exec;
  return Run::kCaptured;
}

void GraphCache::forget(int bucket) {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (it->first.first != bucket) {
      ++it;
      continue;
    }
    ROSE_CUDA_CHECK(cudaGraphExecDestroy(it->second));
    it = graphs_.erase(it);
  }
}

void GraphCache::clear() noexcept {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

}  // namespace rose
