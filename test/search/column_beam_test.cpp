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
