#include "embplan/data/trace_check.hpp"

#include "support/message_of.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using embplan::data::validate_offsets;
using embplan::data::validate_tbe_trace;

bool check_contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// T = 2 tables of 10 and 3 rows, B = 2: table 0 bags {9}, {0, 4}; table 1 bags {2, 2}, {}.
const std::vector<std::int64_t> indices{9, 0, 4, 2, 2};
const std::vector<std::int64_t> offsets{0, 1, 3, 5, 5};
const std::array<std::int64_t, 2> table_rows{10, 3};

}  // namespace

TEST_CASE("trace_check: a well-formed TBE batch passes") {
  CHECK_NOTHROW(validate_tbe_trace(indices, offsets, 2, table_rows));
  CHECK_NOTHROW(validate_offsets(offsets, indices.size(), 4));
  // No tables: offsets {0}, no indices.
  const std::vector<std::int64_t> zero{0};
  CHECK_NOTHROW(validate_tbe_trace({}, zero, 5, {}));
}

TEST_CASE("trace_check: an index out of its table names the table, position, value and rows") {
  auto bad = indices;
  bad[4] = 3;  // table 1 has 3 rows
  auto msg = embplan::test::message_of([&] { validate_tbe_trace(bad, offsets, 2, table_rows); });
  CHECK(check_contains(msg, "'indices[4]' = 3"));
  CHECK(check_contains(msg, "table 1"));
  CHECK(check_contains(msg, "bag 0"));
  CHECK(check_contains(msg, "rows = 3"));
  bad = indices;
  bad[1] = -1;
  msg = embplan::test::message_of([&] { validate_tbe_trace(bad, offsets, 2, table_rows); });
  CHECK(check_contains(msg, "'indices[1]' = -1"));
  CHECK(check_contains(msg, "table 0"));
  CHECK(check_contains(msg, "rows = 10"));
}

TEST_CASE("trace_check: offsets rules") {
  SUBCASE("size is T*B+1") {
    const auto msg =
        embplan::test::message_of([&] { validate_tbe_trace(indices, offsets, 3, table_rows); });
    CHECK(check_contains(msg, "'offsets.size' = 5"));
    CHECK(check_contains(msg, "T*B+1 = 7"));
  }
  SUBCASE("offsets[0] == 0") {
    auto bad = offsets;
    bad[0] = 1;
    CHECK(check_contains(
        embplan::test::message_of([&] { validate_tbe_trace(indices, bad, 2, table_rows); }),
        "'offsets[0]' = 1"));
  }
  SUBCASE("non-decreasing") {
    auto bad = offsets;
    bad[2] = 0;
    const auto msg =
        embplan::test::message_of([&] { validate_tbe_trace(indices, bad, 2, table_rows); });
    CHECK(check_contains(msg, "'offsets[2]' = 0"));
    CHECK(check_contains(msg, "offsets[1] = 1"));
  }
  SUBCASE("back() == indices.size()") {
    auto bad = offsets;
    bad[4] = 6;
    bad[3] = 6;
    const auto msg =
        embplan::test::message_of([&] { validate_tbe_trace(indices, bad, 2, table_rows); });
    CHECK(check_contains(msg, "'offsets[4]' = 6"));
    CHECK(check_contains(msg, "the number of indices, 5"));
  }
  SUBCASE("batch size and rows") {
    CHECK(check_contains(
        embplan::test::message_of([&] { validate_tbe_trace(indices, offsets, 0, table_rows); }),
        "'batch_size' = 0"));
    const std::array<std::int64_t, 2> no_rows{10, 0};
    CHECK(check_contains(
        embplan::test::message_of([&] { validate_tbe_trace(indices, offsets, 2, no_rows); }),
        "'rows[1]' = 0"));
  }
}
