// NCCL collectives for tensor parallel (nccl_collective.h), and the CUDA tensor-parallel backend.
#include "engine/backend/cuda/nccl_collective.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "engine/backend/cuda/add_norm_reducer.h"
#include "engine/backend/cuda/logits_gatherer.h"
#include "engine/backend/cuda/peer_all_reduce.h"
#include "engine/common/error.h"
#include "engine/parallel/shard_plan.h"
#include "engine/parallel/tensor_parallel_backend.h"

namespace rose {
namespace {

// ROSE_NCCL_CHECK(ncclAllReduce(...)): every NCCL call goes through it; a failure is rose::Error
// naming the call, file and line, with NCCL's own text (as ROSE_CUDA_CHECK does for CUDA).
void nccl_check(ncclResult_t result, const char* stmt, const char* file, int line) {
  if (result == ncclSuccess) return;
  fail("NCCL error at {}:{}: {}: {} ({})", file, line, stmt, ncclGetErrorString(result),
       ncclGetLastError(nullptr));
}
#define ROSE_NCCL_CHECK(stmt) nccl_check((stmt), #stmt, __FILE__, __LINE__)

ncclDataType_t nccl_type(CollectiveType type) {
  switch (type) {
    case CollectiveType::kF32:
      return ncclFloat32;
    case CollectiveType::kBF16:
      return ncclBfloat16;
    case CollectiveType::kF16:
      return ncclFloat16;
  }
  return ncclFloat32;
}

// A rank's peer-memory groups (PeerAllReduce), each null where unused.
struct PeerPaths {
  std::unique_ptr<PeerAllReduce> sum;       // the small all-reduces
  std::unique_ptr<PeerAllReduce> add_norm;  // all-reduces fused with the add-norm after them
  std::unique_ptr<PeerAllReduce> gather;    // the logits' column gather
};

// NCCL, with the small all-reduces sent through peer memory where `peers` has a sum group, the
// add-norms of up to fused_max_rows rows fused with theirs where it has an add-norm group, and
// the logits gathered through peer memory where it has a gather group.
class NcclCollective final : public Collective, public AddNormReducer, public LogitsGatherer {
 public:
  NcclCollective(ncclComm_t comm, int rank, int size, PeerPaths peers, int fused_max_rows)
      : comm_(comm),
        rank_(rank),
        size_(size),
        peer_(std::move(peers.sum)),
        peer_add_norm_(std::move(peers.add_norm)),
        peer_gather_(std::move(peers.gather)),
        fused_max_rows_(fused_max_rows) {}
  ~NcclCollective() override {              // errors ignored: destructors never throw
    if (!aborted_) ncclCommDestroy(comm_);  // an aborted communicator is gone already
  }
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(void* buffer, int64_t count, CollectiveType type, void* stream) override {
    check_not_aborted();
    if (peer_ && peer_->handles(count, type)) {
      peer_->all_reduce_sum(buffer, count, type, static_cast<cudaStream_t>(stream));
      return;
    }
    ROSE_NCCL_CHECK(ncclAllReduce(buffer, buffer, size_t(count), nccl_type(type), ncclSum, comm_,
                                  static_cast<cudaStream_t>(stream)));
  }
  bool fuses_add_norm(const AddNormArgs& norm) const override {
    return peer_add_norm_ && norm.num_rows <= fused_max_rows_ &&
           peer_add_norm_->fuses_add_norm(norm);
  }
  void all_reduce_add_norm(const AddNormArgs& norm, bool pushed, cudaStream_t stream) override {
    check_not_aborted();
    if (!peer_add_norm_) fail("tensor parallel: no fused all-reduce add-norm on these GPUs");
    peer_add_norm_->all_reduce_add_norm(norm, pushed, stream);
  }
  PeerPush push_target() const override {
    return peer_add_norm_ ? peer_add_norm_->push_target() : PeerPush{};
  }
  bool takes_push(const AddNormArgs& norm) const override {
    return fuses_add_norm(norm) && peer_add_norm_->takes_push(norm);
  }
  bool gathers_logits(const PeerColumnGather& layout) const override {
    return peer_gather_ && peer_gather_->gathers_columns(layout);
  }
  void all_gather_logits(const float* shard, float* logits, const PeerColumnGather& layout,
                         cudaStream_t stream) override {
    check_not_aborted();
    if (!peer_gather_) fail("tensor parallel: no peer-memory logits gather on these GPUs");
    peer_gather_->all_gather_columns(shard, logits, layout, stream);
  }
  void all_gather(const void* send, void* recv, int64_t count, CollectiveType type,
                  void* stream) override {
    check_not_aborted();
    ROSE_NCCL_CHECK(ncclAllGather(send, recv, size_t(count), nccl_type(type), comm_,
                                  static_cast<cudaStream_t>(stream)));
  }
  // Another rank failed: ncclCommAbort ends this rank's NCCL operations in flight (NCCL's way
  // to free a rank waiting for a peer that will not come). Not yet run on GPUs (no failure
  // injection there); a peer-memory all-reduce in flight cannot be aborted and traps after 30 s.
  void abort() override {
    std::call_once(abort_once_, [&] {
      aborted_ = true;
      const ncclResult_t result = ncclCommAbort(comm_);
      if (result != ncclSuccess) {  // reported, not thrown: the run is ending with the first error
        std::fprintf(stderr, "roseinfer: ncclCommAbort on rank %d: %s\n", rank_,
                     ncclGetErrorString(result));
      }
    });
  }

 private:
  void check_not_aborted() const {
    if (aborted_) fail("tensor parallel: another rank failed (communicator aborted)");
  }

  ncclComm_t comm_;
  int rank_, size_;
  std::unique_ptr<PeerAllReduce> peer_;           // null: every all-reduce through NCCL
  std::unique_ptr<PeerAllReduce> peer_add_norm_;  // null: no fused add-norms
  std::unique_ptr<PeerAllReduce> peer_gather_;    // null: logits through NCCL's all-gather
  int fused_max_rows_;
  std::once_flag abort_once_;
  std::atomic<bool> aborted_ = false;
};

}  // namespace

std::vector<std::unique_ptr<Collective>> make_nccl_collectives(const std::vector<int>& devices) {
  const int n = int(devices.size());
  // Connect every algorithm at init, not lazily at its first collective: the first decode-sized
  // all-reduce happens inside a CUDA graph capture, where NCCL's set-up calls are not allowed.
  // (A value the user set is kept.)
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  ROSE_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  std::vector<std::unique_ptr<PeerAllReduce>> peers, add_norm_peers, gather_peers;
  const int fused_max_rows = fused_all_reduce_max_rows();
  if (const int64_t max_bytes = peer_all_reduce_max_bytes(); max_bytes > 0) {
    peers = PeerAllReduce::make_group(devices, max_bytes);
    if (!peers.empty() && fused_max_rows > 0) {
      add_norm_peers = PeerAllReduce::make_group(devices, max_bytes, PeerAllReduce::Use::kAddNorm);
    }
  }
  if (const int64_t max_bytes = peer_gather_max_bytes(); max_bytes > 0) {
    gather_peers = PeerAllReduce::make_group(devices, max_bytes, PeerAllReduce::Use::kGather);
  }
  const auto rank_of = [](std::vector<std::unique_ptr<PeerAllReduce>>& group,
                          int r) -> std::unique_ptr<PeerAllReduce> {
    return group.empty() ? nullptr : std::move(group[size_t(r)]);
  };
  std::vector<std::unique_ptr<Collective>> ranks;
  for (int r = 0; r < n; ++r) {
    PeerPaths paths{rank_of(peers, r), rank_of(add_norm_peers, r), rank_of(gather_peers, r)};
    ranks.push_back(
        std::make_unique<NcclCollective>(comms[size_t(r)], r, n, std::move(paths), fused_max_rows));
  }
  return ranks;
}

std::unique_ptr<Backend> make_cuda_tensor_parallel_backend(const WeightSource& weights,
                                                           const BackendOptions& options,
                                                           const std::vector<int>& devices) {
  check_tensor_parallel(weights.config(), int(devices.size()));
  return make_tensor_parallel_backend(weights, options, devices, make_nccl_collectives(devices),
                                      make_cuda_backend);
}

}  // namespace rose
