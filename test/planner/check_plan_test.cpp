// check_plan: every problem of a plan for a task, each naming the table or
// device and the values; and a plan that lost a table never leaves a planner.

#include "embplan/check_plan.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/neg_max_cost.hpp"

#include "support/pin.hpp"

namespace {

// t0 (64,000 bytes), t1 (256,000) and t2 (16,000) on two devices of 300,000
// bytes: t0 and t1 do not fit one device together.
embplan::task small_task() {
  embplan::task t;
  t.name = "small";
  const auto table = [](std::string name, std::int64_t rows, std::int32_t dim) {
    embplan::table_spec s;
    s.name = std::move(name);
    s.rows = rows;
    s.dim = dim;
    s.pooling_factor = 2.0;
    return s;
  };
  t.tables = {table("t0", 1000, 16), table("t1", 2000, 32), table("t2", 500, 8)};
  t.cluster = embplan::uniform_topology(2, embplan::device_spec{.memory_bytes = 300'000});
  return t;
}

// t0 and t2 on cuda:0, t1 on cuda:1.
embplan::plan good_plan(const embplan::task& t) {
  return embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 0});
}

using embplan_test::pin;

std::vector<std::string> texts(const std::vector<embplan::plan_problem>& problems) {
  std::vector<std::string> out;
  for (const auto& p : problems)
    out.push_back(embplan::to_string(p));
  return out;
}

std::vector<std::string> check(const embplan::task& t, const embplan::plan& p,
                               embplan::plan_check c = {}) {
  return texts(embplan::check_plan(t, p, embplan::all_of<>{}, c));
}

// A searcher that forgets the last table.
struct forgetful {
  std::string_view name() const noexcept { return "forgetful"; }
  template <class M, class C, class R>
  embplan::search_result search(const embplan::task& t, const M&, const C&, const R&,
                                std::uint64_t) const {
    embplan::search_result out;
    std::vector<std::size_t> assignment(t.tables.size(), 0);
    for (std::size_t i = 0; i < assignment.size(); ++i)
      assignment[i] = i % t.cluster.size();
    out.placement = embplan::table_wise_plan(t, assignment);
    out.placement.shards.pop_back();
    out.ok = true;
    return out;
  }
};

}  // namespace

TEST_CASE("check_plan: a valid plan has no problem") {
  const auto t = small_task();
  CHECK(check(t, good_plan(t)).empty());
  CHECK(embplan::check_plan(t, good_plan(t), pin{.table = 1, .device = 1}).empty());
  CHECK_NOTHROW(embplan::validate(t, good_plan(t)));
}

TEST_CASE("check_plan: a table lost, covered twice or covered in part, named with the numbers") {
  const auto t = small_task();
  auto lost = good_plan(t);
  lost.shards.pop_back();
  const auto problems = embplan::check_plan(t, lost, embplan::all_of<>{});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == embplan::plan_problem_kind::uncovered);
  CHECK(embplan::to_string(problems[0]) ==
        "table 2 't2': field 'tables[2]' = \"t2\": expected a table covered by at least one "
        "shard");

  auto twice = good_plan(t);
  twice.shards.push_back(embplan::whole_table(t, 0, 1));
  CHECK(check(t, twice, {.memory = false}) ==
        std::vector<std::string>{"table 0 't0': field 'tables[0]' = \"t0\": expected each cell "
                                 "covered once, but shards 0 and 3 overlap"});
  // A declared replica is no second cover.
  twice.shards.back().replica = true;
  CHECK(check(t, twice, {.memory = false}).empty());

  auto partial = good_plan(t);
  partial.shards[1].col_end = 16;
  CHECK(check(t, partial) ==
        std::vector<std::string>{"table 1 't1': field 'tables[1]' = \"t1\": expected shards that "
                                 "cover all rows x columns (some are missing: 32000 of 2000 x 32 "
                                 "cells covered)"});
}

TEST_CASE("check_plan: references out of range and pieces of illegal shape") {
  const auto t = small_task();
  auto device = good_plan(t);
  device.shards[2].device = 5;
  CHECK(check(t, device) == std::vector<std::string>{"table 2 't2': field 'shards[2].device' = 5: "
                                                     "expected a device index below 2"});

  auto table = good_plan(t);
  table.shards.push_back(embplan::shard{.table = 9, .device = 0, .col_end = 4, .row_end = 10});
  CHECK(check(t, table) == std::vector<std::string>{"shard 3: field 'shards[3].table' = 9: "
                                                    "expected a table index below 3"});

  auto beyond = good_plan(t);
  beyond.shards[0].row_end = 1001;
  // The shape alone: the table's coverage is not judged on a piece beyond it.
  CHECK(check(t, beyond) ==
        std::vector<std::string>{"table 0 't0': field 'shards[0].rows' = \"[0, 1001)\": expected "
                                 "a non-empty range inside [0, 1000)"});

  auto empty = good_plan(t);
  empty.shards[1].col_begin = 32;
  const auto problems = embplan::check_plan(t, empty, embplan::all_of<>{});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == embplan::plan_problem_kind::shape);
  CHECK(embplan::to_string(problems[0]) ==
        "table 1 't1': field 'shards[1].columns' = \"[32, 32)\": expected a non-empty range "
        "inside [0, 32)");

  auto odd = good_plan(t);
  odd.shards[1].col_end = 6;
  odd.shards.push_back({.table = 1, .device = 0, .col_begin = 6, .col_end = 32, .row_end = 2000});
  CHECK(check(t, odd, {.dim_multiple = 4, .memory = false}) ==
        std::vector<std::string>{
            "table 1 't1': field 'shards[1].columns' = 6: expected a multiple of 4",
            "table 1 't1': field 'shards[3].columns' = 26: expected a multiple of 4"});
}

TEST_CASE("check_plan: memory over capacity, used and capacity in bytes, per device") {
  const auto t = small_task();
  auto full = good_plan(t);
  full.shards[0].device = 1;  // t0 joins t1: 64,000 + 256,000 bytes
  const auto problems = embplan::check_plan(t, full, embplan::all_of<>{});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == embplan::plan_problem_kind::memory);
  CHECK(embplan::to_string(problems[0]) ==
        "device 1 'cuda:1': field 'devices[1].memory_bytes' = 320000: expected at most the "
        "capacity 300000");
  // Not asked: no memory problem.
  CHECK(check(t, full, {.memory = false}).empty());
}

TEST_CASE("check_plan: every shard the constraint refuses, replayed in plan order") {
  const auto t = small_task();
  const auto problems = embplan::check_plan(t, good_plan(t), pin{.table = 1, .device = 0});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == embplan::plan_problem_kind::constraint);
  CHECK(embplan::to_string(problems[0]) ==
        "table 1 't1': field 'shards[1]' = \"table 1 't1' columns [0, 32) rows [0, 2000) on "
        "device 1\": expected a placement that table 1 on device 0 admits");

  // Two pieces of t1 on device 1: both refused; a piece out of range is not asked.
  auto split = good_plan(t);
  split.shards[1].row_end = 1000;
  split.shards.push_back(
      {.table = 1, .device = 1, .col_end = 32, .row_begin = 1000, .row_end = 2000});
  split.shards.push_back({.table = 1, .device = 7, .col_end = 32, .row_end = 10, .replica = true});
  const auto all = embplan::check_plan(t, split, pin{.table = 1, .device = 0});
  REQUIRE(all.size() == 3);
  CHECK(all[0].kind == embplan::plan_problem_kind::device_index);
  CHECK(all[1].message.find("'shards[1]'") != std::string::npos);
  CHECK(all[2].message.find("'shards[3]'") != std::string::npos);
}

TEST_CASE("check_plan: several problems at once, all reported; validate throws the first") {
  const auto t = small_task();
  auto bad = good_plan(t);
  bad.shards[0].device = 1;                             // memory of device 1
  bad.shards[2].row_begin = 600;                        // t2: rows [600, 500), illegal
  bad.shards.push_back(embplan::whole_table(t, 1, 0));  // t1 twice
  const auto problems = embplan::check_plan(t, bad, pin{.table = 0, .device = 0});
  const std::vector<embplan::plan_problem_kind> kinds{
      embplan::plan_problem_kind::shape, embplan::plan_problem_kind::overlap,
      embplan::plan_problem_kind::memory, embplan::plan_problem_kind::constraint};
  REQUIRE(problems.size() == kinds.size());
  for (std::size_t i = 0; i < kinds.size(); ++i)
    CHECK(problems[i].kind == kinds[i]);
  CHECK_THROWS_WITH_AS(embplan::validate(t, bad), problems[0].message.c_str(), embplan::error);
}

TEST_CASE("a plan that lost a table never leaves a planner; check_plan names the table") {
  const auto t = small_task();
  const embplan::planner<embplan::analytic_cost, forgetful, embplan::paper_constraint,
                         embplan::neg_max_cost_reward>
      p;
  CHECK_THROWS_WITH_AS(p(t, 0),
                       "field 'tables[2]' = \"t2\": expected a table covered by at least one shard",
                       embplan::error);
  const auto plan =
      forgetful{}.search(t, embplan::analytic_cost{}, embplan::paper_constraint{}, 0, 0).placement;
  CHECK(texts(embplan::check_plan(t, plan, embplan::paper_constraint{})) ==
        std::vector<std::string>{"table 2 't2': field 'tables[2]' = \"t2\": expected a table "
                                 "covered by at least one shard"});
}
