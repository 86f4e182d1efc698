#pragma once
// Spearman's rank correlation, with tied values sharing their average rank.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data::detail {

// Ranks 1..n; a run of equal values gets the mean of the ranks it spans.
inline std::vector<double> average_ranks(std::span<const double> values) {
  const std::size_t n = values.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && values[order[j]] == values[order[i]])
      ++j;
    const double rank = 0.5 * static_cast<double>(i + j + 1);  // mean of i+1 .. j
    for (std::size_t m = i; m < j; ++m)
      ranks[order[m]] = rank;
    i = j;
  }
  return ranks;
}

// Pearson correlation of the ranks. NaN when undefined (fewer than two values,
// or one side constant).
inline double spearman(std::span<const double> x, std::span<const double> y) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  const auto rx = average_ranks(x.first(n));
  const auto ry = average_ranks(y.first(n));
  const double mean = 0.5 * static_cast<double>(n + 1);
  double sxy = 0.0;
  double sxx = 0.0;
  double syy = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx <= 0.0 || syy <= 0.0) return std::numeric_limits<double>::quiet_NaN();
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace embplan::inline EMBPLAN_ABI::data::detail
