#include "embplan/search/column_beam.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/grid_greedy.hpp"

#include "support/random_task.hpp"

namespace {

using embplan_test::search_task;

// Small beam: the tests run under ASan at -O1.
constexpr embplan::column_beam small{.candidates = 4, .width = 2, .steps = 4, .grid = 5};

}  // namespace

TEST_CASE("column beam: never worse than its unsplit table-wise plan; pieces multiples of 4") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    const auto t = search_task(seed, 12 + 4 * seed, seed % 2 ? 8 : 4);
    const auto start = embplan::grid_greedy{.grid = small.grid}.search(t, model, rule, reward, 0);
    const auto r = small.search(t, model, rule, reward, 0);
    REQUIRE(start.ok);
    REQUIRE(r.ok);
    CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
    CHECK(embplan::evaluate(t, r.placement, model).max_ms() <=
          embplan::evaluate(t, start.placement, model).max_ms());
    CHECK(r.cache_hits > 0);
    CHECK(r.cache_hits <= r.cache_lookups);
  }
}

TEST_CASE("column beam splits a table too large for any device, in halves of 4-multiples") {
  auto t = search_task(7, 8, 4, 128u << 20);
  t.tables[3].name = "wide";
  t.tables[3].dim = 128;
  t.tables[3].rows = 300'000;  // 128 x 4 B x 3e5 = 146 MiB > 128 MiB per device
  const embplan::analytic_cost model;
  const auto r =
      small.search(t, model, embplan::default_constraint{}, embplan::neg_max_cost_reward{}, 0);
  REQUIRE(r.ok);
  CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
  int pieces = 0;
  for (const auto& s : r.placement.shards) {
    if (s.table != 3) continue;
    ++pieces;
    CHECK(s.cols() % 4 == 0);
    CHECK(s.cols() < 128);
  }
  CHECK(pieces >= 2);
  // Table-wise search alone cannot place it.
  CHECK_FALSE(
      embplan::grid_greedy{}
          .search(t, model, embplan::default_constraint{}, embplan::neg_max_cost_reward{}, 0)
          .ok);
}

TEST_CASE("column beam: hyperparameters <= 0 are rejected by name and value") {
  const auto t = search_task(1, 6);
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  const auto rejects = [&](embplan::column_beam b, const std::string& field, int value) {
    const std::string expected = "column_beam." + field + "' = " + std::to_string(value);
    CHECK_THROWS_WITH_AS(b.search(t, model, rule, reward, 0), doctest::Contains(expected.c_str()),
                         embplan::error);
  };
  rejects({.candidates = 0}, "candidates", 0);
  rejects({.width = -1}, "width", -1);
  rejects({.steps = 0}, "steps", 0);
  rejects({.grid = -2}, "grid", -2);
  rejects({.threads = 0}, "threads", 0);
}

TEST_CASE("column beam: the plan is the same on 1, 2 and 3 threads") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    CAPTURE(seed);
    const auto t = search_task(20 + seed, 16 + 6 * seed, seed % 2 ? 8 : 4);
    const auto one = small.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
    REQUIRE(one.ok);
    for (const std::int32_t threads : {2, 3}) {
      CAPTURE(threads);
      auto b = small;
      b.threads = threads;
      const auto many = b.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
      REQUIRE(many.ok);
      CHECK(many.placement == one.placement);
      // The same look-ups; each thread caches what it priced, so fewer hit.
      CHECK(many.cache_lookups == one.cache_lookups);
      CHECK(many.cache_hits <= one.cache_hits);
    }
  }
}

TEST_CASE("column beam: an infeasible task names the table and why") {
  auto t = search_task(2, 6, 2, 16u << 20);
  t.tables[4].name = "monster";
  t.tables[4].rows = 2'000'000'000;
  t.tables[4].dim = 8;
  const auto r = small.search(t, embplan::analytic_cost{}, embplan::default_constraint{},
                              embplan::neg_max_cost_reward{}, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find("monster") != std::string::npos);
  CHECK(r.failure.find("memory") != std::string::npos);
  CHECK(r.failure.find("column-wise split") != std::string::npos);
}

TEST_CASE("neuroshard planner: deterministic, and one planner serves 4 threads alike") {
  const auto t = search_task(11, 30, 4);
  const embplan::planner<embplan::analytic_cost, embplan::column_beam, embplan::default_constraint,
                         embplan::neg_max_cost_reward>
      p{{}, small, {}, {}};
  const auto ref = p(t, 1);
  REQUIRE(ref.ok);
  CHECK(p(t, 2).placement == ref.placement);  // no randomness
  std::vector<embplan::plan_result> got(4);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < 4; ++k)
    threads.emplace_back([&, k] { got[k] = p(t, 1); });
  for (auto& th : threads)
    th.join();
  for (const auto& g : got) {
    CHECK(g.placement == ref.placement);
    CHECK(g.cost_ms.max_ms() == ref.cost_ms.max_ms());
    CHECK(g.cache_lookups == ref.cache_lookups);
    CHECK(g.cache_hits == ref.cache_hits);
  }
}

TEST_CASE("column beam improvements: each switch changes the search somewhere") {
  // Every improvement off but one, against all off (the authors' search):
  // each switch must change the plan or the work on some of these tasks, and
  // every plan stays valid. (Switch 5, clamped communication, needs a model
  // that can predict below zero, and switch 6, exact bounds, a trajectory
  // that reaches a bound the authors' doubles round down: the next test
  // checks the bounds, the parity golden test the rest.)
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  using imp = embplan::column_beam_improvements;
  const std::vector<std::pair<const char*, imp>> one_on{
      {"splittable_candidates", {false, false, false, false, false, false}},
      {"distinct_states", {false, true, false, false, false, false}},
      {"unbounded_fallback", {false, false, true, false, false, false}},
      {"rank_infeasible", {false, false, false, true, false, false}},
  };
  std::vector<embplan::task> tasks;
  for (std::uint64_t seed = 0; seed < 12; ++seed)
    tasks.push_back(search_task(40 + seed, 8 + 3 * seed, seed % 3 ? 4 : 2, 96u << 20));
  // Tables wider than 1.5 x the mean device dim and unsplittable (12 columns):
  // no bound of the grid fits them.
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    auto t = search_task(60 + seed, 3, 3);
    t.tables[0].dim = 12;
    t.tables[1].dim = 4;
    t.tables[2].dim = 4;
    tasks.push_back(std::move(t));
  }
  auto base = small;
  base.improve = imp::none();
  base.candidates = 3;
  for (auto [label, improve] : one_on) {
    const std::string name = label;
    CAPTURE(name);
    if (name == "splittable_candidates") improve.splittable_candidates = true;
    auto with = base;
    with.improve = improve;
    int changed = 0;
    for (const auto& t : tasks) {
      const auto a = base.search(t, model, rule, reward, 0);
      const auto b = with.search(t, model, rule, reward, 0);
      if (a.ok)
        CHECK_NOTHROW(embplan::validate(t, a.placement, {.dim_multiple = 4, .memory = true}));
      if (b.ok)
        CHECK_NOTHROW(embplan::validate(t, b.placement, {.dim_multiple = 4, .memory = true}));
      if (a.ok != b.ok || a.placement != b.placement || a.cache_lookups != b.cache_lookups)
        ++changed;
    }
    CHECK(changed > 0);
  }
}

TEST_CASE("column beam: the authors' float grid bounds and the exact ones") {
  // 400 columns on 4 devices, 11 grid points: 100, 105, 110, 115, ... exactly;
  // in the authors' doubles 1.15 x 100 is 114.99999999999999 and 1.1 x 100 is
  // 110.00000000000001.
  const auto exact = embplan::search::detail::dim_bounds(400, 4, 11);
  const auto authors = embplan::search::detail::python_dim_bounds(400, 4, 11);
  REQUIRE(exact.size() == 11);
  REQUIRE(authors.size() == 11);
  CHECK(exact[2] == 110);
  CHECK(authors[2] == 110);
  CHECK(exact[3] == 115);
  CHECK(authors[3] == 114);
  for (std::size_t k : {0u, 1u, 4u, 10u})
    CHECK(exact[k] == authors[k]);
  // One grid point: the mean device dim alone.
  CHECK(embplan::search::detail::python_dim_bounds(400, 4, 1) == std::vector<std::int64_t>{100});
}

TEST_CASE("faithful column beam: no plan where no grid bound fits and no split helps") {
  // A 12-column table (unsplittable: halves of 6) on 3 devices with two
  // 4-column tables: the bounds reach 1.5 x 20 / 3 = 10 < 12. The authors'
  // search finds no plan; embplan's unbounded pass does.
  auto t = search_task(5, 3, 3);
  t.tables[0].dim = 12;
  t.tables[1].dim = 4;
  t.tables[2].dim = 4;
  const embplan::analytic_cost model;
  const auto faithful = embplan::faithful_column_beam{}.search(
      t, model, embplan::default_constraint{}, embplan::neg_max_cost_reward{}, 0);
  CHECK_FALSE(faithful.ok);
  CHECK(faithful.failure.find("device dim at most") != std::string::npos);
  const auto plus = embplan::column_beam{}.search(t, model, embplan::default_constraint{},
                                                  embplan::neg_max_cost_reward{}, 0);
  CHECK(plus.ok);
}
