#pragma once
// Histogram arithmetic shared by the synthetic pool and its statistics: how
// many unique indices a table contributes to a batch, and how per-table reuse
// histograms pool into one distribution over the whole pool.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "embplan/core/table_spec.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data::detail {

// Expected unique indices of a table in a batch: its lookups (batch x pooling
// factor) divided by the mean reuse its histogram implies, never more than its
// rows. Zero for an unused table (pooling factor 0).
inline double expected_unique(std::int64_t rows, double pooling_factor, const reuse_histogram& hist,
                              std::int64_t batch_size) noexcept {
  const double lookups = static_cast<double>(batch_size) * pooling_factor;
  if (lookups <= 0.0) return 0.0;
  return std::min(static_cast<double>(rows), lookups / mean_reuse(hist));
}

inline double expected_unique(const table_spec& t, std::int64_t batch_size) noexcept {
  return expected_unique(t.rows, t.pooling_factor, t.reuse_hist, batch_size);
}

// Index-ratio histogram (share of accesses per bin) implied by a unique-index
// histogram: bin k carries hist[k] x reuse_bin_middle(k) accesses, the same
// bin reuse that embplan::mean_reuse counts. All zero in,
// all zero out.
inline reuse_histogram index_ratio_of(const reuse_histogram& col_size) noexcept {
  reuse_histogram out{};
  double sum = 0.0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    out[k] = col_size[k] * reuse_bin_middle(k);
    sum += out[k];
  }
  if (sum > 0.0) {
    for (auto& v : out)
      v /= sum;
  }
  return out;
}

inline double l1_distance(const reuse_histogram& a, const reuse_histogram& b) noexcept {
  double d = 0.0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k)
    d += std::abs(a[k] - b[k]);
  return d;
}

// The share of unique indices per bin over a whole pool: each table's
// histogram weighted by its expected unique indices in a batch (tables whose
// histogram is all zero are unused and carry no weight).
inline reuse_histogram pooled_col_size(std::span<const table_spec> pool, std::int64_t batch_size) {
  reuse_histogram out{};
  double total = 0.0;
  for (const auto& t : pool) {
    const double u = expected_unique(t, batch_size);
    if (u <= 0.0) continue;
    double hist_sum = 0.0;
    for (double v : t.reuse_hist)
      hist_sum += v;
    if (hist_sum <= 0.0) continue;
    for (std::size_t k = 0; k < reuse_bin_count; ++k)
      out[k] += u * t.reuse_hist[k] / hist_sum;
    total += u;
  }
  if (total > 0.0) {
    for (auto& v : out)
      v /= total;
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::data::detail
