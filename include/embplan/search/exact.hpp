#pragma once
// exact_table_wise: the optimum table-wise plan of a small task — the plan the
// Reward scores highest among every table-wise placement the Constraint
// admits, each priced as evaluate() prices it under the planner's cost model
// (compute per device, the backward all-to-all, the forward all-to-all with
// start skew). What the heuristics and NeuroShard's search are measured
// against where the optimum can be known; exponential in the tables, so for
// tens of tables at most.
// Depth-first over the tables (costliest alone first, so good plans come
// early), each to every admitted device, with:
//  - symmetry breaking (`symmetric`, default on): devices equal in everything
//    but their names are interchangeable while empty, so a table goes to only
//    the first empty device of each such class. Exact where the cost model
//    and the constraint see a device only through its spec (every model and
//    constraint of this library); set it off for one that tells devices apart
//    by index;
//  - each device's compute priced once per set of tables, in table order, so
//    the figures are evaluate()'s bit for bit;
//  - under a reward decreasing in max cost and a model whose communication is
//    never negative, complete plans cut at the best cost (plan_pricer.hpp).
// Ties keep the plan found first. Deterministic; the seed is not used.
// A task with more than `max_tables` tables, or whose search would reach more
// than `max_plans` complete plans, throws embplan::error naming the field; a
// task with no table-wise plan fails with the reason of the deepest dead end.
// Design notes: docs/design/exact.md.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/plan_pricer.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct exact_table_wise {
  // Tables the search accepts (at most 32: a device's tables are a bit mask).
  std::uint32_t max_tables = 16;
  // Complete plans it may price before giving up (a bound on its time).
  std::uint64_t max_plans = 20'000'000;
  bool symmetric = true;  // identical devices are interchangeable (see above)

  static constexpr bool uses_reward = true;  // returns the plan the reward scores highest

  std::string_view name() const noexcept { return "exact_table_wise"; }

  void validate() const {
    if (max_tables == 0 || max_tables > 32)
      detail::fail("exact_table_wise.max_tables", max_tables, "1 to 32 tables");
    if (max_plans == 0) detail::fail("exact_table_wise.max_plans", max_plans, "at least 1 plan");
  }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t) const {
    validate();
    if (t.tables.size() > max_tables)
      detail::fail("tables", t.tables.size(),
                   "at most exact_table_wise.max_tables = " + std::to_string(max_tables) +
                       " tables (the exact search is exponential in them)");
    run<CostModel, Constraint, Reward> r(*this, t, model, rule, score);
    return r.solve();
  }

 private:
  template <class CostModel, class Constraint, class Reward>
  class run {
   public:
    run(const exact_table_wise& opt, const task& t, const CostModel& model, const Constraint& rule,
        const Reward& score)
        : opt_(opt)
        , t_(t)
        , model_(model)
        , rule_(rule)
        , score_(score)
        , devices_(t.cluster.size())
        , st_(t)
        , mask_(t.cluster.size(), 0)
        , compute_(t.cluster.size())
        , device_of_(t.tables.size(), 0)
        , kinds_(t, search::detail::device_kinds::by::whole)
        , candidates_(t.tables.size())
        , comm_nonnegative_(search::detail::communication_nonnegative(model, t)) {
      // Tables costliest alone first (ties: lower index first).
      order_.resize(t.tables.size());
      std::iota(order_.begin(), order_.end(), std::size_t{0});
      std::vector<double> alone(t.tables.size());
      for (std::size_t i = 0; i < t.tables.size(); ++i) {
        const shard s = whole_table(t, i, 0);
        alone[i] = model.compute(t, std::span<const shard>(&s, 1), 0).total_ms();
      }
      std::stable_sort(order_.begin(), order_.end(),
                       [&](std::size_t a, std::size_t b) { return alone[a] > alone[b]; });
      for (std::size_t d = 0; d < devices_; ++d)
        compute_[d] = compute_of(d);
    }

    search_result solve() {
      search_result out;
      descend(0);
      out.evaluations = computed_ + pricer_.calls();
      if (!best_ok_) {
        out.failure = failure_.empty() ? "no table-wise plan" : failure_;
        return out;
      }
      out.placement.shards.reserve(t_.tables.size());
      for (std::size_t i = 0; i < t_.tables.size(); ++i)
        out.placement.shards.push_back(whole_table(t_, i, best_device_[i]));
      out.ok = true;
      return out;
    }

   private:
    void descend(std::size_t depth) {
      if (depth == order_.size()) {
        consider();
        return;
      }
      const std::size_t table = order_[depth];
      tried_kind_.assign(kinds_.representative.size(), 0);
      auto& candidates = candidates_[depth];  // this depth's buffer, reused
      candidates.clear();
      for (std::size_t d = 0; d < devices_; ++d) {
        if (opt_.symmetric && mask_[d] == 0) {
          // An empty device stands for every empty one of its kind.
          if (tried_kind_[kinds_.kind_of[d]]) continue;
          tried_kind_[kinds_.kind_of[d]] = 1;
        }
        if (rule_.admits(t_, st_, whole_table(t_, table, d))) candidates.push_back(d);
      }
      if (candidates.empty()) {
        if (depth >= failure_depth_) {
          failure_depth_ = depth + 1;
          failure_ = no_device_for(t_, st_, table, rule_);
        }
        return;
      }
      for (const std::size_t d : candidates) {
        const shard s = whole_table(t_, table, d);
        const compute_cost before = compute_[d];
        st_.place(t_, s);
        mask_[d] |= std::uint32_t{1} << table;
        device_of_[table] = static_cast<std::uint32_t>(d);
        compute_[d] = compute_of(d);
        descend(depth + 1);
        compute_[d] = before;
        mask_[d] &= ~(std::uint32_t{1} << table);
        st_.unplace(t_, s);  // host DRAM too, for a table off hbm
      }
    }

    // A complete plan: priced (as evaluate() would) and kept if the Reward
    // ranks it above the best so far.
    void consider() {
      if (++plans_ > opt_.max_plans)
        detail::fail("exact_table_wise.max_plans", opt_.max_plans,
                     "more complete plans than this task has (" + std::to_string(t_.tables.size()) +
                         " tables on " + std::to_string(devices_) +
                         " devices): raise it, or plan with a heuristic");
      double value = 0.0;
      if constexpr (reward_decreasing_in_max_cost<Reward>) {
        double cost = 0.0;
        if (comm_nonnegative_ && best_ok_) {
          if (search::detail::compute_bound_ms(compute_) >= best_ms_) return;
          cost = pricer_.max_ms_below(t_, model_, compute_, st_.dim_sum, best_ms_);
        } else {
          cost = pricer_.max_ms(t_, model_, compute_, st_.dim_sum);
        }
        if (best_ok_ && !(cost < best_ms_)) return;
        best_ms_ = cost;
        value = -cost;
      } else {
        pricer_.max_ms(t_, model_, compute_, st_.dim_sum);
        pricer_.plan_cost_of(compute_, st_.memory_bytes, st_.dim_sum, scored_);
        value = static_cast<double>(score_.score(t_, scored_));
        if (best_ok_ && !(value > best_score_)) return;
      }
      best_ok_ = true;
      best_score_ = value;
      best_device_ = device_of_;
    }

    // Device d's compute for the tables in mask_[d], in table order (as
    // evaluate() groups a plan listed by table), priced once per set.
    compute_cost compute_of(std::size_t d) {
      const std::uint64_t key = static_cast<std::uint64_t>(mask_[d]) * devices_ + d;
      const auto hit = memo_.find(key);
      if (hit != memo_.end()) return hit->second;
      group_.clear();
      for (std::uint32_t m = mask_[d]; m != 0; m &= m - 1)
        group_.push_back(whole_table(t_, static_cast<std::size_t>(std::countr_zero(m)), d));
      const compute_cost c = model_.compute(t_, std::span<const shard>(group_), d);
      ++computed_;
      memo_.emplace(key, c);
      return c;
    }

    const exact_table_wise& opt_;
    const task& t_;
    const CostModel& model_;
    const Constraint& rule_;
    const Reward& score_;
    std::size_t devices_;
    placement_state st_;
    std::vector<std::uint32_t> mask_;       // per device: its tables
    std::vector<compute_cost> compute_;     // per device: their compute
    std::vector<std::uint32_t> device_of_;  // per table: its device (tables placed so far)
    search::detail::device_kinds kinds_;    // devices equal but for their names (memory too)
    std::vector<unsigned char> tried_kind_;
    std::vector<std::vector<std::size_t>> candidates_;  // per depth: the devices to try
    std::vector<std::size_t> order_;                    // the tables in the order they are placed
    bool comm_nonnegative_;
    std::unordered_map<std::uint64_t, compute_cost> memo_;
    std::vector<shard> group_;
    search::detail::plan_pricer pricer_;
    plan_cost scored_;
    std::uint64_t plans_ = 0;
    std::uint64_t computed_ = 0;
    bool best_ok_ = false;
    double best_ms_ = std::numeric_limits<double>::infinity();
    double best_score_ = 0.0;
    std::vector<std::uint32_t> best_device_;
    std::size_t failure_depth_ = 0;
    std::string failure_;
  };
};
static_assert(searcher<exact_table_wise>);

}  // namespace embplan::inline EMBPLAN_ABI
