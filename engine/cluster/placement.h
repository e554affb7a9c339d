#pragma once
// Where data-parallel replicas run: which MPI rank holds each replica, and which GPU each of a
// process's replicas uses. Pure functions over counts and flag text (tested in test_placement.cpp);
// UsageError (exit 2) names the flag.
#include <string>
#include <vector>

namespace rose {

// Replica i runs on rank i % ranks, as that rank's local replica i / ranks: consecutive replicas
// land on different ranks, so any count per rank fills every rank evenly.
int replica_rank(int replica, int ranks);
int replica_local_index(int replica, int ranks);
// The replicas rank `rank` holds, in increasing order.
std::vector<int> rank_replicas(int rank, int ranks, int num_replicas);
// --data-parallel N over `ranks` MPI ranks: N must be a multiple of ranks, so every rank holds the
// same number of replicas (one per GPU of a node). UsageError otherwise.
void check_rank_count(int num_replicas, int ranks);

// The process count the launcher (mpirun, srun --mpi, hydra) announced in the environment:
// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_SIZE; 0 when not started by one.
int launcher_world_size();
// This process's rank among those on its node (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID), 0
// when not set.
int launcher_local_rank();

// The GPUs of a process's `local_replicas` replicas, `gpus_per_replica` each (--tensor-parallel;
// replica r's are entries [r * per, (r + 1) * per) of the result): `gpus_flag` ("0,1"; empty:
// 0..present-1) lists the node's GPUs; a process that is local rank L takes the entries from
// L * local_replicas * per on. UsageError naming --gpus for a bad, duplicated or absent id, or
// too few entries.
std::vector<int> replica_devices(const std::string& gpus_flag, int local_replicas, int local_rank,
                                 int gpus_present, int gpus_per_replica = 1);

}  // namespace rose
