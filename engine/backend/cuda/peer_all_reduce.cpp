// One-shot all-reduce through peer memory: the host side (peer_all_reduce.h).
#include "engine/backend/cuda/peer_all_reduce.h"

#include <limits>
#include <string>

#include "engine/common/error.h"
#include "kernels/common/switch_reader.h"
#include "kernels/cuda/all_reduce_peer.cuh"
#include "kernels/cuda/check.cuh"

namespace rose {

namespace {

// A byte count from `name`, `fallback` when unset; 0 turns the path it sizes off.
int64_t bytes_from_env(const char* name, int64_t fallback) {
  return switch_number(switch_from_environment, name, fallback, 0,
                       std::numeric_limits<int64_t>::max(), "a byte count (0 turns it off)");
}

// ROSEINFER_CUDA_PEER_PROBE (PeerAllReduceArgs::probe): probes of the fused add-norm's exchange,
// for before/after timings with one binary; unset or 0 in every real run.
int peer_probe() {
  return switch_count(switch_from_environment, "ROSEINFER_CUDA_PEER_PROBE", 0, 63,
                      "0-63 (bits: 1 no push, 2 relaxed flag, 4 no flags, 8 epoch and residual "
                      "after the wait, 16 and 32 next kernel after the low-latency wait or before "
                      "the PDL wait)");
}

}  // namespace

int64_t peer_all_reduce_max_bytes() {
  return bytes_from_env("ROSEINFER_CUDA_PEER_ALL_REDUCE_BYTES", int64_t(512) << 10);
}

int64_t peer_gather_max_bytes() {
  return bytes_from_env("ROSEINFER_CUDA_PEER_GATHER_BYTES", int64_t(2) << 20);
}

int peer_low_latency_rows() {
  const std::string want = "0-" + std::to_string(kPeerAllReduceBlocks) + " rows (0 turns it off)";
  return switch_count(switch_from_environment, "ROSEINFER_CUDA_PEER_LOW_LATENCY_ROWS",
                      kPeerAllReduceBlocks, kPeerAllReduceBlocks, want.c_str());
}

int fused_all_reduce_max_rows() {
  return switch_count(switch_from_environment, "ROSEINFER_CUDA_FUSED_ALL_REDUCE",
                      kPeerAllReduceBlocks, 1 << 20, "a row count (0 turns it off)");
}

struct PeerAllReduce::Group {
  std::vector<int> devices;
  Use use = Use::kSum;
  int64_t max_bytes = 0;   // per rank and call
  int64_t slot_bytes = 0;  // kSum: max_bytes; kAddNorm, kGather: a max_bytes region per rank
  // kAddNorm: a region of 2 * max_bytes per rank (the low-latency words hold 4 bytes of data in 8)
  int64_t low_latency_slot_bytes = 0;
  int low_latency_rows = 0;
  // Per rank, on its device: staging (2, slot_bytes), flags (blocks, max ranks), epochs (blocks,),
  // low-latency staging (2, low_latency_slot_bytes), zeroed (kAddNorm only).
  std::vector<void*> stages, low_latency_stages;
  std::vector<uint32_t*> flags, epochs;

  ~Group() {  // errors ignored: destructors never throw, and the process is past its last step
    for (size_t r = 0; r < stages.size(); ++r) {  // the ranks allocated so far
      cudaSetDevice(devices[r]);
      cudaFree(stages[r]);
      cudaFree(flags[r]);
      cudaFree(epochs[r]);
      if (r < low_latency_stages.size()) cudaFree(low_latency_stages[r]);
    }
  }
};

namespace {

// Whether every pair of distinct devices can read each other's memory; enables that access.
bool enable_peer_access(const std::vector<int>& devices) {
  for (int a : devices) {
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      ROSE_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can) return false;
    }
  }
  for (int a : devices) {
    ROSE_CUDA_CHECK(cudaSetDevice(a));
    for (int b : devices) {
      if (a == b) continue;
      const cudaError_t status = cudaDeviceEnablePeerAccess(b, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // not an error here: clear it so no later check sees it
        continue;
      }
      ROSE_CUDA_CHECK(status);
    }
  }
  return true;
}

PeerReduceType reduce_type(CollectiveType type) {
  switch (type) {
    case CollectiveType::kF32:
      return PeerReduceType::kF32;
    case CollectiveType::kBF16:
      return PeerReduceType::kBF16;
    case CollectiveType::kF16:
      return PeerReduceType::kF16;
  }
  return PeerReduceType::kF32;
}

}  // namespace

std::vector<std::unique_ptr<PeerAllReduce>> PeerAllReduce::make_group(
    const std::vector<int>& devices, int64_t max_bytes, Use use,
    std::optional<int> low_latency_rows) {
  const int n = int(devices.size());
  if (n < 2 || n > kPeerAllReduceMaxRanks || max_bytes < 16) return {};
  int previous = 0;
  ROSE_CUDA_CHECK(cudaGetDevice(&previous));
  if (!enable_peer_access(devices)) {
    ROSE_CUDA_CHECK(cudaSetDevice(previous));
    return {};
  }
  auto group = std::make_shared<Group>();
  group->devices = devices;
  group->use = use;
  group->max_bytes = max_bytes / 16 * 16;
  group->slot_bytes = use == Use::kSum ? group->max_bytes : n * group->max_bytes;
  if (use == Use::kAddNorm) {
    group->low_latency_rows = low_latency_rows.value_or(peer_low_latency_rows());
    if (group->low_latency_rows > 0) group->low_latency_slot_bytes = 2 * group->slot_bytes;
  }
  const size_t flag_bytes = sizeof(uint32_t) * kPeerAllReduceBlocks * kPeerAllReduceMaxRanks;
  const size_t epoch_bytes = sizeof(uint32_t) * kPeerAllReduceBlocks;
  for (int r = 0; r < n; ++r) {
    ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
    group->stages.push_back(nullptr);
    group->flags.push_back(nullptr);
    group->epochs.push_back(nullptr);
    ROSE_CUDA_CHECK(cudaMalloc(&group->stages.back(), size_t(2 * group->slot_bytes)));
    ROSE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&group->flags.back()), flag_bytes));
    ROSE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&group->epochs.back()), epoch_bytes));
    ROSE_CUDA_CHECK(cudaMemset(group->flags.back(), 0, flag_bytes));
    ROSE_CUDA_CHECK(cudaMemset(group->epochs.back(), 0, epoch_bytes));
    if (group->low_latency_slot_bytes > 0) {
      group->low_latency_stages.push_back(nullptr);
      const size_t bytes = size_t(2 * group->low_latency_slot_bytes);
      ROSE_CUDA_CHECK(cudaMalloc(&group->low_latency_stages.back(), bytes));
      ROSE_CUDA_CHECK(cudaMemset(group->low_latency_stages.back(), 0, bytes));
    }
  }
  for (int r = 0; r < n; ++r) {  // the zeroed flags must be in place before any rank's first call
    ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
    ROSE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ROSE_CUDA_CHECK(cudaSetDevice(previous));
  std::vector<std::unique_ptr<PeerAllReduce>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<PeerAllReduce>(group, r));
  return ranks;
}

PeerAllReduce::PeerAllReduce(std::shared_ptr<Group> group, int rank)
    : group_(std::move(group)), args_{} {
  const int n = int(group_->devices.size());
  for (int r = 0; r < n; ++r) {
    args_.stages[r] = group_->stages[size_t(r)];
    args_.flags[r] = group_->flags[size_t(r)];
    if (!group_->low_latency_stages.empty()) {
      args_.low_latency_stages[r] = group_->low_latency_stages[size_t(r)];
    }
  }
  args_.low_latency_slot_bytes = group_->low_latency_slot_bytes;
  args_.low_latency_rows = group_->low_latency_rows;
  args_.epochs = group_->epochs[size_t(rank)];
  args_.slot_bytes = group_->slot_bytes;
  args_.rank = rank;
  args_.size = n;
  args_.probe = group_->use == Use::kAddNorm ? peer_probe() : 0;
}

bool PeerAllReduce::handles(int64_t count, CollectiveType type) const {
  const int64_t bytes = count * (type == CollectiveType::kF32 ? 4 : 2);
  return group_->use == Use::kSum && count > 0 && bytes % 16 == 0 && bytes <= group_->max_bytes;
}

void PeerAllReduce::all_reduce_sum(void* buffer, int64_t count, CollectiveType type,
                                   cudaStream_t stream) const {
  if (!handles(count, type)) fail("peer all-reduce: {} elements do not fit its staging", count);
  launch_peer_all_reduce(args_, buffer, count, reduce_type(type), stream);
}

bool PeerAllReduce::fuses_add_norm(const AddNormArgs& norm) const {
  const int64_t row_bytes = int64_t(norm.hidden) * int64_t(dtype_size(norm.dtype));
  return group_->use == Use::kAddNorm && norm.num_rows > 0 && norm.hidden > 0 &&
         norm.hidden <= kAddNormMaxHidden && row_bytes % 16 == 0 &&
         norm.num_rows * row_bytes <= group_->max_bytes && norm.delta &&
         (!norm.row_index || !norm.write_residual) && !norm.tok_emb;
}

void PeerAllReduce::all_reduce_add_norm(const AddNormArgs& norm, bool pushed,
                                        cudaStream_t stream) const {
  if (!fuses_add_norm(norm)) {
    fail("peer all-reduce: cannot fuse an add-norm of {} rows of {}", norm.num_rows, norm.hidden);
  }
  launch_peer_all_reduce_add_norm(args_, norm, pushed, stream);
}

PeerPush PeerAllReduce::push_target() const {
  return group_->use == Use::kAddNorm ? peer_push_target(args_) : PeerPush{};
}

bool PeerAllReduce::takes_push(const AddNormArgs& norm) const {
  return fuses_add_norm(norm) && peer_add_norm_takes_push(args_, norm);
}

bool PeerAllReduce::is_low_latency(const AddNormArgs& norm) const {
  return fuses_add_norm(norm) && peer_add_norm_is_low_latency(args_, norm);
}

bool PeerAllReduce::gathers_columns(const PeerColumnGather& layout) const {
  const int n = int(group_->devices.size());
  if (group_->use != Use::kGather || layout.rows <= 0 || layout.chunk <= 0 ||
      layout.chunk % 4 != 0 || layout.chunk * 4 > group_->max_bytes) {
    return false;
  }
  for (int r = 0; r < n; ++r) {
    if (layout.count[r] < 0 || int64_t(layout.rows) * layout.count[r] > layout.chunk ||
        layout.begin[r] < 0 || layout.begin[r] + layout.count[r] > layout.recv_stride) {
      return false;
    }
  }
  return true;
}

void PeerAllReduce::all_gather_columns(const float* send, float* recv,
                                       const PeerColumnGather& layout, cudaStream_t stream) const {
  if (!gathers_columns(layout)) {
    fail("peer gather: {} rows in a chunk of {} floats do not fit its staging", layout.rows,
         layout.chunk);
  }
  launch_peer_all_gather_columns(args_, send, recv, layout, stream);
}

}  // namespace rose
