#pragma once
// neg_max_cost_reward: minus the plan's cost (the max over devices of compute +
// communication), DreamShard's reward (§3.1: the negative of the overall cost
// of the final placement), so a faster plan scores higher. It is a strictly
// decreasing function of the max cost alone, which lets searchers skip pricing
// plans that cannot beat the best (concepts/reward.hpp).

#include <string_view>

#include "embplan/concepts/reward.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct neg_max_cost_reward {
  static constexpr bool decreasing_in_max_cost = true;

  std::string_view name() const noexcept { return "neg_max_cost"; }
  double score(const task&, const plan_cost& c) const noexcept { return -c.max_ms(); }
};
static_assert(reward<neg_max_cost_reward>);
static_assert(reward_decreasing_in_max_cost<neg_max_cost_reward>);

}  // namespace embplan::inline EMBPLAN_ABI
