// The umbrella header: everything in one include, used end to end — a task from
// the data protocols, planned by a preset, checked against the lower bound and
// round-tripped through the JSON plan format.
#include "embplan/embplan.hpp"

#include <doctest/doctest.h>

#include <string>
#include <type_traits>

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

// Every name lives in the inline ABI namespace that version.hpp derives from
// the version, v<major>_<minor>, and is reachable without naming it.
#define EMBPLAN_TEST_STR_(x) #x
#define EMBPLAN_TEST_STR(x) EMBPLAN_TEST_STR_(x)
static_assert(std::is_same_v<embplan::plan_result, embplan::EMBPLAN_ABI::plan_result>);
static_assert(std::is_same_v<embplan::stage::staged<embplan::sorted_greedy>,
                             embplan::EMBPLAN_ABI::stage::staged<embplan::sorted_greedy>>);

TEST_CASE("the ABI namespace is named after the version") {
  CHECK(std::string(EMBPLAN_TEST_STR(EMBPLAN_ABI)) ==
        "v" + std::to_string(EMBPLAN_VERSION_MAJOR) + "_" + std::to_string(EMBPLAN_VERSION_MINOR));
  CHECK(EMBPLAN_VERSION ==
        EMBPLAN_VERSION_MAJOR * 10000 + EMBPLAN_VERSION_MINOR * 100 + EMBPLAN_VERSION_PATCH);
}
