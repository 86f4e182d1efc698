// The umbrella header: everything in one include, used end to end — a task from
// the data protocols, planned by a preset, checked against the lower bound and
// round-tripped through the JSON plan format.
#include "embplan/embplan.hpp"

#include <doctest/doctest.h>

#include <string>

TEST_CASE("embplan.hpp plans a NeuroShard-protocol task end to end") {
  const auto pool = embplan::data::synthetic_pool({.tables = 200, .seed = 1});
  const auto tasks =
      embplan::data::generate_tasks(pool, {.devices = 4, .max_dim = 32, .count = 2, .seed = 2});
  REQUIRE(tasks.size() == 2);
  for (const auto& t : tasks) {
    const auto r = embplan::lookup_greedy_planner{}(t, 0);
    REQUIRE(r.ok);
    // The bound is in the search model's units (lookups x columns), as is search_cost.
    CHECK(r.search_unit == embplan::cost_unit::heuristic);
    CHECK(r.search_cost.max_ms() >= embplan::additive_lower_bound(t, embplan::lookup_cost{}));
    CHECK(r.meter == "analytic");
    const auto back = embplan::io::plan_from_json(embplan::io::to_json(t, r.placement), t);
    CHECK(back == r.placement);
  }
}
