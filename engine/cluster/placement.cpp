#include "engine/cluster/placement.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "engine/common/error.h"

namespace rose {

int replica_rank(int replica, int ranks) { return replica % ranks; }
int replica_local_index(int replica, int ranks) { return replica / ranks; }

std::vector<int> rank_replicas(int rank, int ranks, int num_replicas) {
  std::vector<int> out;
  for (int i = rank; i < num_replicas; i += ranks) out.push_back(i);
  return out;
}

void check_rank_count(int num_replicas, int ranks) {
  if (ranks < 1 || num_replicas % ranks != 0) {
    usage_fail(
        "--data-parallel {} over {} MPI ranks: the replica count must be a multiple of the rank "
        "count (each rank runs the same number of replicas)",
        num_replicas, ranks);
  }
}

namespace {

// A non-negative integer environment variable, -1 when unset or not a number.
int env_int(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return -1;
  int value = -1;
  const char* end = text + std::char_traits<char>::length(text);
  const auto [ptr, ec] = std::from_chars(text, end, value);
  return ec == std::errc() && ptr == end && value >= 0 ? value : -1;
}

}  // namespace

int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const int n = env_int(name); n >= 0) return n;
  }
  return 0;
}

int launcher_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}) {
    if (const int n = env_int(name); n >= 0) return n;
  }
  return 0;
}

std::vector<int> replica_devices(const std::string& gpus_flag, int local_replicas, int local_rank,
                                 int gpus_present, int gpus_per_replica) {
  std::vector<int> list;
  if (gpus_flag.empty()) {
    for (int g = 0; g < gpus_present; ++g) list.push_back(g);
  } else {
    size_t begin = 0;
    while (begin <= gpus_flag.size()) {
      const size_t comma = std::min(gpus_flag.find(',', begin), gpus_flag.size());
      const std::string item = gpus_flag.substr(begin, comma - begin);
      int id = -1;
      const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
      if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || id < 0) {
        usage_fail("--gpus {}: '{}' is not a GPU id (expected a list like 0,1)", gpus_flag, item);
      }
      if (id >= gpus_present) {
        usage_fail("--gpus {}: GPU {} does not exist ({} GPU(s) present)", gpus_flag, id,
                   gpus_present);
      }
      if (std::find(list.begin(), list.end(), id) != list.end()) {
        usage_fail(
            "--gpus {}: GPU {} is listed twice (each GPU serves one replica or tensor-parallel "
            "rank)",
            gpus_flag, id);
      }
      list.push_back(id);
      begin = comma + 1;
    }
  }
  const size_t count = size_t(local_replicas) * size_t(gpus_per_replica);
  const size_t first = size_t(local_rank) * count;
  if (first + count > list.size()) {
    usage_fail(
        "--data-parallel: {} replica(s) per process{}{} need {} GPU(s) on this node, but --gpus "
        "has {} ({} GPU(s) present)",
        local_replicas,
        gpus_per_replica > 1 ? fmt::format(" of --tensor-parallel {}", gpus_per_replica) : "",
        local_rank > 0 ? fmt::format(" at local rank {}", local_rank) : "", first + count,
        list.size(), gpus_present);
  }
  return std::vector<int>(list.begin() + std::ptrdiff_t(first),
                          list.begin() + std::ptrdiff_t(first + count));
}

}  // namespace rose
