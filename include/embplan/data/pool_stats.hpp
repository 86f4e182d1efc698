#pragma once
// Statistics of a table pool, side by side with the published MetaSyn ones
// (AutoShard Table 1 and App. A.2; data/dlrm_datasets_stats.json). The
// `embplan pool` command prints format_statistics().

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/detail/rank_correlation.hpp"
#include "embplan/data/detail/reuse.hpp"
#include "embplan/data/published_stats.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data {

struct pool_statistics {
  std::size_t tables = 0;
  double hash_mean = 0.0;
  double hash_max = 0.0;
  double hash_min = 0.0;
  double pf_mean = 0.0;
  double pf_max = 0.0;
  double pf_min = 0.0;
  double pf_share_below_50 = 0.0;  // AutoShard App. A.2: "the majority is less than 50"
  double spearman_hash_pf = 0.0;   // A.2: "no clear relationship"; NaN if undefined
  // Share of the pool's unique indices per reuse bin: each table's histogram
  // weighted by its expected unique indices in a batch,
  // min(rows, batch x pooling factor / mean_reuse(hist)).
  reuse_histogram pooled_col_size_hist{};
  // Share of the pool's accesses per reuse bin: the weighted histogram times
  // each bin's reuse (embplan::reuse_bin_middle, as embplan::mean_reuse counts it).
  reuse_histogram pooled_index_ratio_hist{};
  double col_size_l1 = 0.0;        // L1 distance to published::col_size_hist
  double index_ratio_l1 = 0.0;     // L1 distance to published::index_ratio_hist
  double pooled_mean_reuse = 0.0;  // accesses per unique index over the pool (published 6.9)
};

// Throws embplan::error naming the field for an empty pool, a bad batch size
// or an invalid table ("pool[3].rows").
inline pool_statistics compute_statistics(std::span<const table_spec> pool,
                                          std::int64_t batch_size = published::batch_size) {
  if (pool.empty()) embplan::detail::fail("pool", 0, "at least one table");
  if (batch_size <= 0) embplan::detail::fail("batch_size", batch_size, "a positive integer");
  for (std::size_t i = 0; i < pool.size(); ++i)
    validate(pool[i], embplan::detail::path("pool", i));

  const std::size_t n = pool.size();
  pool_statistics s;
  s.tables = n;
  std::vector<double> hash(n);
  std::vector<double> pf(n);
  std::size_t below_50 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    hash[i] = static_cast<double>(pool[i].rows);
    pf[i] = pool[i].pooling_factor;
    if (pf[i] < 50.0) ++below_50;
  }
  const auto mean = [n](const std::vector<double>& v) {
    double sum = 0.0;
    for (double x : v)
      sum += x;
    return sum / static_cast<double>(n);
  };
  s.hash_mean = mean(hash);
  s.hash_max = *std::max_element(hash.begin(), hash.end());
  s.hash_min = *std::min_element(hash.begin(), hash.end());
  s.pf_mean = mean(pf);
  s.pf_max = *std::max_element(pf.begin(), pf.end());
  s.pf_min = *std::min_element(pf.begin(), pf.end());
  s.pf_share_below_50 = static_cast<double>(below_50) / static_cast<double>(n);
  s.spearman_hash_pf = data::detail::spearman(hash, pf);

  s.pooled_col_size_hist = data::detail::pooled_col_size(pool, batch_size);
  s.pooled_index_ratio_hist = data::detail::index_ratio_of(s.pooled_col_size_hist);
  s.col_size_l1 = data::detail::l1_distance(s.pooled_col_size_hist, published::col_size_hist);
  s.index_ratio_l1 =
      data::detail::l1_distance(s.pooled_index_ratio_hist, published::index_ratio_hist);
  s.pooled_mean_reuse = mean_reuse(s.pooled_col_size_hist);
  return s;
}

namespace detail {

inline std::string format_row(std::string_view label, std::string_view value,
                              std::string_view published_value) {
  char line[128];
  std::snprintf(line, sizeof line, "%-22.*s %14.*s %14.*s\n", static_cast<int>(label.size()),
                label.data(), static_cast<int>(value.size()), value.data(),
                static_cast<int>(published_value.size()), published_value.data());
  return line;
}

inline std::string format_number(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace detail

// A small aligned text table: each statistic next to its published value,
// then the pooled histograms bin by bin.
inline std::string format_statistics(const pool_statistics& s) {
  using detail::format_number;
  using detail::format_row;
  namespace pub = published;
  std::string out = format_row("statistic", "pool", "published");
  out += format_row("tables", std::to_string(s.tables), std::to_string(pub::num_tables));
  out += format_row("hash size mean", format_number(s.hash_mean, 0),
                    std::to_string(pub::hash_size_mean));
  out +=
      format_row("hash size max", format_number(s.hash_max, 0), std::to_string(pub::hash_size_max));
  out +=
      format_row("hash size min", format_number(s.hash_min, 0), std::to_string(pub::hash_size_min));
  out += format_row("pooling factor mean", format_number(s.pf_mean, 2),
                    format_number(pub::pooling_factor_mean, 0));
  out += format_row("pooling factor max", format_number(s.pf_max, 2),
                    format_number(pub::pooling_factor_max, 0));
  out += format_row("pooling factor min", format_number(s.pf_min, 2),
                    format_number(pub::pooling_factor_min, 0));
  out += format_row("share pf < 50", format_number(s.pf_share_below_50, 3), "majority");
  out += format_row("spearman(hash, pf)", format_number(s.spearman_hash_pf, 3), "no relation");
  out += format_row("col_size_hist L1", format_number(s.col_size_l1, 4), "target <= 0.10");
  out += format_row("index_ratio_hist L1", format_number(s.index_ratio_l1, 4), "(0 = exact)");
  out += format_row("mean reuse", format_number(s.pooled_mean_reuse, 2),
                    format_number(pub::mean_reuse, 1));
  out += "\nbin  reuse             col_size  published  index_ratio  published\n";
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    std::string range = k == 0 ? "(0, 1]"
                        : k + 1 == reuse_bin_count
                            ? "(" + std::to_string(std::uint64_t{1} << (k - 1)) + ", inf)"
                            : "(" + std::to_string(std::uint64_t{1} << (k - 1)) + ", " +
                                  std::to_string(std::uint64_t{1} << k) + "]";
    char line[160];
    std::snprintf(line, sizeof line, "%-4zu %-16s %9.4f %10.3f %12.4f %10.3f\n", k, range.c_str(),
                  s.pooled_col_size_hist[k], pub::col_size_hist[k], s.pooled_index_ratio_hist[k],
                  pub::index_ratio_hist[k]);
    out += line;
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::data
