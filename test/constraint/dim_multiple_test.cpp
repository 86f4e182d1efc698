#include "embplan/constraint/dim_multiple.hpp"

#include <doctest/doctest.h>

#include "embplan/core/error.hpp"

namespace {

embplan::task one_table(std::int32_t dim) {
  embplan::task t;
  t.cluster = embplan::uniform_topology(1);
  embplan::table_spec s;
  s.name = "t0";
  s.rows = 10;
  s.dim = dim;
  s.pooling_factor = 1.0;
  t.tables.push_back(s);
  return t;
}

}  // namespace

TEST_CASE("dim_multiple admits column counts that are multiples") {
  const embplan::placement_state st(1);
  const embplan::dim_multiple four;
  CHECK(four.multiple == 4);
  CHECK(four.admits(one_table(8), st, embplan::whole_table(one_table(8), 0, 0)));
  const auto six = one_table(6);
  CHECK_FALSE(four.admits(six, st, embplan::whole_table(six, 0, 0)));
  CHECK(embplan::dim_multiple{.multiple = 3}.admits(six, st, embplan::whole_table(six, 0, 0)));
  // A column piece is judged by its own width: columns [4, 10) of a 12-wide table.
  const auto twelve = one_table(12);
  const embplan::shard piece{
      .table = 0, .device = 0, .col_begin = 4, .col_end = 10, .row_begin = 0, .row_end = 10};
  CHECK_FALSE(four.admits(twelve, st, piece));
  CHECK(four.describe() == "columns a multiple of 4");
}

TEST_CASE("dim_multiple: powers of two and other multiples agree with the remainder") {
  const embplan::placement_state st(1);
  const auto t = one_table(128);
  for (const std::int32_t multiple : {1, 2, 3, 4, 6, 8, 12, 16, 64}) {
    CAPTURE(multiple);
    const embplan::dim_multiple rule{.multiple = multiple};
    for (std::int32_t cols = 1; cols <= 128; ++cols) {
      const embplan::shard s{
          .table = 0, .device = 0, .col_begin = 0, .col_end = cols, .row_begin = 0, .row_end = 10};
      CHECK(rule.admits(t, st, s) == (cols % multiple == 0));
    }
  }
}

TEST_CASE("dim_multiple rejects a non-positive multiple by name and value") {
  const auto t = one_table(8);
  const embplan::placement_state st(1);
  CHECK_THROWS_WITH_AS(
      (void)embplan::dim_multiple{.multiple = 0}.admits(t, st, embplan::whole_table(t, 0, 0)),
      doctest::Contains("field 'dim_multiple.multiple' = 0: expected a positive integer"),
      embplan::error);
  CHECK_THROWS_WITH_AS(
      (void)embplan::dim_multiple{.multiple = -4}.admits(t, st, embplan::whole_table(t, 0, 0)),
      doctest::Contains("'dim_multiple.multiple' = -4"), embplan::error);
}
