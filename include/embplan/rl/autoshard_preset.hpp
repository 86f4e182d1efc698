#pragma once
// The `autoshard` preset: AutoShard's trained policy as a planner (KDD'22 §4,
// the authors' sharders.py inference), named as presets.hpp names the others,
// and its run_preset entry. Apart from presets.hpp because it needs Eigen
// (embplan::nn), which embplan::core does not. In embplan::rl, as rl/ is.
//   autoshard_planner      planner<analytic_cost, rl::policy_searcher<
//                          rl::autoshard_policy>, default_constraint,
//                          balance_reward>: the tables in the cost head's
//                          order, each put on the legal device of highest
//                          logit (rl/policy_searcher.hpp); plans judged by
//                          the analytic model (AutoShard's cost head predicts
//                          a shard's kernel time only, no communication);
//                          sampled episodes, when asked for, kept by the
//                          degree of balance (AutoShard's metric)
//   make_autoshard_planner(policy[, search])
//   autoshard_preset(policy)   for run_preset(name, t, seed, model,
//                          {.autoshard = autoshard_preset(policy)}), which
//                          runs "autoshard" and "rowwise_autoshard"

#include <cstdint>
#include <utility>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

using autoshard_planner = planner<analytic_cost, rl::policy_searcher<rl::autoshard_policy>,
                                  default_constraint, balance_reward>;

// The autoshard planner of a trained policy (rl::autoshard_policy::load, or
// rl::autoshard_trained_policy). `search.samples` > 0 adds sampled episodes,
// the best by the degree of balance kept.
inline autoshard_planner make_autoshard_planner(const rl::autoshard_policy& policy,
                                                rl::policy_search_options search = {}) {
  return autoshard_planner({}, {.policy = policy, .options = search}, {}, {});
}

// run_preset's entry for "autoshard" (preset_models::autoshard). The planner
// is copied into the function (the policy's network is shared, not copied).
inline preset_fn autoshard_preset(const rl::autoshard_policy& policy,
                                  rl::policy_search_options search = {}) {
  return presets::detail::as_preset_fn(make_autoshard_planner(policy, search));
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
