#include "embplan/planner.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/max_device_dim.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/memory_penalty.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/lower_bound.hpp"
#include "embplan/search/sorted_greedy.hpp"

#include "support/random_task.hpp"

namespace {

embplan::task dims_task(std::uint64_t seed, std::size_t tables) {
  return embplan_test::random_task(seed, {.tables = tables});
}

}  // namespace

TEST_CASE("a planner composed with knobs: analytic greedy under a device-dim bound") {
  using rule =
      embplan::all_of<embplan::memory_capacity, embplan::dim_multiple, embplan::max_device_dim>;
  const auto t = dims_task(4, 40);
  std::int64_t total_dim = 0;
  for (const auto& s : t.tables)
    total_dim += s.dim;
  const std::int64_t bound = total_dim / 4 + 128;
  const embplan::planner<embplan::analytic_cost, embplan::sorted_greedy, rule,
                         embplan::neg_max_cost_reward>
      p{embplan::analytic_cost{{.backward_factor = 2.0}}, embplan::sorted_greedy{},
        rule{embplan::memory_capacity{}, embplan::dim_multiple{}, embplan::max_device_dim{bound}},
        embplan::neg_max_cost_reward{}};
  const auto r = p(t, 0);
  REQUIRE(r.ok);
  for (const auto d : r.cost_ms.dim_sum)
    CHECK(d <= bound);
  CHECK(r.reward == -r.cost_ms.max_ms());
  // Analytic costs only add launches and communication to the additive part.
  CHECK(r.cost_ms.max_ms() >= embplan::additive_lower_bound(t, p.cost()));
  CHECK(p.rule().describe() ==
        "memory capacity and columns a multiple of 4 and device dim at most " +
            std::to_string(bound));
}

TEST_CASE("the planner validates the task before searching") {
  auto t = dims_task(1, 3);
  t.tables[1].rows = -5;
  const embplan::planner<embplan::dim_cost, embplan::sorted_greedy, embplan::memory_capacity,
                         embplan::memory_penalty_reward>
      p;
  CHECK_THROWS_WITH_AS((void)p(t), doctest::Contains("field 'task.tables[1].rows' = -5"),
                       embplan::error);
}

TEST_CASE("the planner fails a plan over a device's host DRAM, whatever its constraint") {
  auto t = dims_task(2, 6);
  for (auto& s : t.tables)
    s.placement = {embplan::memory_tier::host, 0.0};
  // dim_multiple alone does not look at memory; the planner does.
  const embplan::planner<embplan::dim_cost, embplan::sorted_greedy, embplan::dim_multiple,
                         embplan::neg_max_cost_reward>
      p;
  REQUIRE(p(t).ok);  // not limited
  for (auto& d : t.cluster.devices)
    d.dram_bytes = 1;
  const auto r = p(t);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find(" bytes of host DRAM, more than its 1") != std::string::npos);
}
