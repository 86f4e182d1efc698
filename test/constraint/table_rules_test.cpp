#include "embplan/constraint/table_rules.hpp"

#include <doctest/doctest.h>

#include <string>

#include "embplan/constraint/all_of.hpp"
#include "embplan/search/infeasible.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace {

using embplan::shard;
using embplan::sharding_kind;
using embplan::table_rules;
using embplan::user_constraints;
using embplan::test::message_of;

// Four devices of 1000 bytes, two per host; tables t0..t5, each 10 x 8 fp32
// (320 bytes).
embplan::task six_tables() {
  auto t = embplan_test::random_task(0, {.tables = 6,
                                         .devices = 4,
                                         .device_memory_bytes = 1000,
                                         .min_rows = 10,
                                         .max_rows = 10,
                                         .min_dim = 8,
                                         .dim_doublings = 0});
  t.cluster.devices_per_host = 2;
  return t;
}

shard whole(const embplan::task& t, std::size_t table, std::size_t device) {
  return embplan::whole_table(t, table, device);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("table_rules: empty rules admit everything and describe themselves as nothing") {
  const auto t = six_tables();
  const table_rules none;
  const table_rules also_none(t, user_constraints{});
  CHECK(none.empty());
  CHECK(also_none.empty());
  const embplan::placement_state st(4);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(none.admits(t, st, whole(t, 0, d)));
  CHECK(none.describe().empty());
  CHECK(none.explain(t, st, 0).empty());
}

TEST_CASE("table_rules: the per-table record is asked for only by rules that read it") {
  const auto t = six_tables();
  CHECK_FALSE(embplan::reads_table_record(table_rules{}));
  CHECK_FALSE(embplan::reads_table_record(embplan::default_constraint{}));
  CHECK_FALSE(embplan::reads_table_record(embplan::paper_constraint{}));
  CHECK_FALSE(embplan::reads_table_record(embplan::memory_capacity{}));
  const table_rules apart(t, {.separate = {{0, 1}}});
  CHECK(embplan::reads_table_record(apart));
  CHECK(embplan::reads_table_record(
      embplan::default_constraint{embplan::memory_capacity{}, embplan::dim_multiple{}, apart}));
  // A state that does not record: its place/unplace leave the record empty.
  embplan::placement_state st(4);
  st.records_tables = false;
  st.place(t, whole(t, 0, 1));
  CHECK(st.tables.empty());
  st.unplace(t, whole(t, 0, 1));
  CHECK(st.shard_count[1] == 0);
  st.records_tables = true;
  st.place(t, whole(t, 0, 1));
  CHECK(st.of_table(0).only_on(1));
  CHECK_FALSE(st.of_table(0).only_on(2));
}

TEST_CASE("table_rules: allowed devices, pinning and hosts") {
  const auto t = six_tables();
  const table_rules rules(t, {.tables = {{.table = 0, .devices = {3}},
                                         {.table = 1, .devices = {0, 2}},
                                         {.table = 2, .hosts = {1}},
                                         {.table = 3, .devices = {0, 3}, .hosts = {1}}}});
  const embplan::placement_state st(4);
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(rules.admits(t, st, whole(t, 0, d)) == (d == 3));
    CHECK(rules.admits(t, st, whole(t, 1, d)) == (d == 0 || d == 2));
    CHECK(rules.admits(t, st, whole(t, 2, d)) == (d >= 2));  // host 1 = devices 2, 3
    CHECK(rules.admits(t, st, whole(t, 3, d)) == (d == 3));  // both must allow
    CHECK(rules.admits(t, st, whole(t, 4, d)));              // no rule
  }
  CHECK(rules.describe() ==
        "user constraints (4 table rules, 0 co-location groups, 0 anti-affinity groups)");
}

TEST_CASE("table_rules: allowed sharding kinds, as the shard tells them") {
  const auto t = six_tables();
  const table_rules rules(t, {.tables = {{.table = 0, .sharding = {sharding_kind::table_wise}},
                                         {.table = 1, .sharding = {sharding_kind::column_wise}},
                                         {.table = 2, .sharding = {sharding_kind::row_wise}}}});
  const embplan::placement_state st(4);
  const auto cols = [&](std::size_t table) { return shard{std::uint32_t(table), 0, 0, 4, 0, 10}; };
  const auto rows = [&](std::size_t table) { return shard{std::uint32_t(table), 0, 0, 8, 0, 5}; };
  CHECK(embplan::kind_of(t, whole(t, 0, 0)) == sharding_kind::table_wise);
  CHECK(embplan::kind_of(t, cols(0)) == sharding_kind::column_wise);
  CHECK(embplan::kind_of(t, rows(0)) == sharding_kind::row_wise);
  CHECK(rules.admits(t, st, whole(t, 0, 0)));
  CHECK_FALSE(rules.admits(t, st, cols(0)));
  CHECK_FALSE(rules.admits(t, st, rows(0)));
  CHECK_FALSE(rules.admits(t, st, whole(t, 1, 0)));
  CHECK(rules.admits(t, st, cols(1)));
  CHECK_FALSE(rules.admits(t, st, rows(1)));
  CHECK(rules.admits(t, st, rows(2)));
  CHECK_FALSE(rules.admits(t, st, cols(2)));
  shard replica = rows(2);
  replica.replica = true;
  CHECK(embplan::kind_of(t, replica) == sharding_kind::row_wise);
}

TEST_CASE("table_rules: a grid piece (some rows, some columns) needs row_wise and column_wise") {
  const auto t = six_tables();
  const table_rules rules(
      t, {.tables = {
              {.table = 0, .sharding = {sharding_kind::row_wise}},
              {.table = 1, .sharding = {sharding_kind::column_wise}},
              {.table = 2, .sharding = {sharding_kind::row_wise, sharding_kind::column_wise}}}});
  const embplan::placement_state st(4);
  const auto grid = [&](std::size_t table) { return shard{std::uint32_t(table), 0, 0, 4, 0, 5}; };
  CHECK(embplan::kind_of(t, grid(0)) == sharding_kind::row_wise);
  CHECK(embplan::kinds_needed(t, grid(0)) ==
        (static_cast<std::uint8_t>(sharding_kind::row_wise) |
         static_cast<std::uint8_t>(sharding_kind::column_wise)));
  CHECK_FALSE(rules.admits(t, st, grid(0)));
  CHECK_FALSE(rules.admits(t, st, grid(1)));
  CHECK(rules.admits(t, st, grid(2)));
  CHECK(rules.admits(t, st, shard{0, 0, 0, 8, 0, 5}));  // all columns: row_wise alone
}

TEST_CASE("table_rules: max shards counts the pieces placed") {
  const auto t = six_tables();
  const table_rules rules(t, {.tables = {{.table = 0, .max_shards = 2}}});
  embplan::placement_state st(4);
  const shard a{0, 0, 0, 4, 0, 10};
  const shard b{0, 1, 4, 8, 0, 5};
  const shard c{0, 2, 4, 8, 5, 10};
  CHECK(rules.admits(t, st, a));
  st.place(t, a);
  CHECK(rules.admits(t, st, b));
  st.place(t, b);
  CHECK_FALSE(rules.admits(t, st, c));
  st.unplace(t, b);
  CHECK(rules.admits(t, st, c));
}

TEST_CASE("table_rules: a co-location group follows its first placed piece") {
  const auto t = six_tables();
  const table_rules rules(t, {.colocate = {{0, 1, 2}}});
  embplan::placement_state st(4);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(rules.admits(t, st, whole(t, 1, d)));
  st.place(t, whole(t, 1, 2));
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(rules.admits(t, st, whole(t, 0, d)) == (d == 2));
    CHECK(rules.admits(t, st, whole(t, 2, d)) == (d == 2));
    CHECK(rules.admits(t, st, whole(t, 3, d)));  // not in the group
  }
  // Pieces of a grouped table stay together too.
  const table_rules split(t, {.colocate = {{0, 1}}});
  embplan::placement_state s2(4);
  s2.place(t, shard{0, 1, 0, 4, 0, 10});
  CHECK(split.admits(t, s2, shard{0, 1, 4, 8, 0, 10}));
  CHECK_FALSE(split.admits(t, s2, shard{0, 3, 4, 8, 0, 10}));
  // Taken away again, the group is free.
  st.unplace(t, whole(t, 1, 2));
  CHECK(rules.admits(t, st, whole(t, 0, 3)));
}

TEST_CASE("table_rules: a co-location group with one pinned table is pinned") {
  const auto t = six_tables();
  const table_rules rules(t, {.tables = {{.table = 1, .devices = {3}}}, .colocate = {{0, 1}}});
  const embplan::placement_state st(4);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(rules.admits(t, st, whole(t, 0, d)) == (d == 3));
}

TEST_CASE("table_rules: an anti-affinity group keeps its tables on distinct devices") {
  const auto t = six_tables();
  const table_rules rules(t, {.separate = {{0, 1, 2}, {2, 3}}});
  embplan::placement_state st(4);
  st.place(t, whole(t, 0, 1));
  CHECK_FALSE(rules.admits(t, st, whole(t, 1, 1)));
  CHECK(rules.admits(t, st, whole(t, 1, 0)));
  CHECK(rules.admits(t, st, whole(t, 4, 1)));  // not in the group
  st.place(t, whole(t, 3, 2));
  CHECK_FALSE(rules.admits(t, st, whole(t, 2, 1)));  // t0 there (group 0)
  CHECK_FALSE(rules.admits(t, st, whole(t, 2, 2)));  // t3 there (group 1)
  CHECK(rules.admits(t, st, whole(t, 2, 3)));
  CHECK(rules.admits(t, st, whole(t, 3, 2)));  // a table does not keep apart from itself
  // A table spread over devices 0 and 1: refused there, admitted elsewhere
  // (the record knows where the pieces went: separate_spread_test.cpp).
  embplan::placement_state spread(4);
  spread.place(t, shard{0, 0, 0, 4, 0, 10});
  spread.place(t, shard{0, 1, 4, 8, 0, 10});
  CHECK_FALSE(rules.admits(t, spread, whole(t, 1, 0)));
  CHECK_FALSE(rules.admits(t, spread, whole(t, 1, 1)));
  CHECK(rules.admits(t, spread, whole(t, 1, 2)));
}

TEST_CASE("table_rules: used on another task is an error, not a silent pass") {
  const auto t = six_tables();
  const table_rules rules(t, {.colocate = {{0, 1}}});
  auto other = t;
  other.tables.pop_back();
  const embplan::placement_state st(4);
  const auto msg = message_of([&] { (void)rules.admits(other, st, whole(other, 0, 0)); });
  CHECK(contains(msg, "field 'table_rules.task' = \"5 tables on 4 devices\""));
  CHECK(contains(msg, "(6 tables on 4 devices)"));
}

TEST_CASE("table_rules: bad input names the field, the value and the expectation") {
  const auto t = six_tables();
  const auto build = [&](const user_constraints& c) {
    return message_of([&] { (void)table_rules(t, c); });
  };
  SUBCASE("unknown table") {
    CHECK(build({.tables = {{.table = 9}}}) ==
          "field 'constraints.tables[0].table' = 9: expected a table index below 6");
    CHECK(build({.colocate = {{0, 7}}}) ==
          "field 'constraints.colocate[0][1]' = 7: expected a table index below 6");
  }
  SUBCASE("device out of range") {
    CHECK(build({.tables = {{.table = 0, .devices = {1, 4}}}}) ==
          "field 'constraints.tables[0].devices[1]' = 4: expected a device index below 4");
  }
  SUBCASE("host out of range") {
    CHECK(build({.tables = {{.table = 0, .hosts = {2}}}}) ==
          "field 'constraints.tables[0].hosts[0]' = 2: expected a host index below 2 (4 "
          "devices, 2 per host)");
  }
  SUBCASE("devices and hosts that exclude each other") {
    CHECK(contains(build({.tables = {{.table = 0, .devices = {0}, .hosts = {1}}}}),
                   "field 'constraints.tables[0].hosts' = 1: expected hosts that hold"));
  }
  SUBCASE("a table ruled twice") {
    CHECK(build({.tables = {{.table = 2, .devices = {0}}, {.table = 2, .devices = {1}}}}) ==
          "field 'constraints.tables[1].table' = \"t2\": expected each table ruled once (it is "
          "also ruled at constraints.tables[0])");
  }
  SUBCASE("a group of one") {
    CHECK(build({.separate = {{3}}}) ==
          "field 'constraints.separate[0]' = 1: expected a group of at least two tables");
  }
  SUBCASE("a table twice in a group") {
    CHECK(build({.colocate = {{1, 1}}}) ==
          "field 'constraints.colocate[0][1]' = \"t1\": expected each table once in the group");
  }
  SUBCASE("co-located with a table pinned elsewhere") {
    const auto msg = build({.tables = {{.table = 0, .devices = {0}}, {.table = 1, .devices = {1}}},
                            .colocate = {{0, 1}}});
    CHECK(contains(msg,
                   "field 'constraints.colocate[0]' = \"t0, t1\": expected tables that can "
                   "share a device"));
    CHECK(contains(msg, "t0 devices [0]; t1 devices [1]"));
  }
  SUBCASE("a table in two co-location groups") {
    CHECK(contains(build({.colocate = {{0, 1}, {2, 1}}}),
                   "field 'constraints.colocate[1][1]' = \"t1\": expected each table in at most "
                   "one co-location group (it is also in constraints.colocate[0]"));
  }
  SUBCASE("co-located and kept apart") {
    CHECK(build({.colocate = {{0, 1, 2}}, .separate = {{3, 2, 0}}}) ==
          "field 'constraints.separate[0]' = \"t2, t0\": expected tables not also co-located "
          "(both are in constraints.colocate[0])");
  }
  SUBCASE("kept apart but pinned together") {
    CHECK(build({.tables = {{.table = 0, .devices = {2}}, {.table = 1, .devices = {2}}},
                 .separate = {{0, 1}}}) ==
          "field 'constraints.separate[0]' = \"t0, t1\": expected tables not pinned to one device "
          "(both pinned to device 2)");
  }
  SUBCASE("more tables kept apart than devices") {
    CHECK(build({.separate = {{0, 1, 2, 3, 4}}}) ==
          "field 'constraints.separate[0]' = \"t0, t1, t2, t3, t4\": expected at most 4 tables "
          "(one per device) in an anti-affinity group");
  }
  SUBCASE("a rule's own path is used where given") {
    CHECK(build({.tables = {{.table = 0, .devices = {5}, .where = "tables.t0"}}}) ==
          "field 'tables.t0.devices[0]' = 5: expected a device index below 4");
  }
}

TEST_CASE("table_rules: an infeasible table names the binding rule and the table") {
  auto t = six_tables();
  t.tables[5].rows = 30;  // 960 bytes
  const embplan::default_constraint rule{
      embplan::memory_capacity{}, embplan::dim_multiple{},
      table_rules(t, {.tables = {{.table = 5, .devices = {3}}, {.table = 4, .devices = {1, 2}}},
                      .colocate = {{0, 1}},
                      .separate = {{2, 3}}})};
  embplan::placement_state st(4);
  st.place(t, whole(t, 3, 3));  // 320 of device 3's 1000 bytes
  SUBCASE("pinned to a full device") {
    CHECK(embplan::no_device_for(t, st, 5, rule) ==
          "table 't5' (index 5): pinned to device 3, but device 3 has 680 bytes free and the "
          "table needs 960 bytes");
  }
  SUBCASE("allowed devices all full") {
    st.place(t, whole(t, 0, 1));
    st.place(t, whole(t, 1, 1));
    st.place(t, whole(t, 2, 1));
    st.place(t, whole(t, 5, 2));
    CHECK(embplan::no_device_for(t, st, 4, rule) ==
          "table 't4' (index 4): allowed on devices 1, 2, but of the 2 devices these rules "
          "leave, the roomiest (device 1) has 40 bytes free and the table needs 320 bytes");
  }
  SUBCASE("co-located with a table on a full device") {
    st.place(t, whole(t, 0, 3));
    st.place(t, whole(t, 5, 3));  // device 3 over its memory: the state need not be legal here
    CHECK(embplan::no_device_for(t, st, 1, rule) ==
          "table 't1' (index 1): allowed on any device, co-located with table 't0' (index 0), "
          "which is on device 3, but device 3 has 0 bytes free and the table needs 320 bytes");
  }
  SUBCASE("anti-affinity leaves no device") {
    embplan::placement_state s2(4);
    s2.place(t, whole(t, 3, 0));
    const table_rules tight(t, {.tables = {{.table = 2, .devices = {0}}}, .separate = {{2, 3}}});
    const embplan::all_of with_memory{embplan::memory_capacity{}, tight};
    CHECK(embplan::no_device_for(t, s2, 2, with_memory) ==
          "table 't2' (index 2): pinned to device 0, kept apart from table 't3' (index 3) on "
          "device 0, which leaves it no device");
  }
  SUBCASE("a rule that does not bind leaves the general message") {
    const auto msg = embplan::no_device_for(t, st, 2, rule);
    CHECK(contains(msg,
                   "fits on no device under memory capacity and columns a multiple of 4 "
                   "and user constraints (2 table rules, 1 co-location group, 1 "
                   "anti-affinity group)"));
  }
}
