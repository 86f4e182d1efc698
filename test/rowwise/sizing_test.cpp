#include "embplan/rowwise/sizing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/rowwise/load.hpp"

using embplan::dtype;
using embplan::optimizer;
namespace rw = embplan::rowwise;

TEST_CASE("the chapter's terabyte table and its shards (§1, §2)") {
  // 2e9 rows x 128 x 4 bytes ~ 1.0e12 bytes; over 64 servers ~ 16 GB each.
  const auto bytes = rw::rowwise_table_bytes(2'000'000'000, 128, dtype::fp32);
  CHECK(bytes == 1'024'000'000'000ULL);
  CHECK(rw::rowwise_table_bytes(2'000'000'000, 128, dtype::fp16) == bytes / 2);
  CHECK(rw::rowwise_table_bytes(2'000'000'000, 128, dtype::int8) == bytes / 4);
  // Adam: two fp32 moments per weight; row-wise Adagrad: one fp32 per row.
  CHECK(rw::rowwise_table_bytes(10, 4, dtype::fp32, optimizer::adam) == 10 * 4 * 12);
  CHECK(rw::rowwise_table_bytes(10, 4, dtype::fp16, optimizer::rowwise_adagrad) == 10 * (8 + 4));
  CHECK(rw::rowwise_table_bytes(10, 4, dtype::fp32, optimizer::sgd) == 160);
  const auto s =
      rw::shards_needed(2'000'000'000, 128, dtype::fp32, optimizer::none, 16'000'000'000);
  CHECK(s.rows_per_shard == 31'250'000);
  CHECK(s.shards == 64);
  CHECK(rw::shards_needed(10, 4, dtype::fp32, optimizer::none, 16).shards == 10);
  CHECK(rw::shards_needed(10, 4, dtype::fp32, optimizer::none, 17).shards == 10);
  CHECK(rw::shards_needed(10, 4, dtype::fp32, optimizer::none, 32).shards == 5);
  CHECK(rw::shards_needed(11, 4, dtype::fp32, optimizer::none, 32).shards == 6);
}

TEST_CASE("a hot-row cache serves the hottest rows' share of lookups") {
  const std::vector<rw::id_hits> freq{{7, 50}, {3, 30}, {1, 20}};
  CHECK(rw::cache_hit_fraction(freq, 0) == 0.0);
  CHECK(rw::cache_hit_fraction(freq, 1) == doctest::Approx(0.5));
  CHECK(rw::cache_hit_fraction(freq, 2) == doctest::Approx(0.8));
  CHECK(rw::cache_hit_fraction(freq, 100) == doctest::Approx(1.0));
}

TEST_CASE("quotient-remainder: the chapter's exercise, N = 1e9") {
  const auto q = rw::optimal_quotient_remainder(1'000'000'000, 128, dtype::fp32);
  CHECK(q.m == 31'623);
  CHECK(q.quotient_rows == 31'623);
  CHECK(q.compressed_bytes == (31'623ULL + 31'623ULL) * 128 * 4);
  CHECK(q.ratio == doctest::Approx(1e9 / 63'246.0));
  CHECK(q.remainder_collision_probability == doctest::Approx(1.0 / 31'623).epsilon(1e-4));
}

TEST_CASE("the optimal m agrees with brute force") {
  for (std::int64_t n = 1; n <= 3'000; n += (n < 200 ? 1 : 37)) {
    std::int64_t best = 2 * n + 1;
    for (std::int64_t m = 1; m <= n; ++m)
      best = std::min(best, m + (n + m - 1) / m);
    const auto q = rw::optimal_quotient_remainder(n, 4, dtype::fp32);
    CAPTURE(n);
    CHECK(q.m + q.quotient_rows == best);
    CHECK(q.quotient_rows <= q.m);
    CHECK((q.m - 1) * (q.m - 1) < n);  // ceil(sqrt(n))
    CHECK(q.m * q.m >= n);
  }
  // Exact collision probability for N = 5, m = 2: residues {0,2,4}, {1,3}: (6 + 2) / 20.
  CHECK(rw::quotient_remainder(5, 4, dtype::fp32, 2).remainder_collision_probability ==
        doctest::Approx(0.4));
}

TEST_CASE("bad input: a budget below one row, m outside [1, rows]") {
  CHECK_THROWS_WITH_AS(
      (void)rw::shards_needed(100, 128, dtype::fp32, optimizer::adam, 1'000),
      doctest::Contains("field 'budget_bytes' = 1000: expected at least one row (1536 bytes"),
      embplan::error);
  CHECK_THROWS_WITH_AS((void)rw::quotient_remainder(100, 4, dtype::fp32, 0),
                       doctest::Contains("field 'm' = 0"), embplan::error);
  CHECK_THROWS_WITH_AS((void)rw::rowwise_table_bytes(-5, 4, dtype::fp32),
                       doctest::Contains("field 'rows' = -5"), embplan::error);
}
