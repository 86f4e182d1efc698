#include "embplan/constraint/all_of.hpp"

#include <doctest/doctest.h>

#include <string>
#include <tuple>
#include <type_traits>

#include "embplan/constraint/max_device_dim.hpp"

namespace {

// Two devices of 1000 bytes; table 0 is 10 x 4 fp32 (160 bytes), table 1 is
// 10 x 6 (240 bytes).
embplan::task two_tables() {
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 1000;
  t.cluster = embplan::uniform_topology(2, dev);
  for (const std::int32_t dim : {4, 6}) {
    embplan::table_spec s;
    s.name = "d" + std::to_string(dim);
    s.rows = 10;
    s.dim = dim;
    s.pooling_factor = 1.0;
    t.tables.push_back(s);
  }
  return t;
}

}  // namespace

TEST_CASE("all_of deduces its parts and is the papers' constraint") {
  const embplan::all_of rule{embplan::memory_capacity{}, embplan::dim_multiple{}};
  static_assert(std::is_same_v<std::remove_const_t<decltype(rule)>, embplan::paper_constraint>);
  CHECK(rule.describe() == "memory capacity and columns a multiple of 4");
  // The default adds empty user rules, which describe themselves as nothing.
  CHECK(embplan::default_constraint{}.describe() == "memory capacity and columns a multiple of 4");
  CHECK(std::get<1>(rule.parts()).multiple == 4);
}

TEST_CASE("all_of admits only what every part admits") {
  const auto t = two_tables();
  const embplan::default_constraint rule;
  embplan::placement_state st(2);
  st.memory_bytes[1] = 900;
  CHECK(rule.admits(t, st, embplan::whole_table(t, 0, 0)));        // fits, 4 columns
  CHECK_FALSE(rule.admits(t, st, embplan::whole_table(t, 0, 1)));  // 1060 bytes > 1000
  CHECK_FALSE(rule.admits(t, st, embplan::whole_table(t, 1, 0)));  // 6 columns
  CHECK_FALSE(rule.admits(t, st, embplan::whole_table(t, 1, 1)));  // both fail
}

TEST_CASE("all_of composes three parts, nests, and stops at the first refusal") {
  const auto t = two_tables();
  embplan::placement_state st(2);
  st.dim_sum[0] = 60;
  const embplan::all_of three{embplan::memory_capacity{}, embplan::dim_multiple{.multiple = 2},
                              embplan::max_device_dim{.max_dim = 64}};
  CHECK(three.admits(t, st, embplan::whole_table(t, 0, 0)));        // 60 + 4 = 64
  CHECK_FALSE(three.admits(t, st, embplan::whole_table(t, 1, 0)));  // 60 + 6 > 64
  CHECK(three.admits(t, st, embplan::whole_table(t, 1, 1)));        // 6 is a multiple of 2
  CHECK(three.describe() ==
        "memory capacity and columns a multiple of 2 and device dim at most 64");

  const embplan::all_of nested{three, embplan::dim_multiple{.multiple = 4}};
  CHECK_FALSE(nested.admits(t, st, embplan::whole_table(t, 1, 1)));

  // The second part would throw (multiple 0) if it were asked.
  const embplan::all_of short_circuit{embplan::max_device_dim{.max_dim = 0},
                                      embplan::dim_multiple{.multiple = 0}};
  CHECK_FALSE(short_circuit.admits(t, st, embplan::whole_table(t, 0, 1)));
}

TEST_CASE("an empty all_of admits everything") {
  const auto t = two_tables();
  const embplan::all_of<> none;
  embplan::placement_state st(2);
  st.memory_bytes[0] = 1'000'000;
  CHECK(none.admits(t, st, embplan::whole_table(t, 1, 0)));
  CHECK(none.describe() == "no constraint");
}

TEST_CASE("all_of passes given bytes to the parts that take them, and asks the others plainly") {
  const auto t = two_tables();
  const embplan::default_constraint rule;
  static_assert(embplan::bytes_aware_constraint<embplan::default_constraint>);
  static_assert(!embplan::bytes_aware_constraint<embplan::dim_multiple>);
  embplan::placement_state st(2);
  const auto four = embplan::whole_table(t, 0, 0);  // 160 bytes, 4 columns
  const auto six = embplan::whole_table(t, 1, 0);   // 240 bytes, 6 columns
  CHECK(rule.admits(t, st, four, embplan::shard_bytes(t, four)) == rule.admits(t, st, four));
  CHECK(rule.admits(t, st, six, embplan::shard_bytes(t, six)) == rule.admits(t, st, six));
  // memory_capacity sees the given figure ...
  CHECK_FALSE(rule.admits(t, st, four, 1001));
  // ... and dim_multiple still refuses 6 columns, whatever the bytes.
  CHECK_FALSE(rule.admits(t, st, six, 1));
  // admits_with_bytes on a constraint without the overload asks admits(t, st, s).
  CHECK(embplan::admits_with_bytes(embplan::dim_multiple{}, t, st, four, 1001));
}

TEST_CASE("all_of's room is the least its parts give; unlimited where none bounds it") {
  const auto t = two_tables();
  embplan::placement_state st(2);
  st.memory_bytes[1] = 250;
  static_assert(embplan::room_bounding_constraint<embplan::default_constraint>);
  static_assert(!embplan::room_bounding_constraint<embplan::dim_multiple>);
  const embplan::default_constraint rule;
  CHECK(rule.room(t, st, 0) == 1000);
  CHECK(rule.room(t, st, 1) == 750);
  // Two bounding parts: the smaller room.
  struct tight {
    bool admits(const embplan::task&, const embplan::placement_state&,
                const embplan::shard&) const {
      return true;
    }
    std::uint64_t room(const embplan::task&, const embplan::placement_state&,
                       std::size_t device) const {
      return device == 0 ? 300 : 900;
    }
    std::string describe() const { return "tight"; }
  };
  const embplan::all_of both{embplan::memory_capacity{}, tight{}};
  CHECK(both.room(t, st, 0) == 300);
  CHECK(both.room(t, st, 1) == 750);
  // No part bounds it: unlimited, as room_of gives for a rule without room().
  const embplan::all_of plain{embplan::dim_multiple{}};
  CHECK(plain.room(t, st, 0) == embplan::unlimited_room);
  CHECK(embplan::room_of(embplan::dim_multiple{}, t, st, 0) == embplan::unlimited_room);
  CHECK(embplan::all_of<>{}.room(t, st, 1) == embplan::unlimited_room);
}
