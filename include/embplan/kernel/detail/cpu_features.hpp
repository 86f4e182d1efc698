#pragma once
// Which vector instruction sets the CPU running the process offers. The library
// is not built with -march, so the embedding-bag kernels carry AVX2 and AVX-512
// bodies compiled with __attribute__((target)) and pick one at run time; the
// answers are computed once (function-local constants, no mutable globals).
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBPLAN_KERNEL_X86 1
#include <cpuid.h>

#include "embplan/version.hpp"
#else
#define EMBPLAN_KERNEL_X86 0
#endif

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

#if EMBPLAN_KERNEL_X86
inline bool cpu_has_f16c() noexcept {
  // Clang's __builtin_cpu_supports knows no "f16c": read CPUID leaf 1 directly.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & bit_F16C) != 0;
}
#endif

// AVX2 + FMA + F16C: Haswell / Zen and later.
inline bool cpu_has_avx2() noexcept {
#if EMBPLAN_KERNEL_X86
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  }();
  return has;
#else
  return false;
#endif
}

// AVX-512 F + BW + VL (masked 16-bit loads for fp16 tails): Skylake-SP / Zen 4 and later.
inline bool cpu_has_avx512() noexcept {
#if EMBPLAN_KERNEL_X86
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail
