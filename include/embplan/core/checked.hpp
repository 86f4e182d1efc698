#pragma once
// 64-bit size arithmetic that refuses to wrap. Table sizes reach 2e9 rows x 1024
// dims x 4 bytes = 8 TB, far beyond 32 bits and close enough to 64-bit limits
// once optimizer state and sums over tables are added.

#include <cstdint>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace detail {
// Exact products of two 64-bit sizes (GCC/Clang extension, marked so -Wpedantic stays quiet).
__extension__ typedef unsigned __int128 uint128;
}  // namespace detail

inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    detail::fail(what, "overflow", "a product below 2^64 bytes");
  }
  return out;
}

inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    detail::fail(what, "overflow", "a sum below 2^64 bytes");
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI
