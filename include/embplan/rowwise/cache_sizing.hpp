#pragma once
// Miss-ratio curve and cache sizing of a table in the uvm_caching tier
// (embedding-tables chapter §6: the skew that hurts training is what makes a
// small cache of hot rows in fast memory effective).
// The model (cost/detail/reuse_cache.hpp, shared with the analytic cost's
// last-level cache): a cache of c rows holds the c hottest rows a batch
// touches (by reuse bin, as an oracle or a well-tuned LFU would); a cached
// row misses once per batch, on its first touch, an uncached row on every
// read. miss_ratio(c) is non-increasing in c, piecewise linear between bin
// edges, and flat at its floor 1 / mean_reuse once bins 1..16 are cached.
// Sizing: the load factor of a table is cached rows / table rows. Either the
// smallest cache reaching a target miss ratio, or, under an HBM budget, the
// placement that costs least: the whole table in HBM if it fits, else the
// largest cache that fits but no larger than where the curve goes flat, else
// no cache (host). Whatever the tier, the batch's inputs and outputs stay in
// HBM (core/storage.hpp).
// Design notes: docs/design/hot-rows.md.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/storage.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/cost/detail/reuse_cache.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

struct miss_ratio_point {
  double cache_rows = 0.0;
  double miss_ratio = 1.0;

  friend bool operator==(const miss_ratio_point&, const miss_ratio_point&) = default;
};

class miss_ratio_curve {
 public:
  miss_ratio_curve(const reuse_histogram& h, double lookups) : hist_(h), lookups_(lookups) {
    if (!std::isfinite(lookups) || lookups < 0.0) {
      embplan::detail::fail("lookups", lookups, "a finite number of lookups >= 0");
    }
    double total = 0.0;
    for (std::size_t k = 0; k < reuse_bin_count; ++k) {
      if (!std::isfinite(h[k]) || h[k] < 0.0) {
        embplan::detail::fail("reuse_hist.bin_" + std::to_string(k), h[k],
                              "a finite fraction >= 0");
      }
      total += h[k];
    }
    unique_ = total > 0.0 ? lookups / mean_reuse(h) : lookups;
    points_.push_back({0.0, miss_ratio(0.0)});
    if (total <= 0.0 || lookups <= 0.0) return;
    double rows = 0.0;
    for (std::size_t k = reuse_bin_count; k-- > 1;) {
      if (h[k] <= 0.0) continue;
      rows += cost::detail::reuse_bin_rows(h, k, unique_, total);
      points_.push_back({rows, miss_ratio(rows)});
    }
  }

  double lookups() const noexcept { return lookups_; }
  // Unique rows the window touches.
  double unique_rows() const noexcept { return unique_; }

  double misses(double cache_rows) const noexcept {
    return lookups_ - cost::detail::cache_hits(hist_, lookups_, cache_rows);
  }
  // 0 for a window of no lookups.
  double miss_ratio(double cache_rows) const noexcept {
    return lookups_ > 0.0 ? misses(cache_rows) / lookups_ : 0.0;
  }

  // The corners of the curve, from c = 0 to the last bin edge; miss_ratio is
  // linear between consecutive points and constant after the last.
  const std::vector<miss_ratio_point>& points() const noexcept { return points_; }
  double saturation_rows() const noexcept { return points_.back().cache_rows; }
  double min_miss_ratio() const noexcept { return points_.back().miss_ratio; }

  // The smallest cache (in rows, not rounded) whose miss ratio is at most
  // `target`; an error naming the floor if no cache reaches it.
  double rows_for_miss_ratio(double target) const {
    if (!std::isfinite(target) || target < 0.0 || target > 1.0) {
      embplan::detail::fail("target_miss_ratio", target, "a miss ratio in [0, 1]");
    }
    if (points_.front().miss_ratio <= target) return 0.0;
    for (std::size_t j = 1; j < points_.size(); ++j) {
      const auto& a = points_[j - 1];
      const auto& b = points_[j];
      if (b.miss_ratio <= target) {
        return a.cache_rows + (a.miss_ratio - target) / (a.miss_ratio - b.miss_ratio) *
                                  (b.cache_rows - a.cache_rows);
      }
    }
    embplan::detail::fail("target_miss_ratio", target,
                          "at least " + std::to_string(min_miss_ratio()) +
                              ", the lowest miss ratio of this reuse histogram (" +
                              std::to_string(unique_) + " unique rows in " +
                              std::to_string(lookups_) +
                              " lookups; a cached row's first touch misses)");
  }

 private:
  reuse_histogram hist_;
  double lookups_ = 0.0;
  double unique_ = 0.0;
  std::vector<miss_ratio_point> points_;
};

// Lookups of one batch of a table: batch x pooling factor.
inline double batch_lookups(const table_spec& t, std::int64_t batch_size) {
  if (batch_size <= 0) embplan::detail::fail("batch_size", batch_size, "a positive batch size");
  return static_cast<double>(batch_size) * t.pooling_factor;
}

inline miss_ratio_curve table_miss_ratio_curve(const table_spec& t, std::int64_t batch_size) {
  validate(t);
  return {t.reuse_hist, batch_lookups(t, batch_size)};
}

struct cache_size {
  std::uint64_t cache_rows = 0;  // whole cache slots
  double load_factor = 0.0;      // cache_rows / table rows
  double miss_ratio = 1.0;       // of a batch, at cache_rows
};

namespace detail {

inline cache_size cache_of(const miss_ratio_curve& curve, std::uint64_t rows,
                           std::int64_t table_rows) {
  return {.cache_rows = rows,
          .load_factor = static_cast<double>(rows) / static_cast<double>(table_rows),
          .miss_ratio = curve.miss_ratio(static_cast<double>(rows))};
}

}  // namespace detail

// The smallest cache of table t with a batch miss ratio <= target: 0 rows if
// no cache is needed; an error naming the target and the lowest reachable miss
// ratio (the curve's floor, or the miss ratio with every row cached when the
// window touches more rows than the table holds).
inline cache_size smallest_cache_for_miss_ratio(const table_spec& t, std::int64_t batch_size,
                                                double target_miss_ratio) {
  const auto curve = table_miss_ratio_curve(t, batch_size);
  const auto table_rows = static_cast<std::uint64_t>(t.rows);
  const double c = curve.rows_for_miss_ratio(target_miss_ratio);
  auto rows = static_cast<std::uint64_t>(std::min(std::ceil(c), static_cast<double>(table_rows)));
  // ceil(c) reaches the target up to rounding of c; one more row settles it.
  if (rows < table_rows && curve.miss_ratio(static_cast<double>(rows)) > target_miss_ratio) ++rows;
  if (curve.miss_ratio(static_cast<double>(rows)) > target_miss_ratio) {
    embplan::detail::fail("target_miss_ratio", target_miss_ratio,
                          "at least " +
                              std::to_string(curve.miss_ratio(static_cast<double>(rows))) +
                              ", the miss ratio of table '" + t.name + "' with all its " +
                              std::to_string(t.rows) + " rows cached");
  }
  return detail::cache_of(curve, rows, t.rows);
}

struct tier_choice {
  tier_placement placement{};
  cache_size cache{};  // hbm: every row, miss ratio 0; host: no rows, the miss ratio of no cache
  storage_items storage{};
};

// The cheapest placement of table t whose HBM items fit `hbm_budget_bytes`
// (docs/design/hot-rows.md); an error naming the budget and the least it needs.
inline tier_choice cheapest_tier_within_budget(const table_spec& t, std::int64_t batch_size,
                                               optimizer opt, std::uint64_t hbm_budget_bytes,
                                               const storage_options& o = {}) {
  const auto curve = table_miss_ratio_curve(t, batch_size);
  const auto table_rows = static_cast<std::uint64_t>(t.rows);
  tier_choice out;
  out.placement = {.tier = memory_tier::hbm};
  out.storage = table_storage(t, batch_size, opt, out.placement, o);
  if (out.storage.total().hbm_bytes <= hbm_budget_bytes) {
    out.cache = {.cache_rows = table_rows, .load_factor = 1.0, .miss_ratio = 0.0};
    return out;
  }
  const std::uint64_t useful =
      std::min(static_cast<std::uint64_t>(std::ceil(curve.saturation_rows())), table_rows);
  if (useful > 0) {
    // HBM of the smallest cache, one slot; each further slot adds slot_bytes.
    const tier_placement one_slot{.tier = memory_tier::uvm_caching,
                                  .load_factor = 1.0 / static_cast<double>(t.rows)};
    const std::uint64_t least = table_storage(t, batch_size, opt, one_slot, o).total().hbm_bytes;
    if (hbm_budget_bytes >= least) {
      const std::uint64_t slot_bytes = cache_slot_bytes(t.dim, t.weight_dtype, o.policy);
      const std::uint64_t rows = std::min(useful, 1 + (hbm_budget_bytes - least) / slot_bytes);
      out.cache = detail::cache_of(curve, rows, t.rows);
      out.placement = {.tier = memory_tier::uvm_caching, .load_factor = out.cache.load_factor};
      out.storage = table_storage(t, batch_size, opt, out.placement, o);
      return out;
    }
  }
  // No cache fits, or none would lower the cost: every read crosses the host link.
  out.placement = {.tier = memory_tier::host};
  out.storage = table_storage(t, batch_size, opt, out.placement, o);
  out.cache = {.miss_ratio = curve.miss_ratio(0.0)};
  if (out.storage.total().hbm_bytes > hbm_budget_bytes) {
    embplan::detail::fail("hbm_budget_bytes", hbm_budget_bytes,
                          "at least " + std::to_string(out.storage.total().hbm_bytes) +
                              " bytes, what table '" + t.name +
                              "' needs in HBM in any tier (the inputs and outputs of a batch)");
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
