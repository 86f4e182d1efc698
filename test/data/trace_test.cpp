#include "embplan/data/trace.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "embplan/data/detail/reuse.hpp"
#include "embplan/data/features.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/trace_check.hpp"

#include "support/message_of.hpp"

namespace {

using embplan::reuse_bin_count;
using embplan::reuse_histogram;
using embplan::table_spec;
using embplan::data::bag_trace;
using embplan::data::extract_table_spec;
using embplan::data::generate_tbe_trace;
using embplan::data::generate_trace;
using embplan::data::trace_options;
using embplan::data::detail::l1_distance;

table_spec make_spec(std::int64_t rows, double pf, reuse_histogram hist) {
  table_spec t;
  t.name = "t";
  t.rows = rows;
  t.dim = 16;
  t.pooling_factor = pf;
  t.reuse_hist = hist;
  return t;
}

// Reuse spread over bins 0..6, like a mid-sized MetaSyn table.
reuse_histogram spread_hist() {
  reuse_histogram h{};
  h[0] = 0.55;
  h[1] = 0.15;
  h[2] = 0.1;
  h[3] = 0.08;
  h[4] = 0.06;
  h[5] = 0.04;
  h[6] = 0.02;
  return h;
}

void check_well_formed(const bag_trace& t, std::int64_t batch, std::int64_t rows) {
  const std::array<std::int64_t, 1> r{rows};
  CHECK_NOTHROW(embplan::data::validate_tbe_trace(t.indices, t.offsets, batch, r));
}

// Unique rows the histogram asks for at this batch size (before the rows cap).
double expected_unique(const table_spec& t, std::int64_t batch) {
  return std::round(static_cast<double>(batch) * t.pooling_factor) /
         embplan::mean_reuse(t.reuse_hist);
}

}  // namespace

TEST_CASE("trace: reuse bins in whole numbers agree with table_spec's bins") {
  using embplan::data::detail::reuse_bin_counts;
  using embplan::data::detail::reuse_bin_of;
  CHECK(reuse_bin_of(1) == 0);
  CHECK(reuse_bin_of(2) == 1);
  CHECK(reuse_bin_of(3) == 2);
  CHECK(reuse_bin_of(4) == 2);
  CHECK(reuse_bin_of(5) == 3);
  CHECK(reuse_bin_of(32768) == 15);
  CHECK(reuse_bin_of(32769) == 16);
  CHECK(reuse_bin_of(std::uint64_t{1} << 40) == 16);
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    const auto r = reuse_bin_counts(k);
    CHECK(reuse_bin_of(static_cast<std::uint64_t>(r.lo)) == k);
    CHECK(reuse_bin_of(static_cast<std::uint64_t>(r.hi)) == k);
    if (k > 0) CHECK(reuse_bin_of(static_cast<std::uint64_t>(r.lo - 1)) == k - 1);
    // Uniform draws in the range average what mean_reuse assumes for the bin.
    CHECK(static_cast<double>(r.lo + r.hi) / 2.0 == doctest::Approx(embplan::reuse_bin_middle(k)));
  }
}

TEST_CASE("trace: distinct rows are distinct, in range, and cover every sampling path") {
  using embplan::data::detail::distinct_rows;
  embplan::rng g(5);
  // dense bitmap, dense complement (k > rows / 2), sparse sorted draws, all rows
  for (const auto& [rows, k] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1000, 100}, {1000, 900}, {10'000'000, 5000}, {50, 50}}) {
    const auto v = distinct_rows(rows, k, g);
    CHECK(static_cast<std::int64_t>(v.size()) == k);
    const std::set<std::int64_t> s(v.begin(), v.end());
    CHECK(s.size() == v.size());
    CHECK(*s.begin() >= 0);
    CHECK(*s.rbegin() < rows);
    // Shuffled, not sorted: sorted output would tie row ids to counts.
    if (k > 10) CHECK_FALSE(std::is_sorted(v.begin(), v.end()));
  }
}

TEST_CASE("trace: a table with no lookups gives an empty trace") {
  reuse_histogram zero{};
  for (const auto& t : {make_spec(1000, 0.0, spread_hist()), make_spec(1000, 5.0, zero)}) {
    const auto tr = generate_trace(t, {.batch_size = 64, .seed = 1});
    CHECK(tr.indices.empty());
    REQUIRE(tr.offsets.size() == 65);
    CHECK(std::all_of(tr.offsets.begin(), tr.offsets.end(), [](auto o) { return o == 0; }));
    const auto back = extract_table_spec(tr.indices, tr.offsets);
    CHECK(back.pooling_factor == 0.0);
    CHECK(back.reuse_hist == zero);
  }
}

TEST_CASE("trace: spec -> trace -> spec round trip on hand-made tables") {
  for (const std::int64_t batch : {512, 2048, 4096}) {
    for (const double pf : {0.7, 3.3, 19.0}) {
      CAPTURE(batch);
      CAPTURE(pf);
      const auto spec = make_spec(2'000'000, pf, spread_hist());
      const auto tr = generate_trace(spec, {.batch_size = batch, .seed = 11});
      check_well_formed(tr, batch, spec.rows);
      const auto back = extract_table_spec(tr.indices, tr.offsets);
      // Lookups are round(B x pf): the pooling factor comes back within 1 / (2B).
      CHECK(static_cast<std::int64_t>(tr.indices.size()) ==
            std::llround(static_cast<double>(batch) * pf));
      CHECK(std::abs(back.pooling_factor - pf) <= 0.5 / static_cast<double>(batch) + 1e-12);
      CHECK(back.rows <= spec.rows);
      // Per-bin shares are rounded onto whole rows: L1 about bins / unique
      // rows; here >= 230 unique rows, 7 bins.
      CHECK(l1_distance(back.reuse_hist, spec.reuse_hist) <= 0.05);
    }
  }
}

TEST_CASE("trace: round trip on synthetic-pool tables, small tables included") {
  const auto pool = embplan::data::synthetic_pool();
  constexpr std::int64_t batch = 1024;
  std::size_t matched = 0;
  std::size_t small = 0;
  for (std::size_t i = 0; i < pool.size(); i += 7) {
    const auto& spec = pool[i];
    CAPTURE(i);
    // Keep the test quick: skip the few tables with a million lookups.
    if (spec.pooling_factor > 60.0) continue;
    const auto tr = generate_trace(spec, {.batch_size = batch, .seed = i});
    check_well_formed(tr, batch, spec.rows);
    const auto back = extract_table_spec(tr.indices, tr.offsets);
    CHECK(std::abs(back.pooling_factor - spec.pooling_factor) <= 0.5 / batch + 1e-12);
    CHECK(back.rows <= spec.rows);
    if (tr.indices.empty()) continue;
    const double unique = expected_unique(spec, batch);
    if (unique > static_cast<double>(spec.rows)) {
      // Too few rows for the histogram: rows occur more often than it says.
      const std::set<std::int64_t> distinct(tr.indices.begin(), tr.indices.end());
      CHECK(static_cast<std::int64_t>(distinct.size()) <= spec.rows);
      ++small;
    } else if (unique >= 100.0) {
      // Measured over the whole pool at B = 512..4096: max L1 0.02 from 100 unique rows on.
      CHECK(l1_distance(back.reuse_hist, spec.reuse_hist) <= 0.05);
      ++matched;
    }
  }
  CHECK(matched >= 60);
}

TEST_CASE("trace: a table with fewer rows than its histogram needs degrades gracefully") {
  reuse_histogram all_once{};
  all_once[0] = 1.0;  // asks for B x pf unique rows
  const auto spec = make_spec(40, 5.0, all_once);
  const auto tr = generate_trace(spec, {.batch_size = 256, .seed = 3});
  check_well_formed(tr, 256, 40);
  CHECK(tr.indices.size() == 1280);
  const std::set<std::int64_t> distinct(tr.indices.begin(), tr.indices.end());
  CHECK(distinct.size() == 40);
  const auto back = extract_table_spec(tr.indices, tr.offsets);
  CHECK(back.pooling_factor == doctest::Approx(5.0));
  CHECK(back.rows <= 40);
}

TEST_CASE("trace: bag lengths have the pooling factor as mean and a dispersed spread") {
  const auto spec = make_spec(100'000, 4.0, spread_hist());
  const auto tr = generate_trace(spec, {.batch_size = 4096, .seed = 9});
  std::vector<std::int64_t> len(4096);
  for (std::size_t b = 0; b < len.size(); ++b)
    len[b] = tr.offsets[b + 1] - tr.offsets[b];
  const double mean = static_cast<double>(std::accumulate(len.begin(), len.end(), 0LL)) / 4096.0;
  CHECK(mean == doctest::Approx(4.0));
  double var = 0.0;
  for (const auto l : len)
    var += (static_cast<double>(l) - mean) * (static_cast<double>(l) - mean);
  var /= 4096.0;
  // Spacings of uniform cut points: about geometric, variance ~ pf (pf + 1) = 20.
  CHECK(var > 12.0);
  CHECK(var < 30.0);
  const auto empty = std::count(len.begin(), len.end(), 0);
  CHECK(empty > 4096 / 10);  // ~ 1 / (pf + 1) of the bags
}

TEST_CASE("trace: lookups of a hot row are spread over the batch, not clustered") {
  reuse_histogram h{};
  h[0] = 0.9;
  h[10] = 0.1;  // about 1 row in 10 occurs 513..1024 times
  const auto spec = make_spec(1'000'000, 20.0, h);
  const auto tr = generate_trace(spec, {.batch_size = 4096, .seed = 2});
  // The most frequent row.
  std::vector<std::int64_t> sorted = tr.indices;
  std::sort(sorted.begin(), sorted.end());
  std::int64_t hot = -1;
  std::int64_t best = 0;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i])
      ++j;
    if (static_cast<std::int64_t>(j - i) > best) {
      best = static_cast<std::int64_t>(j - i);
      hot = sorted[i];
    }
    i = j;
  }
  REQUIRE(best > 500);
  const auto half = static_cast<std::ptrdiff_t>(tr.indices.size() / 2);
  const auto first_half = std::count(tr.indices.begin(), tr.indices.begin() + half, hot);
  // Binomial(best, 1/2): 6 standard deviations either side.
  const double sd = std::sqrt(static_cast<double>(best)) / 2.0;
  CHECK(std::abs(static_cast<double>(first_half) - static_cast<double>(best) / 2.0) < 6.0 * sd);
}

TEST_CASE("trace: same seed same trace; another seed another trace") {
  const auto spec = make_spec(50'000, 6.5, spread_hist());
  const auto a = generate_trace(spec, {.batch_size = 1024, .seed = 42});
  const auto b = generate_trace(spec, {.batch_size = 1024, .seed = 42});
  const auto c = generate_trace(spec, {.batch_size = 1024, .seed = 43});
  CHECK(a.indices == b.indices);
  CHECK(a.offsets == b.offsets);
  CHECK(a.indices != c.indices);
  CHECK(a.offsets != c.offsets);
  // Pinned: the generator is fully specified (no std:: distributions), so these
  // values hold on every platform and standard library.
  REQUIRE(a.indices.size() == 6656);
  CHECK(a.indices[0] == 43515);
  CHECK(a.indices[1] == 14020);
  CHECK(a.indices.back() == 47773);
  CHECK(a.offsets[512] == 3405);
}

TEST_CASE("trace: TBE layout concatenates per-table traces with derived seeds") {
  std::vector<table_spec> tables = {make_spec(1000, 2.0, spread_hist()),
                                    make_spec(500, 0.0, spread_hist()),
                                    make_spec(80'000, 7.5, spread_hist())};
  const trace_options o{.batch_size = 128, .seed = 17};
  const auto tbe = generate_tbe_trace(tables, o);
  CHECK(tbe.batch_size == 128);
  REQUIRE(tbe.offsets.size() == 3 * 128 + 1);
  const std::array<std::int64_t, 3> rows{1000, 500, 80'000};
  CHECK_NOTHROW(embplan::data::validate_tbe_trace(tbe.indices, tbe.offsets, 128, rows));
  std::size_t base = 0;
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const auto one =
        generate_trace(tables[t], {.batch_size = 128, .seed = embplan::derive_seed(o.seed, t)});
    for (std::size_t b = 0; b <= 128; ++b)
      CHECK(tbe.offsets[t * 128 + b] == static_cast<std::int64_t>(base) + one.offsets[b]);
    CHECK(std::equal(one.indices.begin(), one.indices.end(), tbe.indices.begin() + base));
    base += one.indices.size();
  }
  CHECK(base == tbe.indices.size());

  // A table's trace does not depend on its neighbours.
  auto changed = tables;
  changed[0].pooling_factor = 9.0;
  const auto other = generate_tbe_trace(changed, o);
  const auto last_begin = static_cast<std::size_t>(tbe.offsets[2 * 128]);
  const auto other_begin = static_cast<std::size_t>(other.offsets[2 * 128]);
  CHECK(std::equal(tbe.indices.begin() + last_begin, tbe.indices.end(),
                   other.indices.begin() + other_begin, other.indices.end()));

  // for_each_trace visits the same traces in order.
  std::size_t visited = 0;
  embplan::data::for_each_trace(tables, o, [&](std::size_t i, const bag_trace& t) {
    CHECK(i == visited++);
    CHECK(t.offsets.size() == 129);
  });
  CHECK(visited == 3);
  // The specs extracted from the TBE batch are the per-table ones.
  const std::array<std::int32_t, 3> dims{16, 16, 16};
  const auto specs = embplan::data::extract_tbe_specs(tbe.indices, tbe.offsets, 3, dims);
  CHECK(specs[1].pooling_factor == 0.0);
  CHECK(specs[2].pooling_factor == doctest::Approx(7.5).epsilon(0.01));
}

TEST_CASE("trace: bad options and specs name the field and the value") {
  const auto spec = make_spec(1000, 2.0, spread_hist());
  auto msg = embplan::test::message_of([&] { (void)generate_trace(spec, {.batch_size = 0}); });
  CHECK(msg.find("'batch_size' = 0") != std::string::npos);
  msg = embplan::test::message_of(
      [&] { (void)generate_tbe_trace(std::vector{spec}, {.batch_size = -3}); });
  CHECK(msg.find("'batch_size' = -3") != std::string::npos);

  auto bad = spec;
  bad.rows = 0;
  msg = embplan::test::message_of([&] { (void)generate_trace(bad); });
  CHECK(msg.find("'t.rows' = 0") != std::string::npos);
  bad = spec;
  bad.pooling_factor = -1.0;
  msg = embplan::test::message_of([&] {
    (void)generate_tbe_trace(std::vector{spec, bad}, {.batch_size = 8});
  });
  CHECK(msg.find("'tables[1].pooling_factor' = -1") != std::string::npos);
  bad = spec;
  bad.pooling_factor = std::numeric_limits<double>::quiet_NaN();
  CHECK(embplan::test::message_of([&] { (void)generate_trace(bad); }).find("pooling_factor") !=
        std::string::npos);
  bad = spec;
  bad.reuse_hist[3] = -0.5;
  msg = embplan::test::message_of([&] { (void)generate_trace(bad); });
  CHECK(msg.find("'t.bin_3' = -0.5") != std::string::npos);
}
