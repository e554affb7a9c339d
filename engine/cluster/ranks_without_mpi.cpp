// ranks.h when CMake found no MPI: one process; a multi-process launch is refused.
#include "engine/cluster/placement.h"
#include "engine/cluster/ranks.h"
#include "engine/common/error.h"

namespace rose {

bool mpi_built() { return false; }

void init_ranks(int* /*argc*/, char*** /*argv*/) {
  const int size = launcher_world_size();
  if (size > 1) {
    usage_fail(
        "started by mpirun with {} processes, but this roseinfer was built without MPI (install "
        "an MPI such as libopenmpi-dev and reconfigure), or run it without mpirun",
        size);
  }
}

const RankWorld& rank_world() {
  static const RankWorld world;
  return world;
}

int finish_ranks(int exit_code) { return exit_code; }

RankPeers::RankPeers() = default;
RankPeers::~RankPeers() = default;

std::unique_ptr<ReplicaHandle> make_rank_replica(int /*rank*/, int /*local_index*/,
                                                 const EngineConfig& /*config*/,
                                                 const std::string& /*model_id*/, int /*replica*/,
                                                 int /*num_replicas*/) {
  fail("replicas on other ranks need a roseinfer built with MPI");
}

void serve_rank_replicas(const std::vector<ServedBackend>& /*backends*/,
                         const Tokenizer* /*stop_tokenizer*/, bool /*threaded*/) {
  fail("serving replicas for rank 0 needs a roseinfer built with MPI");
}

}  // namespace rose
