#pragma once
// Replicas on other MPI ranks (DESIGN.md "Scale-out"): `mpirun -np R roseinfer bench ...` starts R
// copies of the same command. Rank 0 reads the workload, runs the cluster loop and the report;
// the other ranks build their replicas' backends and serve the calls rank 0 makes on them
// (replica_handle.h); the ranks advance their replicas at the same time between two arrivals
// (cluster.h), and the run keeps the in-process cluster's clocks, order and results.
// Built with MPI when CMake finds it (mpi_ranks.cpp); otherwise ranks_without_mpi.cpp, where any
// launch by mpirun with more than one process is a usage error.
#include <memory>
#include <string>
#include <vector>

#include "engine/cluster/replica_handle.h"

namespace rose {

struct RankWorld {
  int rank = 0;
  int size = 1;        // 1: a plain process (no mpirun, or mpirun -np 1)
  int local_rank = 0;  // among the ranks on this node
};

bool mpi_built();
// Once, first thing in main: under a launcher of several processes (placement.h:
// launcher_world_size() > 1) calls MPI_Init; one process needs no MPI. UsageError when launched
// with several processes by a binary built without MPI.
void init_ranks(int* argc, char*** argv);
const RankWorld& rank_world();
// Last thing in main, with its exit code: MPI_Finalize, or MPI_Abort when this rank fails while
// another may still wait for it (a serving rank, or rank 0 before its peers were released).
int finish_ranks(int exit_code);

// Rank 0: while alive, the other ranks serve; its destruction releases them (also on an error).
class RankPeers {
 public:
  RankPeers();
  ~RankPeers();
  RankPeers(const RankPeers&) = delete;
  RankPeers& operator=(const RankPeers&) = delete;
};

// Rank 0: replica `replica` of `num_replicas`, the `local_index`-th replica served by `rank`, with
// an engine built there from `config` and `model_id`.
std::unique_ptr<ReplicaHandle> make_rank_replica(int rank, int local_index,
                                                 const EngineConfig& config,
                                                 const std::string& model_id, int replica,
                                                 int num_replicas);

// Other ranks: serves calls on `backends` (and their sim clocks, null for real compute) until
// rank 0's RankPeers is destroyed; `threaded`: each replica advances on a thread of its own, beside
// this rank's others (ClusterConfig::concurrent).
struct ServedBackend {
  Backend* backend = nullptr;
  SimClock* sim_clock = nullptr;
};
void serve_rank_replicas(const std::vector<ServedBackend>& backends,
                         const Tokenizer* stop_tokenizer, bool threaded);

}  // namespace rose
