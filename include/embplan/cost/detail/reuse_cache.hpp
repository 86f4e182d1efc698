#pragma once
// The reuse-histogram cache model shared by the analytic cost's last-level
// cache (cost/analytic.hpp) and the software row cache of memory tiers
// (rowwise/cache_sizing.hpp): a window of `lookups` lookups touches
// lookups / mean_reuse(h) unique rows, h[k] / sum(h) of them in reuse bin k,
// each read reuse_bin_middle(k) times (core/table_spec.hpp). A cache of c rows
// holds the hottest of them (highest bins first); a cached row misses on its
// first touch and hits on its middle - 1 repeats, an uncached row misses on
// every read.

#include <algorithm>
#include <cstddef>

#include "embplan/core/table_spec.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::cost::detail {

// Unique rows of reuse bin k among the `unique` rows a window touches, for a
// histogram summing to `total` > 0.
constexpr double reuse_bin_rows(const reuse_histogram& h, std::size_t k, double unique,
                                double total) noexcept {
  return unique * h[k] / total;
}

// Lookups served by the cache: the unique rows of the hottest reuse bins that
// fit in `cache_rows` rows of cache, each re-read (middle - 1) times after its
// first touch. Never more than lookups - unique rows.
inline double cache_hits(const reuse_histogram& h, double lookups, double cache_rows) noexcept {
  double total = 0.0;
  for (double v : h)
    total += v;
  if (total <= 0.0 || lookups <= 0.0 || cache_rows <= 0.0) return 0.0;
  const double unique = lookups / mean_reuse(h);
  double left = cache_rows;
  double hits = 0.0;
  for (std::size_t k = reuse_bin_count; k-- > 1 && left > 0.0;) {
    const double rows = reuse_bin_rows(h, k, unique, total);
    const double cached = std::min(rows, left);
    left -= cached;
    hits += cached * (reuse_bin_middle(k) - 1.0);
  }
  return std::min(hits, lookups - unique);
}

}  // namespace embplan::inline EMBPLAN_ABI::cost::detail
