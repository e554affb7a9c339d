#pragma once
// ROSE_MPI_CHECK(MPI_Send(...)): every MPI call goes through it; a failure is rose::Error naming
// the call, file and line and MPI's own message (as ROSE_CUDA_CHECK in kernels/cuda/check.cuh).
// Only MPI files (engine/cluster/mpi_*) include this.
// The C API only: Open MPI's and MPICH's mpi.h otherwise pull in the deprecated C++ bindings,
// which need a library we do not link.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "engine/common/error.h"

namespace rose {

inline void mpi_check(int code, const char* stmt, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  fail("MPI error {} at {}:{}: {}: {}", code, file, line, stmt, std::string(text, size_t(length)));
}

}  // namespace rose

#define ROSE_MPI_CHECK(stmt) ::rose::mpi_check((stmt), #stmt, __FILE__, __LINE__)
