#pragma once
// The whole-number view of the 17 reuse bins (core/table_spec.hpp): which bin
// an occurrence count falls in, and which counts a bin holds. Shared by trace
// generation and feature extraction so the two agree on every edge.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "embplan/core/table_spec.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data::detail {

// The whole numbers of occurrences reuse bin k holds: bin 0 is exactly 1, bin k
// in 1..15 is 2^(k-1)+1 .. 2^k. The open last bin (32768, inf) is drawn from
// 32769 .. 98303, whose mean is 2^16, the value reuse_bin_middle gives it, so
// the drawn counts average what mean_reuse assumes in every bin.
struct count_range {
  std::int64_t lo = 1;
  std::int64_t hi = 1;
};

constexpr count_range reuse_bin_counts(std::size_t k) noexcept {
  if (k == 0) return {1, 1};
  if (k + 1 >= reuse_bin_count) return {32769, 98303};
  const std::int64_t half = std::int64_t{1} << (k - 1);
  return {half + 1, 2 * half};
}

// The reuse bin of an occurrence count (>= 1): 0 for 1, k for (2^(k-1), 2^k],
// 16 above 32768 — NeuroShard / DreamShard tools/gen_dlrm_data.py.
constexpr std::size_t reuse_bin_of(std::uint64_t count) noexcept {
  const auto k = static_cast<std::size_t>(std::bit_width(count - 1));
  return std::min(k, reuse_bin_count - 1);
}

}  // namespace embplan::inline EMBPLAN_ABI::data::detail
