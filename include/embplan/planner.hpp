#pragma once
// planner<CostModel, Searcher, Constraint, Reward, Meter>: the composition of
// the four policies (docs/design.md, "The four policies"). Thin public entry: it
// validates the task, runs the searcher, holds the returned plan to the
// policies' contract and prices it. A planner is a const-callable value: no
// mutable state, so one instance may serve several threads; the seed is the
// only source of chance.
//
// The contract a returned plan is held to (docs/design.md, "Principles"):
//  - it covers every table exactly once (a searcher that breaks coverage is a
//    bug: embplan::error is thrown);
//  - the Constraint admits it: the planner replays the plan's shards, in plan
//    order, through Constraint::admits, keeping the per-table record whatever
//    the constraint promises (reads_table_record); a plan it refuses is not ok, and the
//    failure names the searcher, the rule and the shard ("searcher 'x'
//    violated memory capacity at shard 3 ...");
//  - every device holds it in memory: HBM, and host DRAM where limited.
// Searching on and pricing by are two things: the Searcher searches on
// CostModel (whose numbers may be heuristic scores, cost_unit_of<CostModel>),
// and the plan is reported priced by Meter, always in milliseconds
// (plan_result::cost_ms). Meter defaults to CostModel where that is in ms,
// else to the analytic model.

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "embplan/check_plan.hpp"
#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/host_dram.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// What a planner returns: the searcher's result (placement, ok, failure,
// evaluations, cache use), the plan priced in milliseconds by a named meter,
// and what the searcher optimised.
struct plan_result : search_result {
  plan_cost cost_ms{};                    // the plan priced by `meter`: milliseconds, always
  std::string meter{};                    // name of the cost model that priced cost_ms
  std::string search_model{};             // name of the cost model the searcher searched on
  cost_unit search_unit = cost_unit::ms;  // the unit of search_cost
  plan_cost search_cost{};                // the plan priced by the search model, in search_unit
  double reward = 0.0;       // Reward::score(task, search_cost): what the searcher optimised
  double sharding_ms = 0.0;  // wall time of the search
};

// The model a planner prices its plans with when none is given: the search
// model where its numbers are milliseconds, else the analytic model.
template <class CostModel>
using default_meter_t =
    std::conditional_t<cost_unit_of<CostModel> == cost_unit::ms, CostModel, analytic_cost>;

namespace detail {

template <class S>
concept named = requires(const S& s) {
  { s.name() } -> std::convertible_to<std::string_view>;
};

template <class S, class M, class C, class R>
concept can_search = requires(const S& s, const task& t, const M& m, const C& c, const R& r,
                              std::uint64_t seed) {
  s.search(t, m, c, r, seed);
};

// The return type of S::search where S has one, else void.
template <class S, class M, class C, class R>
auto search_return() {
  if constexpr (can_search<S, M, C, R>) {
    return std::type_identity<decltype(std::declval<const S&>().search(
        std::declval<const task&>(), std::declval<const M&>(), std::declval<const C&>(),
        std::declval<const R&>(), std::uint64_t{}))>{};
  } else {
    return std::type_identity<void>{};
  }
}

}  // namespace detail

template <class CostModel, class Searcher, class Constraint, class Reward,
          class Meter = default_meter_t<CostModel>>
class planner {
  // The searcher's requirements one by one, so that the diagnostic says which
  // one a candidate misses (the summary assertion below still fires).
  static constexpr bool policies_ok =
      cost_model<CostModel> && constraint<Constraint> && reward<Reward>;
  static_assert(!policies_ok || detail::named<Searcher>,
                "embplan::planner: the Searcher has no const member name() returning a "
                "string_view");
  static_assert(!policies_ok || detail::can_search<Searcher, CostModel, Constraint, Reward>,
                "embplan::planner: the Searcher has no const member "
                "search(const task&, const CostModel&, const Constraint&, const Reward&, "
                "std::uint64_t seed) callable with these policies");
  static_assert(
      !policies_ok || !detail::can_search<Searcher, CostModel, Constraint, Reward> ||
          std::same_as<typename decltype(detail::search_return<Searcher, CostModel, Constraint,
                                                               Reward>())::type,
                       search_result>,
      "embplan::planner: Searcher::search(...) must return embplan::search_result "
      "(placement, ok, failure, evaluations, cache counts)");
  static_assert(cost_model<CostModel>,
                "embplan::planner: the first parameter must model embplan::cost_model "
                "(name, shard_cost, compute, communication; see concepts/cost_model.hpp)");
  static_assert(constraint<Constraint>,
                "embplan::planner: the third parameter must model embplan::constraint "
                "(admits, describe; see concepts/constraint.hpp)");
  static_assert(reward<Reward>,
                "embplan::planner: the fourth parameter must model embplan::reward "
                "(name, score; see concepts/reward.hpp)");
  static_assert(!(cost_model<CostModel> && constraint<Constraint> && reward<Reward>) ||
                    searcher_for<Searcher, CostModel, Constraint, Reward>,
                "embplan::planner: the second parameter must model embplan::searcher "
                "for these policies: name() and a const member "
                "search(task, cost, constraint, reward, seed) returning embplan::search_result "
                "(see concepts/searcher.hpp)");
  static_assert(cost_model<Meter> && cost_unit_of<Meter> == cost_unit::ms,
                "embplan::planner: the fifth parameter (Meter) must be a cost model in "
                "milliseconds: a planner reports its plans in ms (e.g. embplan::analytic_cost)");

 public:
  using cost_model_type = CostModel;
  using searcher_type = Searcher;
  using constraint_type = Constraint;
  using reward_type = Reward;
  using meter_type = Meter;

  planner() = default;
  planner(CostModel cost, Searcher search, Constraint rule, Reward score, Meter meter = {})
      : cost_(std::move(cost))
      , search_(std::move(search))
      , constraint_(std::move(rule))
      , reward_(std::move(score))
      , meter_(std::move(meter)) {}

  plan_result operator()(const task& t, std::uint64_t seed = 0) const {
    validate(t);
    plan_result out;
    const auto start = std::chrono::steady_clock::now();
    static_cast<search_result&>(out) = search_.search(t, cost_, constraint_, reward_, seed);
    const auto stop = std::chrono::steady_clock::now();
    out.sharding_ms = std::chrono::duration<double, std::milli>(stop - start).count();
    out.meter = std::string(meter_.name());
    out.search_model = std::string(cost_.name());
    out.search_unit = cost_unit_of<CostModel>;
    if (!out.ok) return out;

    // A searcher that breaks coverage is a bug and throws; one whose plan the
    // constraint refuses or that does not fit memory failed the task (it
    // counts against the success rate) and says why.
    validate(t, out.placement, plan_check{.dim_multiple = 0, .memory = false});
    if (!replay_constraint(t, out)) return out;
    out.search_cost = evaluate(t, out.placement, cost_);
    if constexpr (std::is_same_v<Meter, CostModel>) {
      out.cost_ms = out.search_cost;
    } else {
      out.cost_ms = evaluate(t, out.placement, meter_);
    }
    out.reward = reward_.score(t, out.search_cost);
    for (std::size_t d = 0; d < t.cluster.size(); ++d) {
      if (out.cost_ms.memory_bytes[d] > t.cluster.devices[d].memory_bytes) {
        out.ok = false;
        out.failure = "device " + std::to_string(d) + " holds " +
                      std::to_string(out.cost_ms.memory_bytes[d]) + " bytes, more than its " +
                      std::to_string(t.cluster.devices[d].memory_bytes);
        break;
      }
    }
    if (out.ok) check_host_dram(t, out);
    return out;
  }

  const CostModel& cost() const noexcept { return cost_; }
  const Searcher& searcher() const noexcept { return search_; }
  const Constraint& rule() const noexcept { return constraint_; }
  const Reward& scorer() const noexcept { return reward_; }
  const Meter& meter() const noexcept { return meter_; }

 private:
  // Host DRAM, whatever the Constraint (as HBM above): a device whose tables
  // off hbm need more than its dram_bytes fails the task. Only where some
  // device's DRAM is limited.
  static void check_host_dram(const task& t, plan_result& out) {
    const auto& devices = t.cluster.devices;
    if (std::none_of(devices.begin(), devices.end(),
                     [](const auto& d) { return d.dram_bytes != 0; }))
      return;
    const auto st = state_of(t, out.placement);
    for (std::size_t d = 0; d < devices.size(); ++d) {
      if (dram_fits(devices[d].dram_bytes, 0, st.dram_bytes[d])) continue;
      out.ok = false;
      out.failure = "device " + std::to_string(d) + " holds " + std::to_string(st.dram_bytes[d]) +
                    " bytes of host DRAM, more than its " + std::to_string(devices[d].dram_bytes);
      return;
    }
  }

  // The plan's shards, in plan order, through Constraint::admits. False (and
  // out.ok = false, out.failure naming searcher, rule and shard) at the first
  // shard the constraint refuses.
  bool replay_constraint(const task& t, plan_result& out) const {
    embplan::replay_constraint(t, out.placement, constraint_, [&](std::size_t i) {
      out.ok = false;
      out.failure = "searcher '" + std::string(search_.name()) + "' violated " +
                    std::string(constraint_.describe()) + " at shard " + std::to_string(i) + ": " +
                    describe_shard(t, out.placement.shards[i]);
      return false;
    });
    return out.ok;
  }

  CostModel cost_{};
  Searcher search_{};
  Constraint constraint_{};
  Reward reward_{};
  Meter meter_{};
};

}  // namespace embplan::inline EMBPLAN_ABI
