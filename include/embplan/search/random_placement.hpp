#pragma once
// random_placement: the papers' random baseline (NeuroShard Table 1 "Random";
// AutoShard §5.1 "rand"): every table, whole, to a uniformly random device.
// Unlike the papers' random sharding, which ignores memory and so fails many
// tasks, ours draws only among the devices the constraint admits at that step
// (tables in index order); it fails only when a table has no such device.
// The draw uses the sub-stream derive_seed(seed, 0), so random_search with a
// budget of 1 returns the same plan for the same seed. The Reward does not
// change the plan (uses_reward = false): one draw, nothing compared.

#include <cstdint>
#include <string_view>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/detail/random_table_wise.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct random_placement {
  static constexpr bool uses_reward = false;  // one draw, nothing compared

  std::string_view name() const noexcept { return "random"; }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel&, const Constraint& rule, const Reward&,
                       std::uint64_t seed) const {
    return search::detail::random_table_wise(t, rule, derive_seed(seed, 0));
  }
};
static_assert(searcher<random_placement>);

}  // namespace embplan::inline EMBPLAN_ABI
