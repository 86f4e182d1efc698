#pragma once
// planner<CostModel, Searcher, Constraint, Reward>: the composition of the four
// policies (DESIGN.md, "The policies"). Thin public entry: it validates the
// task, runs the searcher, checks the plan it returns and prices it with the
// cost model. A planner is a const-callable value: no mutable state, so one
// instance may serve several threads; the seed is the only source of chance.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"

namespace embplan {

struct plan_result {
  plan placement;
  bool ok = false;
  std::string failure;  // when !ok: why no plan exists (names the table and devices)
  plan_cost cost;       // simulated by the planner's own cost model
  double reward = 0.0;
  double sharding_ms = 0.0;  // wall time of the search
  std::uint64_t evaluations = 0;
  std::uint64_t cache_lookups = 0;  // the searcher's cost cache, if it has one
  std::uint64_t cache_hits = 0;
};

template <class CostModel, class Searcher, class Constraint, class Reward>
class planner {
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
                "for these policies (name, search(task, cost, constraint, reward, seed))");

 public:
  using cost_model_type = CostModel;
  using searcher_type = Searcher;
  using constraint_type = Constraint;
  using reward_type = Reward;

  planner() = default;
  planner(CostModel cost, Searcher search, Constraint rule, Reward score)
      : cost_(std::move(cost))
      , search_(std::move(search))
      , constraint_(std::move(rule))
      , reward_(std::move(score)) {}

  plan_result operator()(const task& t, std::uint64_t seed = 0) const {
    validate(t);
    const auto start = std::chrono::steady_clock::now();
    search_result found = search_.search(t, cost_, constraint_, reward_, seed);
    const auto stop = std::chrono::steady_clock::now();

    plan_result out;
    out.sharding_ms = std::chrono::duration<double, std::milli>(stop - start).count();
    out.evaluations = found.evaluations;
    out.cache_lookups = found.cache_lookups;
    out.cache_hits = found.cache_hits;
    out.ok = found.ok;
    out.failure = std::move(found.failure);
    out.placement = std::move(found.placement);
    if (!out.ok) return out;
    // A searcher that breaks coverage is a bug and throws; one whose plan does
    // not fit memory simply failed the task (it counts against success rate).
    validate(out.placement, t, plan_check{.dim_multiple = 0, .memory = false});
    out.cost = evaluate(t, out.placement, cost_);
    out.reward = reward_.score(t, out.cost);
    for (std::size_t d = 0; d < t.cluster.size(); ++d) {
      if (out.cost.memory_bytes[d] > t.cluster.devices[d].memory_bytes) {
        out.ok = false;
        out.failure = "device " + std::to_string(d) + " holds " +
                      std::to_string(out.cost.memory_bytes[d]) + " bytes, more than its " +
                      std::to_string(t.cluster.devices[d].memory_bytes);
        break;
      }
    }
    return out;
  }

  const CostModel& cost() const noexcept { return cost_; }
  const Searcher& searcher() const noexcept { return search_; }
  const Constraint& rule() const noexcept { return constraint_; }
  const Reward& scorer() const noexcept { return reward_; }

 private:
  CostModel cost_{};
  Searcher search_{};
  Constraint constraint_{};
  Reward reward_{};
};

}  // namespace embplan
