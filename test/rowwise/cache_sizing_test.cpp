#include "embplan/rowwise/cache_sizing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/storage.hpp"
#include "embplan/core/table_spec.hpp"

using embplan::memory_tier;
using embplan::optimizer;
using embplan::reuse_bin_count;
using embplan::reuse_histogram;
namespace rw = embplan::rowwise;

namespace {

using bin_rows = std::array<int, reuse_bin_count>;

reuse_histogram histogram_of(const bin_rows& n) {
  double total = 0.0;
  for (int v : n)
    total += v;
  reuse_histogram h{};
  for (std::size_t k = 0; k < reuse_bin_count; ++k)
    h[k] = n[k] / total;
  return h;
}

// Brute force over explicit rows: n[k] rows each read reuse_bin_middle(k)
// times, sorted hottest first; caching the c hottest, a cached row misses on
// its first read only, an uncached row on every read.
struct explicit_rows {
  std::vector<double> reads;  // per row, hottest first
  double lookups = 0.0;
};

explicit_rows rows_of(const bin_rows& n) {
  explicit_rows out;
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    for (int i = 0; i < n[k]; ++i) {
      out.reads.push_back(embplan::reuse_bin_middle(k));
      out.lookups += embplan::reuse_bin_middle(k);
    }
  }
  std::sort(out.reads.begin(), out.reads.end(), std::greater<>());
  return out;
}

double brute_misses(const explicit_rows& r, std::size_t c) {
  double misses = 0.0;
  for (std::size_t i = 0; i < r.reads.size(); ++i)
    misses += i < c ? 1.0 : r.reads[i];
  return misses;
}

std::vector<bin_rows> histograms() {
  std::vector<bin_rows> out;
  bin_rows uniform{};
  uniform.fill(3);
  out.push_back(uniform);
  bin_rows one_bin{};
  one_bin[5] = 40;
  out.push_back(one_bin);
  bin_rows read_once{};
  read_once[0] = 30;
  out.push_back(read_once);
  bin_rows hottest{};
  hottest[16] = 4;
  out.push_back(hottest);
  bin_rows geometric{};
  for (std::size_t k = 0; k < 12; ++k)
    geometric[k] = 1 << (11 - k);
  out.push_back(geometric);
  std::mt19937 gen(24);
  for (int i = 0; i < 6; ++i) {
    bin_rows r{};
    for (auto& v : r)
      v = static_cast<int>(gen() % 4 == 0 ? 0 : gen() % 50);
    r[gen() % reuse_bin_count] += 1;  // never all zero
    out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("the miss-ratio curve equals brute force over explicit rows") {
  for (const auto& n : histograms()) {
    const auto rows = rows_of(n);
    const rw::miss_ratio_curve curve(histogram_of(n), rows.lookups);
    CAPTURE(rows.reads.size());
    CHECK(curve.unique_rows() == doctest::Approx(static_cast<double>(rows.reads.size())));
    for (std::size_t c = 0; c <= rows.reads.size() + 3; ++c) {
      CAPTURE(c);
      const double brute = brute_misses(rows, c);
      CHECK(curve.misses(static_cast<double>(c)) == doctest::Approx(brute).epsilon(1e-9));
      CHECK(curve.miss_ratio(static_cast<double>(c)) ==
            doctest::Approx(brute / rows.lookups).epsilon(1e-9));
    }
    // The floor: every row's first touch.
    CHECK(curve.min_miss_ratio() ==
          doctest::Approx(static_cast<double>(rows.reads.size()) / rows.lookups).epsilon(1e-9));
  }
}

TEST_CASE("a simulated trace: equal at bin edges, the model never below within a bin") {
  // Integer read counts spread evenly over each bin's integers (bin k >= 1
  // holds 2^(k-1)+1 .. 2^k), so each bin's mean is reuse_bin_middle(k); the
  // lookups are shuffled into a trace and a cache of the c hottest rows
  // (explicit set) is replayed over it.
  const std::array<int, 6> per_bin{7, 5, 4, 8, 16, 32};  // bins 0..5, multiples of the bin widths
  std::vector<int> counts;
  bin_rows n{};
  for (std::size_t k = 0; k < per_bin.size(); ++k) {
    n[k] = per_bin[k];
    const int lo = k == 0 ? 1 : (1 << (k - 1)) + 1;
    const int width = k == 0 ? 1 : 1 << (k - 1);
    for (int i = 0; i < per_bin[k]; ++i)
      counts.push_back(lo + i % width);
  }
  std::vector<int> trace;
  for (std::size_t row = 0; row < counts.size(); ++row)
    trace.insert(trace.end(), static_cast<std::size_t>(counts[row]), static_cast<int>(row));
  std::mt19937 gen(7);
  std::shuffle(trace.begin(), trace.end(), gen);
  std::vector<int> by_heat(counts.size());
  for (std::size_t i = 0; i < by_heat.size(); ++i)
    by_heat[i] = static_cast<int>(i);
  std::stable_sort(by_heat.begin(), by_heat.end(),
                   [&](int a, int b) { return counts[a] > counts[b]; });

  const rw::miss_ratio_curve curve(histogram_of(n), static_cast<double>(trace.size()));
  std::vector<double> edges;  // cumulative rows of bins 5, 4, ..., 1
  for (const auto& p : curve.points())
    edges.push_back(p.cache_rows);
  for (std::size_t c = 0; c <= counts.size(); ++c) {
    const std::set<int> cached(by_heat.begin(), by_heat.begin() + static_cast<std::ptrdiff_t>(c));
    std::set<int> seen;
    double misses = 0.0;
    for (int row : trace) {
      if (!cached.count(row) || !seen.count(row)) misses += 1.0;
      seen.insert(row);
    }
    CAPTURE(c);
    const bool at_edge = std::any_of(edges.begin(), edges.end(), [&](double e) {
      return std::abs(e - static_cast<double>(c)) < 1e-9;
    });
    if (at_edge || c >= static_cast<std::size_t>(curve.saturation_rows())) {
      CHECK(curve.misses(static_cast<double>(c)) == doctest::Approx(misses).epsilon(1e-9));
    } else {
      CHECK(curve.misses(static_cast<double>(c)) >= misses - 1e-9);
    }
  }
}

TEST_CASE("the curve is non-increasing, piecewise linear between its points, flat after") {
  for (const auto& n : histograms()) {
    const auto h = histogram_of(n);
    const rw::miss_ratio_curve curve(h, 12'345.0);
    const auto& pts = curve.points();
    REQUIRE(!pts.empty());
    CHECK(pts.front().cache_rows == 0.0);
    for (std::size_t j = 1; j < pts.size(); ++j) {
      CHECK(pts[j].cache_rows > pts[j - 1].cache_rows);
      CHECK(pts[j].miss_ratio <= pts[j - 1].miss_ratio + 1e-15);
      const double mid = (pts[j].cache_rows + pts[j - 1].cache_rows) / 2.0;
      CHECK(curve.miss_ratio(mid) ==
            doctest::Approx((pts[j].miss_ratio + pts[j - 1].miss_ratio) / 2.0).epsilon(1e-9));
    }
    double last = 1.0 + 1e-12;
    for (double c = 0.0; c <= curve.saturation_rows() * 1.5 + 1.0; c += 7.3) {
      const double m = curve.miss_ratio(c);
      CHECK(m <= last + 1e-15);
      CHECK(m >= curve.min_miss_ratio() - 1e-15);
      last = m;
    }
    CHECK(curve.min_miss_ratio() == doctest::Approx(1.0 / embplan::mean_reuse(h)).epsilon(1e-9));
    CHECK(curve.miss_ratio(curve.saturation_rows() * 4.0) ==
          doctest::Approx(curve.min_miss_ratio()).epsilon(1e-12));
    // Bin 0's rows are read once: the curve is flat over them.
    CHECK(curve.saturation_rows() ==
          doctest::Approx(curve.unique_rows() * (1.0 - h[0])).epsilon(1e-9));
  }
}

TEST_CASE("the smallest cache for a target miss ratio inverts the curve") {
  for (const auto& n : histograms()) {
    const rw::miss_ratio_curve curve(histogram_of(n), 50'000.0);
    const double top = curve.miss_ratio(0.0);
    const double floor = curve.min_miss_ratio();
    for (int i = 0; i <= 20; ++i) {
      const double target = floor + (top - floor) * i / 20.0;
      CAPTURE(target);
      const double c = curve.rows_for_miss_ratio(target);
      CHECK(curve.miss_ratio(c) <= target + 1e-12);
      if (c > 1e-9) CHECK(curve.miss_ratio(c * (1.0 - 1e-6)) > target);
    }
  }
}

TEST_CASE("edge cases: uniform histogram, one bin, no reuse, no lookups, unused table") {
  reuse_histogram uniform{};
  uniform.fill(1.0 / reuse_bin_count);
  const rw::miss_ratio_curve u(uniform, 1e6);
  CHECK(u.points().size() == reuse_bin_count);  // c = 0 and one edge per bin 16..1
  CHECK(u.min_miss_ratio() == doctest::Approx(1.0 / embplan::mean_reuse(uniform)));

  reuse_histogram one{};
  one[3] = 1.0;  // every row read reuse_bin_middle(3) = 6.5 times
  const rw::miss_ratio_curve o(one, 6'500.0);
  CHECK(o.unique_rows() == doctest::Approx(1'000.0));
  CHECK(o.points().size() == 2);
  CHECK(o.miss_ratio(500.0) == doctest::Approx((500.0 + 500.0 * 6.5) / 6'500.0));
  CHECK(o.min_miss_ratio() == doctest::Approx(1.0 / 6.5));
  CHECK(o.rows_for_miss_ratio(1.0) == 0.0);

  reuse_histogram once{};
  once[0] = 1.0;
  const rw::miss_ratio_curve r(once, 1'000.0);
  CHECK(r.saturation_rows() == 0.0);
  CHECK(r.miss_ratio(1e9) == 1.0);
  CHECK_THROWS_WITH_AS((void)r.rows_for_miss_ratio(0.5),
                       doctest::Contains("field 'target_miss_ratio' = 0.5: expected at least 1"),
                       embplan::error);

  const rw::miss_ratio_curve none(one, 0.0);
  CHECK(none.miss_ratio(0.0) == 0.0);
  CHECK(none.rows_for_miss_ratio(0.0) == 0.0);

  const rw::miss_ratio_curve unused(reuse_histogram{}, 100.0);
  CHECK(unused.miss_ratio(1e6) == 1.0);
  CHECK(unused.unique_rows() == 100.0);
}

namespace {

// 10,000 rows of 32 fp32 columns; a batch of 1,000 bags of 10 lookups each:
// 10,000 lookups, 1,000 unique rows per batch (half read 2x, half 18x).
embplan::table_spec sized_table() {
  embplan::table_spec t;
  t.name = "t";
  t.rows = 10'000;
  t.dim = 32;
  t.pooling_factor = 10.0;
  t.reuse_hist[1] = 0.5;  // 2 reads
  t.reuse_hist[5] = 0.5;  // 24.5 reads
  return t;
}

}  // namespace

TEST_CASE("a table's smallest cache for a miss ratio, as a load factor") {
  const auto t = sized_table();
  const auto curve = rw::table_miss_ratio_curve(t, 1'000);
  CHECK(curve.lookups() == 10'000.0);
  const double unique = 10'000.0 / embplan::mean_reuse(t.reuse_hist);
  CHECK(curve.unique_rows() == doctest::Approx(unique));
  // The hot half alone: misses = unique/2 first touches + unique/2 x 2 cold reads.
  const double hot = unique / 2.0;
  const double target = (hot + hot * 2.0) / 10'000.0;
  const auto s = rw::smallest_cache_for_miss_ratio(t, 1'000, target);
  CHECK(s.cache_rows == static_cast<std::uint64_t>(std::ceil(hot - 1e-9)));
  CHECK(s.load_factor == doctest::Approx(static_cast<double>(s.cache_rows) / 10'000.0));
  CHECK(s.miss_ratio <= target);
  CHECK(curve.miss_ratio(static_cast<double>(s.cache_rows - 1)) > target);
  CHECK(rw::smallest_cache_for_miss_ratio(t, 1'000, 1.0).cache_rows == 0);

  // A window touching more rows than the table has: capped at every row.
  auto tiny = t;
  tiny.rows = 50;
  CHECK_THROWS_WITH_AS((void)rw::smallest_cache_for_miss_ratio(tiny, 1'000, 0.2),
                       doctest::Contains("with all its 50 rows cached"), embplan::error);
  CHECK_THROWS_WITH_AS((void)rw::smallest_cache_for_miss_ratio(t, 1'000, 0.01),
                       doctest::Contains("field 'target_miss_ratio' = 0.01: expected at least"),
                       embplan::error);
}

TEST_CASE("under an HBM budget: HBM if the table fits, else the largest useful cache, else host") {
  const auto t = sized_table();
  const std::int64_t batch = 1'000;
  const auto opt = optimizer::rowwise_adagrad;
  const auto in_hbm = embplan::table_storage(t, batch, opt, {.tier = memory_tier::hbm});
  auto c = rw::cheapest_tier_within_budget(t, batch, opt, in_hbm.total().hbm_bytes);
  CHECK(c.placement.tier == memory_tier::hbm);
  CHECK(c.cache.miss_ratio == 0.0);
  CHECK(c.storage == in_hbm);

  const auto curve = rw::table_miss_ratio_curve(t, batch);
  const auto useful = static_cast<std::uint64_t>(std::ceil(curve.saturation_rows()));
  const auto slot = embplan::cache_slot_bytes(t.dim, t.weight_dtype, embplan::cache_policy::lru);
  // Brute force over every cache size: the fewest misses within the budget,
  // and of those the fewest rows.
  // HBM at any cache size: inputs and outputs 10,000 x 8 + 1,001 x 8 + 2 x
  // 1,000 x 32 x 4 = 344,008 bytes and the int32 table map 40,000; each slot
  // 128 bytes of row + 16 of state. 755 slots hold every reused row.
  const std::uint64_t fixed = 384'008;
  REQUIRE(slot == 144);
  REQUIRE(useful == 755);
  for (std::uint64_t budget : {in_hbm.total().hbm_bytes - 1, fixed + 144 * 100, fixed + 144 * 5 + 7,
                               fixed + 144, fixed + 144 * 2'000}) {
    CAPTURE(budget);
    c = rw::cheapest_tier_within_budget(t, batch, opt, budget);
    REQUIRE(c.placement.tier == memory_tier::uvm_caching);
    CHECK(c.storage.total().hbm_bytes <= budget);
    std::uint64_t best_rows = 0;
    double best = 2.0;
    for (std::uint64_t rows = 1; rows <= static_cast<std::uint64_t>(t.rows); ++rows) {
      const embplan::tier_placement p{.tier = memory_tier::uvm_caching,
                                      .load_factor = static_cast<double>(rows) / 1e4};
      if (embplan::table_storage(t, batch, opt, p).total().hbm_bytes > budget) break;
      const double m = curve.miss_ratio(static_cast<double>(rows));
      if (m < best - 1e-15) {
        best = m;
        best_rows = rows;
      }
    }
    CHECK(c.cache.cache_rows == best_rows);
    CHECK(c.cache.miss_ratio == doctest::Approx(best));
    CHECK(c.cache.cache_rows <= useful);
    CHECK(embplan::device_rows(c.placement, t.rows) == c.cache.cache_rows);
    if (c.cache.cache_rows < useful) CHECK(c.storage.total().hbm_bytes + slot > budget);
  }

  // Below one cached row: host.
  c = rw::cheapest_tier_within_budget(t, batch, opt, fixed + 143);
  CHECK(c.placement.tier == memory_tier::host);
  CHECK(c.cache.cache_rows == 0);
  CHECK(c.cache.miss_ratio == 1.0);
  // Below the batch's inputs and outputs: nothing fits.
  CHECK_THROWS_WITH_AS((void)rw::cheapest_tier_within_budget(t, batch, opt, 1'000),
                       doctest::Contains("field 'hbm_budget_bytes' = 1000: expected at least"),
                       embplan::error);
  // No reuse: a cache lowers no cost, host.
  auto cold = t;
  cold.reuse_hist = {};
  cold.reuse_hist[0] = 1.0;
  CHECK(rw::cheapest_tier_within_budget(cold, batch, opt, 1'000'000).placement.tier ==
        memory_tier::host);
}

TEST_CASE("bad input names the field and the value") {
  reuse_histogram h{};
  h[1] = 1.0;
  CHECK_THROWS_WITH_AS((void)rw::miss_ratio_curve(h, -1.0),
                       doctest::Contains("field 'lookups' = -1"), embplan::error);
  h[3] = -0.5;
  CHECK_THROWS_WITH_AS((void)rw::miss_ratio_curve(h, 10.0),
                       doctest::Contains("field 'reuse_hist.bin_3' = -0.5"), embplan::error);
  h[3] = 0.0;
  const rw::miss_ratio_curve curve(h, 10.0);
  CHECK_THROWS_WITH_AS((void)curve.rows_for_miss_ratio(1.5),
                       doctest::Contains("field 'target_miss_ratio' = 1.5"), embplan::error);
  const auto t = sized_table();
  CHECK_THROWS_WITH_AS((void)rw::table_miss_ratio_curve(t, 0),
                       doctest::Contains("field 'batch_size' = 0"), embplan::error);
  auto bad = t;
  bad.rows = 0;
  CHECK_THROWS_WITH_AS((void)rw::smallest_cache_for_miss_ratio(bad, 10, 0.5),
                       doctest::Contains("rows' = 0"), embplan::error);
}
