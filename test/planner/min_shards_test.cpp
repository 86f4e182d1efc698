// min_shards (user constraints, docs/constraints.md): a table placed as at least this
// many pieces. The rules name it, check_plan counts it, and every preset keeps
// it through stage::staged's column blocks.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "embplan/check_plan.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/error.hpp"
#include "embplan/io/json_constraints.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/stage/staged.hpp"

#include "support/message_of.hpp"
#include "support/random_task.hpp"

using embplan::test::message_of;

namespace {

// 12 tables on 4 devices; table 2 has 48 columns, table 7 has 20.
embplan::task min_shards_task() {
  auto t = embplan_test::search_task(3, 12, 4);
  t.tables[2].dim = 48;
  t.tables[7].dim = 20;
  return t;
}

std::size_t pieces_of(const embplan::plan& p, std::size_t table) {
  std::size_t n = 0;
  for (const auto& s : p.shards)
    n += s.table == table ? 1 : 0;
  return n;
}

std::set<std::uint32_t> devices_holding(const embplan::plan& p, std::size_t table) {
  std::set<std::uint32_t> out;
  for (const auto& s : p.shards)
    if (s.table == table) out.insert(s.device);
  return out;
}

}  // namespace

TEST_CASE("column_blocks cuts a dim into multiples of 4, as equal as they can be") {
  using blocks = std::vector<std::pair<std::int32_t, std::int32_t>>;
  CHECK(embplan::stage::detail::column_blocks(48, 3) == blocks{{0, 16}, {16, 32}, {32, 48}});
  CHECK(embplan::stage::detail::column_blocks(20, 3) == blocks{{0, 8}, {8, 16}, {16, 20}});
  CHECK(embplan::stage::detail::column_blocks(8, 1) == blocks{{0, 8}});
}

TEST_CASE("min_shards: every preset places the table as at least that many pieces") {
  const auto t = min_shards_task();
  const embplan::table_rules rules(t, {.tables = {{.table = 2, .max_shards = 4, .min_shards = 3},
                                                  {.table = 7, .devices = {1}, .min_shards = 2}}});
  CHECK(rules.min_shards(2) == 3);
  CHECK(rules.min_shards(7) == 2);
  CHECK(rules.min_shards(0) == 0);
  CHECK(rules.has_min_shards());
  for (const char* name : {"random", "lookup_greedy", "torchrec_like", "neuroshard",
                           "neuroshard_plus", "neuroshard_ls", "rowwise_torchrec_like"}) {
    CAPTURE(name);
    const auto r = embplan::run_preset(name, t, 0, embplan::analytic_cost{}, {}, rules);
    REQUIRE(r.ok);
    CHECK(embplan::check_plan(t, r.placement, rules, {.dim_multiple = 4}).empty());
    CHECK(pieces_of(r.placement, 2) >= 3);
    CHECK(pieces_of(r.placement, 2) <= 4);
    CHECK(pieces_of(r.placement, 7) >= 2);
    CHECK(devices_holding(r.placement, 7) == std::set<std::uint32_t>{1});  // pinned, all pieces
    // Same seed, same plan.
    CHECK(embplan::run_preset(name, t, 0, embplan::analytic_cost{}, {}, rules).placement ==
          r.placement);
  }
}

TEST_CASE("min_shards with co-location: the blocks of a table stay with the group") {
  const auto t = min_shards_task();
  const embplan::table_rules rules(
      t, {.tables = {{.table = 2, .min_shards = 2}}, .colocate = {{2, 5}}});
  for (const char* name : {"lookup_greedy", "neuroshard_plus"}) {
    CAPTURE(name);
    const auto r = embplan::run_preset(name, t, 0, embplan::analytic_cost{}, {}, rules);
    REQUIRE(r.ok);
    CHECK(pieces_of(r.placement, 2) >= 2);
    const auto d2 = devices_holding(r.placement, 2);
    CHECK(d2.size() == 1);
    CHECK(devices_holding(r.placement, 5) == d2);
    CHECK(embplan::check_plan(t, r.placement, rules, {.dim_multiple = 4}).empty());
  }
}

TEST_CASE("check_plan names a table placed as fewer pieces than its min_shards") {
  const auto t = min_shards_task();
  const embplan::table_rules rules(t, {.tables = {{.table = 2, .min_shards = 3}}});
  std::vector<std::size_t> assignment(t.tables.size(), 0);
  for (std::size_t i = 0; i < assignment.size(); ++i)
    assignment[i] = i % 4;
  const auto p = embplan::table_wise_plan(t, assignment);
  const auto problems = embplan::check_plan(t, p, rules);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == embplan::plan_problem_kind::constraint);
  CHECK(to_string(problems[0]) ==
        "table 2 't2': field 'tables[2]' = \"t2\": expected at least 3 pieces (min_shards), but "
        "it is placed as 1");
}

TEST_CASE("min_shards: bad values are named with the field, the value and the limit") {
  const auto t = min_shards_task();
  CHECK(message_of([&] {
          (void)embplan::table_rules(t,
                                     {.tables = {{.table = 2, .max_shards = 2, .min_shards = 3}}});
        }) == "field 'constraints.tables[0].min_shards' = 3: expected at most max_shards (2)");
  CHECK(message_of(
            [&] { (void)embplan::table_rules(t, {.tables = {{.table = 7, .min_shards = 6}}}); }) ==
        "field 'constraints.tables[0].min_shards' = 6: expected at most 5 for table 't7' "
        "(its 20 columns cut into blocks of a multiple of 4)");
  CHECK(message_of([&] {
          (void)embplan::table_rules(t,
                                     {.tables = {{.table = 2,
                                                  .sharding = {embplan::sharding_kind::table_wise},
                                                  .min_shards = 2}}});
        }) ==
        "field 'constraints.tables[0].min_shards' = 2: expected no minimum where sharding "
        "excludes column_wise (the pieces are column blocks)");
  // From JSON: read, and a count below 1 refused.
  const auto c = embplan::io::user_constraints_from_json(
      embplan::io::parse_json(R"({"tables": {"t2": {"min_shards": 3}}})"), t);
  REQUIRE(c.tables.size() == 1);
  CHECK(c.tables[0].min_shards == 3);
  CHECK(message_of([&] {
          (void)embplan::io::user_constraints_from_json(
              embplan::io::parse_json(R"({"tables": {"t2": {"min_shards": 0}}})"), t);
        }) == "field 'constraints.tables.t2.min_shards' = 0: expected a positive shard count");
}
