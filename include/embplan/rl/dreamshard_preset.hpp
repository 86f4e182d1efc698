#pragma once
// The `dreamshard` preset: DreamShard's trained policy as a planner
// (NeurIPS'22 §3.3, Algorithm 2), named as presets.hpp names the others, and
// its run_preset entry. Apart from presets.hpp because it needs Eigen
// (embplan::nn), which embplan::core does not. In embplan::rl, as rl/ is.
//   dreamshard_planner     planner<dreamshard_cost, rl::policy_searcher<
//                          rl::dreamshard_policy>, default_constraint,
//                          neg_max_cost_reward>: the tables in the cost
//                          network's order, each put on the legal device of
//                          highest logit (rl/policy_searcher.hpp); plan costs
//                          from the policy's cost network (an estimate: judge
//                          plans with a meter)
//   make_dreamshard_planner(policy[, search])
//   dreamshard_preset(policy)  for run_preset(name, t, seed, model,
//                          {.dreamshard = dreamshard_preset(policy)}), which
//                          runs "dreamshard" and "rowwise_dreamshard"

#include <cstdint>
#include <utility>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/dreamshard_cost.hpp"
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

using dreamshard_planner = planner<dreamshard_cost, rl::policy_searcher<rl::dreamshard_policy>,
                                   default_constraint, neg_max_cost_reward>;

// The dreamshard planner of a trained policy (rl::dreamshard_policy::load, or
// rl::dreamshard_trained_policy). `search.samples` > 0 adds sampled episodes,
// the best by the reward kept.
inline dreamshard_planner make_dreamshard_planner(const rl::dreamshard_policy& policy,
                                                  rl::policy_search_options search = {}) {
  return dreamshard_planner(policy.cost_model(), {.policy = policy, .options = search}, {}, {});
}

// run_preset's entry for "dreamshard" (preset_models::dreamshard). The planner
// is copied into the function (the policy's networks are shared, not copied).
inline preset_fn dreamshard_preset(const rl::dreamshard_policy& policy,
                                   rl::policy_search_options search = {}) {
  return presets::detail::as_preset_fn(make_dreamshard_planner(policy, search));
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
