// Timing driver for tensor parallel's collectives (engine/backend/cuda/nccl_collective,
// peer_all_reduce) over every GPU present (2 at least): the bf16 all-reduce at the sizes a step
// sums (one hidden row of llama-8b is 8 KiB, of llama-70b 16 KiB; a prefill chunk's rows up to
// 64 MiB), through NCCL and through peer memory (one-shot, up to 16 MiB), in microseconds per call
// inside a CUDA graph (as a decode step runs them) and enqueued one by one, with the bus bandwidth
// NCCL's own tests report (2 (n-1)/n bytes / time). Built as gpu_bench_collectives, not run by
// ctest; run with --no-skip.
//   ROSEINFER_BENCH_ITERS=200 (calls per size)
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/nccl_collective.h"
#include "engine/backend/cuda/peer_all_reduce.h"
#include "engine/parallel/rank_threads.h"
#include "kernels/cuda/check.cuh"

using namespace rose;

namespace {

int iterations() {
  const char* env = std::getenv("ROSEINFER_BENCH_ITERS");
  return env ? std::max(1, std::atoi(env)) : 200;
}

// all_reduce(rank, buffer, count, stream): one rank's bf16 all-reduce, enqueued.
using AllReduce = std::function<void(int, void*, int64_t, cudaStream_t)>;

// Seconds per all-reduce of `bytes` on every rank: `iters` calls captured in one graph per rank
// (graph = true) or enqueued one by one, timed from a common start to the last rank's finish.
double time_all_reduce(const AllReduce& all_reduce, RankThreads& threads,
                       std::vector<void*>& buffers, std::vector<cudaStream_t>& streams,
                       int64_t bytes, int iters, bool graph) {
  const int n = int(buffers.size());
  std::vector<cudaGraphExec_t> execs(size_t(n), nullptr);
  auto enqueue = [&](int r, int calls) {
    for (int i = 0; i < calls; ++i)
      all_reduce(r, buffers[size_t(r)], bytes / 2, streams[size_t(r)]);
  };
  threads.run([&](int r) {  // warm-up, and the graphs
    ROSE_CUDA_CHECK(cudaSetDevice(r));
    enqueue(r, 5);
    ROSE_CUDA_CHECK(cudaStreamSynchronize(streams[size_t(r)]));
    if (!graph) return;
    cudaGraph_t g = nullptr;
    ROSE_CUDA_CHECK(cudaStreamBeginCapture(streams[size_t(r)], cudaStreamCaptureModeThreadLocal));
    enqueue(r, iters);
    ROSE_CUDA_CHECK(cudaStreamEndCapture(streams[size_t(r)], &g));
    ROSE_CUDA_CHECK(cudaGraphInstantiate(&execs[size_t(r)], g, 0));
    ROSE_CUDA_CHECK(cudaGraphUpload(execs[size_t(r)], streams[size_t(r)]));
    ROSE_CUDA_CHECK(cudaGraphDestroy(g));
    ROSE_CUDA_CHECK(cudaStreamSynchronize(streams[size_t(r)]));
  });
  const auto start = std::chrono::steady_clock::now();
  threads.run([&](int r) {
    ROSE_CUDA_CHECK(cudaSetDevice(r));
    if (graph) {
      ROSE_CUDA_CHECK(cudaGraphLaunch(execs[size_t(r)], streams[size_t(r)]));
    } else {
      enqueue(r, iters);
    }
    ROSE_CUDA_CHECK(cudaStreamSynchronize(streams[size_t(r)]));
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (cudaGraphExec_t exec : execs) {
    if (exec) ROSE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  }
  return seconds / iters;
}

}  // namespace

TEST_CASE("bf16 all-reduce over every GPU: latency and bus bandwidth" * doctest::skip()) {
  const int n = cuda_device_count();
  if (n < 2) {
    std::printf("SKIPPED: %d GPU(s); the all-reduce needs 2\n", n);
    return;
  }
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) devices.push_back(d);
  setenv("ROSEINFER_CUDA_PEER_ALL_REDUCE_BYTES", "0", 1);  // NCCL alone, whatever the size
  auto ranks = make_nccl_collectives(devices);
  const int64_t peer_max_bytes = int64_t(16) << 20;
  auto peers = PeerAllReduce::make_group(devices, peer_max_bytes);
  const AllReduce nccl = [&](int r, void* buffer, int64_t count, cudaStream_t stream) {
    ranks[size_t(r)]->all_reduce_sum(buffer, count, CollectiveType::kBF16, stream);
  };
  const AllReduce peer = [&](int r, void* buffer, int64_t count, cudaStream_t stream) {
    peers[size_t(r)]->all_reduce_sum(buffer, count, CollectiveType::kBF16, stream);
  };
  RankThreads threads(n);
  const int64_t max_bytes = int64_t(64) << 20;
  std::vector<void*> buffers(size_t(n), nullptr);
  std::vector<cudaStream_t> streams(size_t(n), nullptr);
  threads.run([&](int r) {
    ROSE_CUDA_CHECK(cudaSetDevice(r));
    ROSE_CUDA_CHECK(cudaMalloc(&buffers[size_t(r)], size_t(max_bytes)));
    ROSE_CUDA_CHECK(cudaMemset(buffers[size_t(r)], 0, size_t(max_bytes)));
    ROSE_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[size_t(r)], cudaStreamNonBlocking));
  });
  const int iters = iterations();
  std::printf("all-reduce bf16 over %d GPUs, %d calls per size; peer memory: %s\n", n, iters,
              peers.empty() ? "not reachable (NCCL only)" : "one-shot up to 16 MiB");
  std::printf("%10s %10s %10s %10s %10s %12s %12s\n", "bytes", "nccl graph", "nccl eager",
              "peer graph", "peer eager", "nccl bus GB/s", "peer bus GB/s");
  const double bus_bytes = 2.0 * (n - 1) / n;
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 2) {
    const int calls = bytes >= (int64_t(4) << 20) ? std::max(10, iters / 10) : iters;
    const double graph = time_all_reduce(nccl, threads, buffers, streams, bytes, calls, true);
    const double eager = time_all_reduce(nccl, threads, buffers, streams, bytes, calls, false);
    double peer_graph = 0, peer_eager = 0;
    if (!peers.empty() && bytes <= peer_max_bytes) {
      peer_graph = time_all_reduce(peer, threads, buffers, streams, bytes, calls, true);
      peer_eager = time_all_reduce(peer, threads, buffers, streams, bytes, calls, false);
    }
    std::printf("%10lld %10.2f %10.2f %10.2f %10.2f %12.1f %12.1f\n", static_cast<long long>(bytes),
                graph * 1e6, eager * 1e6, peer_graph * 1e6, peer_eager * 1e6,
                bus_bytes * double(bytes) / graph / 1e9,
                peer_graph > 0 ? bus_bytes * double(bytes) / peer_graph / 1e9 : 0.0);
  }
  threads.run([&](int r) {
    ROSE_CUDA_CHECK(cudaSetDevice(r));
    ROSE_CUDA_CHECK(cudaFree(buffers[size_t(r)]));
    ROSE_CUDA_CHECK(cudaStreamDestroy(streams[size_t(r)]));
  });
}
