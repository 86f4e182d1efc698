#pragma once
// balance_reward: AutoShard's degree of balance, min / max device compute
// (plan_cost::balance; §5.1 "Metrics"; the final reward of its MDP, §4.3), in
// [0, 1]; 1 is perfectly balanced.

#include <string_view>

#include "embplan/concepts/reward.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct balance_reward {
  std::string_view name() const noexcept { return "balance"; }
  double score(const task&, const plan_cost& c) const noexcept { return c.balance(); }
};
static_assert(reward<balance_reward>);

}  // namespace embplan::inline EMBPLAN_ABI
