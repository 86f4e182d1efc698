#pragma once
// The MPI prelude of the headers that run between ranks (target
// embplan::mpi: meters in meter/mpi/, AutoShard's actors in rl/mpi/): MPI's
// C API only — OpenMPI's deprecated C++ bindings do not compile cleanly under
// -Wextra — and mpi_check, which turns a failed MPI call into an
// embplan::error naming the call and MPI's own text. Include it first.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstddef>
#include <string>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::detail {

// rc of the MPI call named `call`: MPI_SUCCESS, or an embplan::error.
inline void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    fail(call, std::string(text, static_cast<std::size_t>(length)), "MPI_SUCCESS");
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::detail
