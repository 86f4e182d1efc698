#pragma once
// The three draws behind data::synthetic_pool: hash sizes, pooling factors and
// reuse histograms, each from its own random stream so that they are
// independent (AutoShard App. A.2: "there is no clear relationship between
// the hash size and pooling factor").

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/detail/reuse.hpp"
#include "embplan/data/published_stats.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data::detail {

// Shape knobs of the generator. The published statistics fix the means and
// extremes; these fix what the papers only describe in words.
struct pool_shape {
  // AutoShard App. A.2: "the hash sizes for most tables are on the scale of
  // millions, while some can reach tens of millions". Log-normal body with this
  // sigma (in ln units), saturating smoothly at the published max; plus a few
  // tiny tables (log-uniform up to tiny_rows_max) that reach the published min of 1.
  double hash_log_sigma = 0.7;
  double tiny_table_share = 0.04;
  double tiny_rows_max = 1e5;
  // AutoShard App. A.2: "the pooling factor generally follows a power-law
  // distribution, where the majority is less than 50, while some can be as large
  // as 200". Lomax (Pareto II) with this tail index, clipped at the published
  // max; unused_share of the tables are never looked up (published min 0).
  double pf_tail_index = 2.5;
  double unused_share = 0.02;
  // Per-table reuse histograms: the target shifted by a normal number of bins
  // (some tables are more skewed than others) times log-normal per-bin noise.
  double shift_sigma_bins = 0.5;
  double bin_noise_sigma = 0.3;
  // Proportional fitting rounds that pull the pooled histogram onto the target.
  int fit_rounds = 60;
};

inline constexpr pool_shape default_pool_shape{};

// Random streams of one pool seed.
inline constexpr std::uint64_t hash_stream = 1;
inline constexpr std::uint64_t pooling_stream = 2;
inline constexpr std::uint64_t reuse_stream = 3;

// k distinct indices of [0, n), by a partial Fisher-Yates shuffle.
inline std::vector<std::size_t> choose_indices(rng& r, std::size_t n, std::size_t k) {
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  for (std::size_t i = 0; i < k && i < n; ++i)
    std::swap(idx[i], idx[i + static_cast<std::size_t>(r.below(n - i))]);
  idx.resize(std::min(k, n));
  return idx;
}

// The scale in [lo, hi] at which the non-decreasing mean_at(scale) reaches target
// (bisection in log space; a bound when the target is out of reach).
template <class MeanAt>
double solve_scale(MeanAt&& mean_at, double target, double lo, double hi) {
  for (int it = 0; it < 200 && hi / lo > 1.0 + 1e-12; ++it) {
    const double mid = std::sqrt(lo * hi);
    if (mean_at(mid) < target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return std::sqrt(lo * hi);
}

inline std::size_t share_count(std::size_t n, double share) {
  if (n < 2) return 0;
  return std::max<std::size_t>(
      1, static_cast<std::size_t>(std::lround(share * static_cast<double>(n))));
}

// Hash sizes with the published max and min hit exactly and the published mean
// within a rounding step (AutoShard Table 1).
inline std::vector<std::int64_t> draw_hash_sizes(std::size_t n, std::uint64_t seed,
                                                 const pool_shape& shape = default_pool_shape) {
  rng r(derive_seed(seed, hash_stream));
  const auto max_rows = static_cast<double>(published::hash_size_max);
  std::vector<bool> tiny(n, false);
  for (std::size_t i : choose_indices(r, n, share_count(n, shape.tiny_table_share)))
    tiny[i] = true;
  std::vector<double> z(n);
  std::vector<double> body(n);  // log-normal with median 1, scaled below
  std::vector<double> tiny_rows(n);
  for (std::size_t i = 0; i < n; ++i) {
    z[i] = r.normal();
    body[i] = std::exp(shape.hash_log_sigma * z[i]);
    tiny_rows[i] = std::exp(r.uniform() * std::log(shape.tiny_rows_max));
  }
  // The largest body table sits at the published max, the smallest tiny one at the min.
  std::size_t at_max = n;
  std::size_t at_min = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (!tiny[i] && (at_max == n || z[i] > z[at_max])) at_max = i;
    if (tiny[i] && (at_min == n || tiny_rows[i] < tiny_rows[at_min])) at_min = i;
  }
  std::vector<std::int64_t> rows(n);
  auto fill = [&](double scale) {
    for (std::size_t i = 0; i < n; ++i) {
      const double v = tiny[i] ? tiny_rows[i] : max_rows * std::tanh(scale * body[i] / max_rows);
      rows[i] = std::max<std::int64_t>(published::hash_size_min, std::llround(v));
    }
    if (at_max < n) rows[at_max] = published::hash_size_max;
    if (at_min < n) rows[at_min] = published::hash_size_min;
  };
  auto mean_at = [&](double scale) {
    fill(scale);
    double sum = 0.0;
    for (auto v : rows)
      sum += static_cast<double>(v);
    return sum / static_cast<double>(n);
  };
  fill(solve_scale(mean_at, static_cast<double>(published::hash_size_mean), 1.0, 1e3 * max_rows));
  return rows;
}

// Pooling factors (mean lookups per bag, to 0.01) with the published max and
// min hit exactly and the published mean within rounding (AutoShard Table 1).
inline std::vector<double> draw_pooling_factors(std::size_t n, std::uint64_t seed,
                                                const pool_shape& shape = default_pool_shape) {
  rng r(derive_seed(seed, pooling_stream));
  std::vector<bool> unused(n, false);
  for (std::size_t i : choose_indices(r, n, share_count(n, shape.unused_share)))
    unused[i] = true;
  // Lomax(tail index a, scale 1) by inversion: (1 - u)^(-1/a) - 1.
  std::vector<double> base(n);
  for (auto& b : base)
    b = std::pow(1.0 - r.uniform(), -1.0 / shape.pf_tail_index) - 1.0;
  std::size_t at_max = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (!unused[i] && (at_max == n || base[i] > base[at_max])) at_max = i;
  }
  std::vector<double> pf(n);
  auto fill = [&](double scale) {
    for (std::size_t i = 0; i < n; ++i) {
      if (unused[i]) {
        pf[i] = published::pooling_factor_min;
        continue;
      }
      const double v = std::min(scale * base[i], published::pooling_factor_max);
      pf[i] = std::max(0.01, std::round(v * 100.0) / 100.0);
    }
    if (at_max < n) pf[at_max] = published::pooling_factor_max;
  };
  auto mean_at = [&](double scale) {
    fill(scale);
    double sum = 0.0;
    for (double v : pf)
      sum += v;
    return sum / static_cast<double>(n);
  };
  fill(solve_scale(mean_at, published::pooling_factor_mean, 1e-3, 1e5));
  return pf;
}

// The pooled unique-index histogram the pool aims at: the published
// col_size_hist, except that bins it rounds to 0.000 take the share that the
// published index_ratio_hist implies (unique share = access share x mean reuse
// / bin reuse). Those bins hold a quarter of all accesses: hot indices reused
// more than 512 times, up to beyond 32768 (AutoShard App. A.2: "most of the
// indices are accessed less than ten times, while some of them can reach" a
// number lost in our copy). Leaving them empty would lose the hot rows.
inline reuse_histogram target_col_size() {
  reuse_histogram t{};
  double sum = 0.0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    t[k] = published::col_size_hist[k] > 0.0
               ? published::col_size_hist[k]
               : published::index_ratio_hist[k] * published::mean_reuse / reuse_bin_middle(k);
    sum += t[k];
  }
  for (auto& v : t)
    v /= sum;
  return t;
}

// Moves a histogram up by `bins` (down when negative), splitting each bin's
// mass linearly between the two bins it lands on; mass beyond either end stays
// in the end bin.
inline reuse_histogram shift_bins(const reuse_histogram& h, double bins) noexcept {
  reuse_histogram out{};
  const double last = static_cast<double>(reuse_bin_count - 1);
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    const double x = std::clamp(static_cast<double>(k) + bins, 0.0, last);
    const double lo = std::floor(x);
    const double frac = x - lo;
    const auto j = static_cast<std::size_t>(lo);
    out[j] += h[k] * (1.0 - frac);
    if (frac > 0.0) out[j + 1] += h[k] * frac;
  }
  return out;
}

inline void normalize(reuse_histogram& h) noexcept {
  double sum = 0.0;
  for (double v : h)
    sum += v;
  if (sum <= 0.0) return;
  for (auto& v : h)
    v /= sum;
}

// Per-table reuse histograms (all zero for unused tables). Each is the target
// shifted by a random number of bins, further up when the table's lookups per
// row (batch x pooling factor / rows) exceed the target's mean reuse (a table
// cannot have fewer occurrences per unique index than lookups per row), times
// per-bin noise. Proportional fitting then rescales the bins of all tables
// alike until the pool, weighted by expected unique indices, matches the
// target; the tables keep their differences.
inline std::vector<reuse_histogram> draw_reuse_histograms(
    std::span<const std::int64_t> rows, std::span<const double> pooling_factors, std::uint64_t seed,
    const pool_shape& shape = default_pool_shape) {
  const std::size_t n = rows.size();
  const std::int64_t batch = published::batch_size;
  const reuse_histogram target = target_col_size();
  const double target_reuse = mean_reuse(target);
  rng r(derive_seed(seed, reuse_stream));
  std::vector<reuse_histogram> hists(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Same number of draws for every table, so one table's values never move another's.
    double shift = shape.shift_sigma_bins * r.normal();
    std::array<double, reuse_bin_count> noise{};
    for (auto& v : noise)
      v = r.normal();
    if (pooling_factors[i] <= 0.0) continue;
    const double lookups_per_row =
        static_cast<double>(batch) * pooling_factors[i] / static_cast<double>(rows[i]);
    shift += std::max(0.0, std::log2(lookups_per_row / target_reuse));
    reuse_histogram h = shift_bins(target, shift);
    for (std::size_t k = 0; k < reuse_bin_count; ++k)
      h[k] *= std::exp(shape.bin_noise_sigma * noise[k]);
    normalize(h);
    hists[i] = h;
  }
  for (int round = 0; round < shape.fit_rounds; ++round) {
    reuse_histogram pooled{};
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double u = expected_unique(rows[i], pooling_factors[i], hists[i], batch);
      if (u <= 0.0) continue;
      for (std::size_t k = 0; k < reuse_bin_count; ++k)
        pooled[k] += u * hists[i][k];
      total += u;
    }
    if (total <= 0.0) break;
    for (auto& v : pooled)
      v /= total;
    if (l1_distance(pooled, target) < 1e-9) break;
    reuse_histogram factor{};
    for (std::size_t k = 0; k < reuse_bin_count; ++k)
      factor[k] = pooled[k] > 0.0 ? target[k] / pooled[k] : 1.0;
    for (auto& h : hists) {
      for (std::size_t k = 0; k < reuse_bin_count; ++k)
        h[k] *= factor[k];
      normalize(h);
    }
  }
  return hists;
}

}  // namespace embplan::inline EMBPLAN_ABI::data::detail
