#pragma once
// memory_penalty_reward: AutoShard's final reward (§4.3, "Reward"). A plan that
// fits memory scores its degree of balance, min / max compute, in [0, 1]. A plan
// that does not is penalised with a negative reward "determined by the shard
// that is the most seriously affected by the memory explosion", higher when
// the plan is closer to fitting. The formula is not legible in our copy of the
// paper, so embplan uses the worst relative overflow:
//   score = -overflow_weight x max_d (memory_bytes[d] - capacity[d]) / capacity[d]
// over the devices that overflow — negative whenever any device overflows,
// approaching 0 as the worst device approaches its capacity, and independent of
// the device count and of the bytes' scale.

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "embplan/concepts/reward.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct memory_penalty_reward {
  double overflow_weight = 1.0;  // scale of the penalty relative to the balance in (0, 1]

  std::string_view name() const noexcept { return "memory_penalty"; }

  double score(const task& t, const plan_cost& c) const {
    if (!std::isfinite(overflow_weight) || overflow_weight <= 0.0) {
      detail::fail("memory_penalty_reward.overflow_weight", overflow_weight, "a finite number > 0");
    }
    if (c.memory_bytes.size() != t.cluster.size()) {
      detail::fail("plan_cost.memory_bytes.size", c.memory_bytes.size(),
                   "one entry per device (" + std::to_string(t.cluster.size()) + ")");
    }
    double worst = 0.0;  // largest overflow as a fraction of capacity
    for (std::size_t d = 0; d < t.cluster.size(); ++d) {
      const auto used = c.memory_bytes[d];
      const auto capacity = t.cluster.devices[d].memory_bytes;
      if (used > capacity) {
        worst =
            std::max(worst, static_cast<double>(used - capacity) / static_cast<double>(capacity));
      }
    }
    return worst > 0.0 ? -overflow_weight * worst : c.balance();
  }
};
static_assert(reward<memory_penalty_reward>);

}  // namespace embplan::inline EMBPLAN_ABI
