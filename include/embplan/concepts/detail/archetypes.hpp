#pragma once
// Minimal models of the policy concepts, used to check generic code (searchers,
// the planner) against the contracts alone.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::concepts::detail {

struct cost_model_archetype {
  std::string_view name() const { return "archetype"; }
  double shard_cost(const task&, const shard&) const { return 0.0; }
  compute_cost compute(const task&, std::span<const shard>, std::size_t) const { return {}; }
  void communication(const task&, std::span<const std::int64_t>, std::span<const double>,
                     std::span<comm_cost>) const {}
};

struct constraint_archetype {
  bool admits(const task&, const placement_state&, const shard&) const { return true; }
  std::string describe() const { return "archetype"; }
};

struct reward_archetype {
  std::string_view name() const { return "archetype"; }
  double score(const task&, const plan_cost&) const { return 0.0; }
};

}  // namespace embplan::inline EMBPLAN_ABI::concepts::detail
