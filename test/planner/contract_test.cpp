// The policies' contract as the planner enforces it (docs/design.md, "Principles"):
// no plan leaves a planner that its Constraint refuses, and a constraint that
// names a table by index means the caller's table through every wrapper.

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/grid_greedy.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/random_placement.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/sorted_greedy.hpp"
#include "embplan/search/torchrec_like.hpp"
#include "embplan/stage/staged.hpp"

#include "support/pin.hpp"
#include "support/random_task.hpp"

namespace {

using embplan_test::pin;

using pinned = embplan::all_of<embplan::memory_capacity, embplan::dim_multiple, pin>;

// The repro: 5 tables on 4 devices of 1 GiB; table 1 (2 GiB) is larger
// than every device, so stage::staged searches a sub-task without it, in
// which the caller's table 3 is the sub-task's table 2.
embplan::task oversized_task() {
  auto t = embplan_test::random_task(
      7, {.tables = 5, .devices = 4, .device_memory_bytes = embplan::gib, .max_rows = 50'000});
  t.tables[1].name = "huge";
  t.tables[1].rows = 4'000'000;
  t.tables[1].dim = 128;  // 2 GiB in fp32
  return t;
}

// Every plan: each shard of the pinned table on its device, none refused.
void check_pinned(const embplan::plan_result& r, const embplan::task& t, const pin& rule) {
  REQUIRE_MESSAGE(r.ok, r.failure);
  bool seen = false;
  for (const auto& s : r.placement.shards) {
    if (s.table != rule.table) continue;
    seen = true;
    CHECK(s.device == rule.device);
  }
  CHECK(seen);
  CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
}

template <class Searcher>
void check_every_wrapper(const Searcher& search, std::string_view label) {
  CAPTURE(label);
  const auto t = oversized_task();
  for (const std::uint32_t device : {0u, 2u, 3u}) {
    CAPTURE(device);
    const pin rule{.table = 3, .device = device};
    // Behind the stage, rows split: the oversized table is split by rows, the rest
    // searched as a sub-task; the pin still means the caller's table 3.
    using wrapped = embplan::stage::staged<Searcher>;
    const embplan::planner<embplan::analytic_cost, wrapped, pinned, embplan::neg_max_cost_reward> p(
        {}, wrapped{.inner = search, .settings = {.split_rows = true}}, pinned{{}, {}, rule}, {});
    const auto r = p(t, 5);
    check_pinned(r, t, rule);
    // Without the oversized table, the searcher alone honours it too.
    auto small = t;
    small.tables[1].rows = 1000;
    const embplan::planner<embplan::analytic_cost, Searcher, pinned, embplan::neg_max_cost_reward>
        plain({}, search, pinned{{}, {}, rule}, {});
    check_pinned(plain(small, 5), small, rule);
  }
}

// A searcher that ignores its constraint: everything on device 1.
struct careless {
  std::string_view name() const noexcept { return "careless"; }
  template <class M, class C, class R>
  embplan::search_result search(const embplan::task& t, const M&, const C&, const R&,
                                std::uint64_t) const {
    embplan::search_result out;
    std::vector<std::size_t> all_on_one(t.tables.size(), 1);
    out.placement = embplan::table_wise_plan(t, all_on_one);
    out.ok = true;
    return out;
  }
};

}  // namespace

TEST_CASE("a pin by table index holds behind stage::staged (the issue's repro)") {
  const auto t = oversized_task();
  const pin rule{.table = 3, .device = 2};
  using p_t =
      embplan::planner<embplan::analytic_cost, embplan::stage::staged<embplan::sorted_greedy>,
                       pinned, embplan::neg_max_cost_reward>;
  const auto r = p_t({}, {.settings = {.split_rows = true}}, pinned{{}, {}, rule}, {})(t, 0);
  check_pinned(r, t, rule);
  // Table 1 was split by rows, table 4 (the sub-task's table 3) is free to go anywhere.
  std::size_t row_pieces = 0;
  for (const auto& s : r.placement.shards)
    row_pieces += s.table == 1 ? 1 : 0;
  CHECK(row_pieces >= 2);
}

TEST_CASE("every searcher and wrapper honours a constraint that names a table") {
  check_every_wrapper(embplan::random_placement{}, "random");
  check_every_wrapper(embplan::sorted_greedy{}, "sorted_greedy");
  check_every_wrapper(embplan::random_search{.budget = 20}, "random_search");
  check_every_wrapper(embplan::grid_greedy{}, "grid_greedy");
  check_every_wrapper(embplan::column_beam{}, "column_beam");
  check_every_wrapper(embplan::local_search<embplan::column_beam>{}, "local_search");
  check_every_wrapper(embplan::torchrec_like{}, "torchrec_like");
}

TEST_CASE("the planner replays the plan through the constraint and names the violation") {
  const auto t = embplan_test::random_task(3, {.tables = 6});
  const pin rule{.table = 2, .device = 0};
  const embplan::planner<embplan::analytic_cost, careless, pinned, embplan::neg_max_cost_reward> p(
      {}, {}, pinned{{}, {}, rule}, {});
  const auto r = p(t, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.failure ==
        "searcher 'careless' violated memory capacity and columns a multiple of 4 and table 2 on "
        "device 0 at shard 2: table 2 't2' columns [0, " +
            std::to_string(t.tables[2].dim) + ") rows [0, " + std::to_string(t.tables[2].rows) +
            ") on device 1");
  // The same searcher under a rule it happens to keep: the plan stands.
  const embplan::planner<embplan::analytic_cost, careless, pinned, embplan::neg_max_cost_reward>
      kept({}, {}, pinned{{}, {}, pin{.table = 2, .device = 1}}, {});
  CHECK(kept(t, 0).ok);
}

TEST_CASE("a planner that searches on a heuristic reports its plan in ms of a named meter") {
  const auto t = embplan_test::random_task(5, {.tables = 12});
  const embplan::planner<embplan::lookup_cost, embplan::sorted_greedy, embplan::default_constraint,
                         embplan::neg_max_cost_reward>
      p;
  static_assert(std::is_same_v<decltype(p)::meter_type, embplan::analytic_cost>);
  const auto r = p(t, 0);
  REQUIRE(r.ok);
  CHECK(r.search_model == "lookup");
  CHECK(r.search_unit == embplan::cost_unit::heuristic);
  CHECK(r.meter == "analytic");
  CHECK(r.cost_ms.max_ms() == embplan::evaluate(t, r.placement, embplan::analytic_cost{}).max_ms());
  CHECK(r.search_cost.max_ms() ==
        embplan::evaluate(t, r.placement, embplan::lookup_cost{}).max_ms());
  CHECK(r.reward == -r.search_cost.max_ms());
  // A model in ms prices its own plans.
  const embplan::planner<embplan::analytic_cost, embplan::sorted_greedy,
                         embplan::default_constraint, embplan::neg_max_cost_reward>
      ms;
  const auto m = ms(t, 0);
  CHECK(m.meter == "analytic");
  CHECK(m.search_unit == embplan::cost_unit::ms);
  CHECK(m.cost_ms.max_ms() == m.search_cost.max_ms());
}
