#include "embplan/rowwise/partition.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"

using embplan::rowwise::hash_partition;
using embplan::rowwise::range_partition;

TEST_CASE("hash partition of the chapter's demo: 20,000 rows over 4 shards, 5,000 each") {
  const hash_partition p(20'000, 4);
  CHECK(p.multiplier() == 2654435761ULL);
  for (std::uint32_t s = 0; s < 4; ++s)
    CHECK(p.rows_in(s) == 5'000);
  // (id * A) mod S, as the chapter computes it with Python integers.
  for (std::int64_t id : {0, 1, 2, 3, 7, 19'999}) {
    const auto expected =
        static_cast<std::uint32_t>((static_cast<embplan::detail::uint128>(id) * 2654435761ULL) % 4);
    CHECK(p.shard_of(id) == expected);
  }
}

TEST_CASE("hash partition: global -> (shard, local) -> global is a bijection") {
  for (const std::uint64_t shards : {1u, 3u, 7u, 64u}) {
    const std::int64_t rows = 1'003;
    const hash_partition p(rows, shards, 0x9e3779b97f4a7c15ULL | 1);
    std::vector<std::vector<int>> seen(shards);
    std::int64_t total = 0;
    for (std::uint32_t s = 0; s < shards; ++s) {
      seen[s].assign(static_cast<std::size_t>(p.rows_in(s)), 0);
      total += p.rows_in(s);
    }
    CHECK(total == rows);
    for (std::int64_t id = 0; id < rows; ++id) {
      const auto loc = p.locate(id);
      REQUIRE(loc.shard < shards);
      REQUIRE(loc.local < p.rows_in(loc.shard));
      ++seen[loc.shard][static_cast<std::size_t>(loc.local)];
      CHECK(p.global_id(loc.shard, loc.local) == id);
    }
    for (const auto& v : seen)
      for (int c : v)
        CHECK(c == 1);
  }
}

TEST_CASE("hash partition of a billion-row table needs no per-row state") {
  const hash_partition p(2'000'000'000, 64);
  std::int64_t total = 0;
  for (std::uint32_t s = 0; s < 64; ++s)
    total += p.rows_in(s);
  CHECK(total == 2'000'000'000);
  const std::int64_t id = 1'999'999'999;
  const auto loc = p.locate(id);
  CHECK(p.global_id(loc.shard, loc.local) == id);
}

TEST_CASE("range partition: even, and proportional to device memory") {
  const auto even = range_partition::even(10, 3);
  CHECK(even.bounds() == std::vector<std::int64_t>{0, 4, 7, 10});
  CHECK(even.locate(3) == embplan::rowwise::row_location{0, 3});
  CHECK(even.locate(4) == embplan::rowwise::row_location{1, 0});
  CHECK(even.locate(9) == embplan::rowwise::row_location{2, 2});

  const std::vector<std::uint64_t> memory{4, 2, 2};
  const auto uneven = range_partition::proportional(1'000'001, memory);
  CHECK(uneven.rows_in(0) == 500'001);  // the remainder goes to the largest fraction
  CHECK(uneven.rows_in(1) == 250'000);
  CHECK(uneven.rows_in(2) == 250'000);
  for (std::int64_t id : {0, 500'000, 500'001, 750'000, 1'000'000}) {
    const auto loc = uneven.locate(id);
    CHECK(uneven.global_id(loc.shard, loc.local) == id);
    CHECK(loc.local < uneven.rows_in(loc.shard));
  }
  // Huge weights do not overflow.
  const std::vector<std::uint64_t> big{~std::uint64_t{0}, ~std::uint64_t{0} / 3};
  const auto counts = embplan::rowwise::proportional_row_counts(4'000'000'000, big);
  CHECK(counts[0] + counts[1] == 4'000'000'000);
  CHECK(counts[0] == 3'000'000'000);
}

TEST_CASE("bad input: shard count 0 or above rows, a multiplier that empties shards") {
  CHECK_THROWS_WITH_AS(hash_partition(100, 0), doctest::Contains("field 'shards' = 0"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(hash_partition(100, 101),
                       doctest::Contains("field 'shards' = 101: expected a shard count in [1, "
                                         "rows = 100]"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(hash_partition(0, 1), doctest::Contains("field 'rows' = 0"), embplan::error);
  CHECK_THROWS_WITH_AS(hash_partition(100, 4, 6), doctest::Contains("field 'multiplier' = 6"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(range_partition::even(5, 6), doctest::Contains("field 'shards' = 6"),
                       embplan::error);
  const std::vector<std::uint64_t> zero{1, 0};
  CHECK_THROWS_WITH_AS(range_partition::proportional(10, zero),
                       doctest::Contains("field 'weights[1]' = 0"), embplan::error);
  CHECK_THROWS_WITH_AS(range_partition({0, 5, 3}), doctest::Contains("field 'bounds[2]' = 3"),
                       embplan::error);
}
