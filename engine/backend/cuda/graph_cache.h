#pragma once
// CUDA graphs of pure-decode steps, one per padded batch size (bucket): a decode step launches
// 7-9 kernels per layer, and replaying them as one graph removes their host launch cost. A graph
// bakes in its kernels' arguments, so the forward pass it captures must read everything that
// changes per step through device memory at addresses fixed per bucket (the metadata buffer's
// layout depends only on the batch size, workspace_plan.h:MetaLayout).
#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace rose {

class GraphCache {
 public:
  explicit GraphCache(int max_seqs) : max_seqs_(max_seqs) {}
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() { clear(); }

  // The padded batch size a step of num_seqs decode rows runs at. Exact sizes up to 8 (small
  // batches are where a padding row costs most), then multiples of 8, so at most
  // 4 + max_seqs / 8 graphs are captured; never above max_seqs (the workspaces' size).
  int bucket(int num_seqs) const;
  // Every bucket from 1 to max_seqs, ascending (what warm-up captures).
  std::vector<int> buckets() const;

  enum class Run { kReplayed, kCaptured };
  // Replays the graph of (bucket, variant) on `stream`; at its first use runs `forward` eagerly
  // (which loads kernels and picks cuBLAS algorithms, and computes this step), then captures the
  // same launches for the next steps without running them. A variant is a different launch
  // sequence for the same bucket (1: the shared-prefix attention launch, 2: 16-block attention
  // clusters; cuda_backend.h).
  Run run(int bucket, cudaStream_t stream, const std::function<void()>& forward, int variant = 0);

  // Destroys every graph; errors are ignored (the backend's destructor calls it).
  void clear() noexcept;
  // Destroys the graphs of one bucket (every variant), so its next run captures them again.
  void forget(int bucket);

 private:
  int max_seqs_ = 0;
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs_;  // by (bucket, variant)
};

}  // namespace rose
