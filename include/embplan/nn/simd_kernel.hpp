#pragma once
// Which kernel a packed inference network (nn/packed_compute_cost_net.hpp,
// nn/packed_comm_cost_net.hpp) runs, and whether this CPU and build can run
// it. Every kernel gives the same floats, bit for bit (the contract in
// detail/packed_layers.hpp); the choice changes speed only.

#include <cstdint>
#include <string>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/nn/detail/packed_kernels_x86.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

// Which kernel a packed network runs. automatic: the widest the CPU supports.
// All give the same results bit for bit; they differ in speed.
enum class simd_kernel : std::uint8_t { automatic, scalar, avx2, avx512 };

constexpr std::string_view to_string(simd_kernel k) noexcept {
  switch (k) {
    case simd_kernel::automatic:
      return "automatic";
    case simd_kernel::scalar:
      return "scalar";
    case simd_kernel::avx2:
      return "avx2";
    case simd_kernel::avx512:
      return "avx512";
  }
  return "unknown";
}

// Whether this build and this CPU can run k (automatic and scalar always can).
inline bool simd_kernel_supported(simd_kernel k) noexcept {
  switch (k) {
    case simd_kernel::automatic:
    case simd_kernel::scalar:
      return true;
#ifdef EMBPLAN_NN_X86_KERNELS
    case simd_kernel::avx2:
      return detail::cpu_has_avx2();
    case simd_kernel::avx512:
      return detail::cpu_has_avx512();
#else
    case simd_kernel::avx2:
    case simd_kernel::avx512:
      return false;
#endif
  }
  return false;
}

namespace detail {

// The kernel to run for a request, given what the CPU can do: automatic takes
// the widest; an explicit request the CPU cannot run, or no kernel at all, throws.
// field: the option named in the message (the network the kernel is asked for).
inline simd_kernel resolve_simd_kernel(simd_kernel requested, bool has_avx2, bool has_avx512,
                                       std::string_view field = "packed_compute_cost_net.kernel") {
  if (requested == simd_kernel::automatic) {
    if (has_avx512) return simd_kernel::avx512;
    if (has_avx2) return simd_kernel::avx2;
    return simd_kernel::scalar;
  }
  const std::string_view name = to_string(requested);
  if (name == "unknown") {
    embplan::detail::fail(std::string(field), static_cast<int>(requested),
                          "automatic, scalar, avx2 or avx512");
  }
  if ((requested == simd_kernel::avx2 && !has_avx2) ||
      (requested == simd_kernel::avx512 && !has_avx512)) {
    std::string supported = "a kernel this CPU and build support (scalar";
    if (has_avx2) supported += ", avx2";
    if (has_avx512) supported += ", avx512";
    embplan::detail::fail(std::string(field), name, supported + ")");
  }
  return requested;
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::nn
