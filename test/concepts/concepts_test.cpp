// Every policy models its concept; the archetypes do too; things that miss one
// member do not. The checks are static_asserts, so this file fails to compile
// when a policy drifts from its contract; the runtime case drives a searcher
// with the archetypes alone.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/detail/archetypes.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/max_device_dim.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/memory_penalty.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/random_placement.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/sorted_greedy.hpp"

namespace {

namespace arch = embplan::concepts::detail;

static_assert(embplan::cost_model<arch::cost_model_archetype>);
static_assert(embplan::constraint<arch::constraint_archetype>);
static_assert(embplan::reward<arch::reward_archetype>);

static_assert(embplan::cost_model<embplan::size_cost>);
static_assert(embplan::cost_model<embplan::dim_cost>);
static_assert(embplan::cost_model<embplan::lookup_cost>);
static_assert(embplan::cost_model<embplan::size_lookup_cost>);
static_assert(embplan::cost_model<embplan::analytic_cost>);

static_assert(embplan::constraint<embplan::memory_capacity>);
static_assert(embplan::constraint<embplan::dim_multiple>);
static_assert(embplan::constraint<embplan::max_device_dim>);
static_assert(embplan::constraint<embplan::default_constraint>);
static_assert(embplan::constraint<embplan::all_of<>>);
static_assert(
    embplan::constraint<embplan::all_of<embplan::default_constraint, embplan::max_device_dim>>);

static_assert(embplan::reward<embplan::balance_reward>);
static_assert(embplan::reward<embplan::neg_max_cost_reward>);
static_assert(embplan::reward<embplan::memory_penalty_reward>);

static_assert(embplan::searcher<embplan::random_placement>);
static_assert(embplan::searcher<embplan::sorted_greedy>);
static_assert(embplan::searcher<embplan::random_search>);
static_assert(embplan::searcher_for<embplan::sorted_greedy, embplan::analytic_cost,
                                    embplan::default_constraint, embplan::balance_reward>);

// Nothing else passes for a policy.
static_assert(!embplan::cost_model<int>);
static_assert(!embplan::constraint<int>);
static_assert(!embplan::reward<int>);
static_assert(!embplan::searcher<int>);
// A policy of one kind is not one of another.
static_assert(!embplan::cost_model<embplan::balance_reward>);
static_assert(!embplan::reward<embplan::memory_capacity>);
static_assert(!embplan::constraint<embplan::analytic_cost>);
static_assert(!embplan::searcher<embplan::lookup_cost>);
static_assert(!embplan::searcher_for<embplan::sorted_greedy, int, embplan::default_constraint,
                                     embplan::balance_reward>);

// One member short of the contract.
struct no_communication {
  std::string_view name() const { return "x"; }
  double shard_cost(const embplan::task&, const embplan::shard&) const { return 0.0; }
  embplan::compute_cost compute(const embplan::task&, std::span<const embplan::shard>,
                                std::size_t) const {
    return {};
  }
};
static_assert(!embplan::cost_model<no_communication>);

struct compute_returns_double {  // compute must return compute_cost exactly
  std::string_view name() const { return "x"; }
  double shard_cost(const embplan::task&, const embplan::shard&) const { return 0.0; }
  double compute(const embplan::task&, std::span<const embplan::shard>, std::size_t) const {
    return 0.0;
  }
  void communication(const embplan::task&, std::span<const std::int64_t>, std::span<const double>,
                     std::span<embplan::comm_cost>) const {}
};
static_assert(!embplan::cost_model<compute_returns_double>);

struct no_describe {
  bool admits(const embplan::task&, const embplan::placement_state&, const embplan::shard&) const {
    return true;
  }
};
static_assert(!embplan::constraint<no_describe>);

struct mutating_admits {  // admits must be callable on a const constraint
  bool admits(const embplan::task&, const embplan::placement_state&, const embplan::shard&) {
    return true;
  }
  std::string describe() const { return "x"; }
};
static_assert(!embplan::constraint<mutating_admits>);

struct no_score {
  std::string_view name() const { return "x"; }
};
static_assert(!embplan::reward<no_score>);

struct no_search {
  std::string_view name() const { return "x"; }
};
static_assert(!embplan::searcher<no_search>);

struct plan_instead_of_result {  // search must return search_result
  std::string_view name() const { return "x"; }
  template <class M, class C, class R>
  embplan::plan search(const embplan::task&, const M&, const C&, const R&, std::uint64_t) const {
    return {};
  }
};
static_assert(!embplan::searcher<plan_instead_of_result>);

}  // namespace

TEST_CASE("a searcher runs on the archetypes alone") {
  embplan::task t;
  t.cluster = embplan::uniform_topology(3);
  for (int i = 0; i < 6; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 10 * (i + 1);
    s.dim = 4;
    t.tables.push_back(s);
  }
  const auto r = embplan::sorted_greedy{}.search(
      t, arch::cost_model_archetype{}, arch::constraint_archetype{}, arch::reward_archetype{}, 0);
  REQUIRE(r.ok);
  // Every cost is 0, so the memory tie-break alone spreads the tables: the
  // largest first, each to the device with the least memory taken.
  const auto st = embplan::state_of(t, r.placement);
  CHECK(st.memory_bytes ==
        std::vector<std::uint64_t>{(60 + 10) * 16, (50 + 20) * 16, (40 + 30) * 16});
}
