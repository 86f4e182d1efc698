#include "embplan/rowwise/load.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/rowwise/zipf.hpp"

using embplan::rowwise::hash_partition;
using embplan::rowwise::id_hits;

TEST_CASE("load of a hand-made trace: rows, lookups, skew, hottest IDs") {
  const hash_partition p(8, 2, 1);  // shard = id mod 2
  const std::vector<std::int64_t> ids{0, 0, 0, 2, 4, 1, 3, 0};
  const auto r = embplan::rowwise::analyze_load(p, ids, 2);
  CHECK(r.rows_per_shard == std::vector<std::int64_t>{4, 4});
  CHECK(r.lookups_per_shard == std::vector<std::uint64_t>{6, 2});
  CHECK(r.skew == doctest::Approx(1.5));
  REQUIRE(r.hottest.size() == 2);
  CHECK(r.hottest[0] == id_hits{0, 4});
  CHECK(r.hottest[1] == id_hits{1, 1});  // ties: the smaller ID first
}

TEST_CASE("frequency counts agree between the dense and the sorting paths") {
  const auto ids = embplan::rowwise::zipf_ids(5'000, 1.1, 3'000, 4);
  const auto dense = embplan::rowwise::id_frequency(ids, 5'000);
  const auto sorted = embplan::rowwise::id_frequency(ids, 100'000'000);  // sorts a copy
  CHECK(dense == sorted);
  std::uint64_t total = 0;
  for (const auto& f : dense)
    total += f.hits;
  CHECK(total == ids.size());
  for (std::size_t i = 1; i < dense.size(); ++i)
    CHECK(dense[i - 1].hits >= dense[i].hits);
}

TEST_CASE("skew factor: max over mean, 1 for no load") {
  const std::vector<std::uint64_t> balanced{5, 5, 5, 5};
  const std::vector<std::uint64_t> skewed{10, 0, 0, 0};
  const std::vector<std::uint64_t> none{0, 0};
  CHECK(embplan::rowwise::skew_factor(balanced) == 1.0);
  CHECK(embplan::rowwise::skew_factor(skewed) == 4.0);
  CHECK(embplan::rowwise::skew_factor(none) == 1.0);
}

TEST_CASE("bad input: an ID out of range names its position and value") {
  const hash_partition p(100, 4);
  const std::vector<std::int64_t> ids{3, 99, 100, 5};
  CHECK_THROWS_WITH_AS((void)embplan::rowwise::analyze_load(p, ids),
                       doctest::Contains("field 'ids[2]' = 100: expected a row ID in [0, 100)"),
                       embplan::error);
  const std::vector<std::int64_t> negative{-1};
  CHECK_THROWS_WITH_AS((void)embplan::rowwise::id_frequency(negative, 10),
                       doctest::Contains("field 'ids[0]' = -1"), embplan::error);
}
