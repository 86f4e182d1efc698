#pragma once
// CUDA runtime errors become embplan::error, naming the call that failed and
// the runtime's own text for the status (docs/design.md, "Errors and exit
// codes").
#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

// "CUDA call 'cudaMalloc(&p, bytes)' failed: out of memory (cudaErrorMemoryAllocation)"
inline void cuda_check(cudaError_t status, std::string_view call) {
  if (status == cudaSuccess) return;
  std::string msg = "CUDA call '";
  msg += call;
  msg += "' failed: ";
  msg += cudaGetErrorString(status);
  msg += " (";
  msg += cudaGetErrorName(status);
  msg += ')';
  throw embplan::error(msg);
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail

#define EMBPLAN_CUDA_CHECK(call) ::embplan::kernel::detail::cuda_check((call), #call)
