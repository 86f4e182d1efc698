#pragma once
// policy_searcher<Policy>: a trained placement policy as a Searcher, so that
// planner<CostModel, rl::policy_searcher<rl::dreamshard_policy>, Constraint,
// Reward> composes like every other planner.
//
// Default: one greedy episode (DreamShard Algorithm 2; the authors'
// sharders.py `dreamshard`): the tables in the policy's order, each placed on
// the legal device of highest logit, ties to the lowest device (torch.argmax).
// With options.samples = k > 0, k more episodes sample their actions from the
// policy's softmax over the legal devices (rng seeded from the search seed and
// the episode number), and the plan kept is the one the planner's Reward
// scores highest on the planner's CostModel (evaluate()), the greedy plan
// first on ties. Legal devices are the planner's Constraint's (placement_mdp).
//
// A policy is a value with a per-task context (placement_policy below); the
// context lives inside search(), so a const searcher serves many threads.
//
// Uses the reward (uses_reward = true): with samples > 0 it compares complete
// plans by the reward; with samples = 0 it builds one plan and the reward never
// changes it.

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// A placement policy: per task, prepare() fills a context (features, scratch);
// order() gives the tables' placement order; logits() scores each legal device
// of the MDP's current state (one logit per view.legal entry, in that order).
template <class P>
concept placement_policy = std::copy_constructible<P> &&
    std::default_initializable<typename P::context> &&
    requires(const P& p, const task& t, typename P::context& ctx, const mdp_view& v,
             std::vector<std::uint32_t>& order, std::vector<double>& logits) {
  { p.name() } -> std::convertible_to<std::string_view>;
  { p.prepare(t, ctx) } -> std::same_as<void>;
  { p.order(ctx, order) } -> std::same_as<void>;
  { p.logits(v, ctx, logits) } -> std::same_as<void>;
};

struct policy_search_options {
  std::int64_t samples = 0;  // sampled episodes besides the greedy one (0: greedy only)
};

namespace detail {

// Index of the first largest entry (torch.argmax on ties).
inline std::size_t mdp_argmax(const std::vector<double>& logits) {
  std::size_t best = 0;
  for (std::size_t k = 1; k < logits.size(); ++k)
    if (logits[k] > logits[best]) best = k;
  return best;
}

// A draw from softmax(logits) by inverse CDF on gen.uniform() (in double).
inline std::size_t mdp_sample(const std::vector<double>& logits, rng& gen) {
  double top = logits[0];
  for (const double z : logits)
    top = z > top ? z : top;
  double sum = 0.0;
  for (const double z : logits)
    sum += std::exp(z - top);
  const double u = gen.uniform() * sum;
  double cdf = 0.0;
  for (std::size_t k = 0; k < logits.size(); ++k) {
    cdf += std::exp(logits[k] - top);
    if (u < cdf) return k;
  }
  return logits.size() - 1;
}

// One episode of `policy` on mdp (reset first): greedy when gen is null, else
// sampled. False when a table fits nowhere (mdp.failure() says why).
template <class Policy, class Mdp>
bool mdp_run_episode(const Policy& policy, typename Policy::context& ctx, Mdp& mdp,
                     std::vector<double>& logits, rng* gen) {
  if (!mdp.try_reset()) return false;
  while (!mdp.done()) {
    policy.logits(mdp.view(), ctx, logits);
    if (logits.size() != mdp.legal().size()) {
      embplan::detail::fail(
          std::string(policy.name()) + ".logits.size", logits.size(),
          "one logit per legal device (" + std::to_string(mdp.legal().size()) + ")");
    }
    for (std::size_t k = 0; k < logits.size(); ++k) {
      if (!std::isfinite(logits[k])) {
        embplan::detail::fail(embplan::detail::path(std::string(policy.name()) + ".logits", k),
                              logits[k], "a finite number");
      }
    }
    const std::size_t k = gen ? mdp_sample(logits, *gen) : mdp_argmax(logits);
    if (!mdp.try_step(mdp.legal()[k])) return false;
  }
  return true;
}

}  // namespace detail

template <placement_policy Policy>
struct policy_searcher {
  static constexpr bool uses_reward = true;  // with samples > 0 (see above)

  Policy policy{};
  policy_search_options options{};

  // The policy's name ("dreamshard"): what planners and reports show.
  std::string_view name() const { return policy.name(); }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t seed) const {
    if (options.samples < 0) {
      embplan::detail::fail("policy_search_options.samples", options.samples,
                            "a non-negative count (0: greedy only)");
    }
    search_result out;
    typename Policy::context ctx;
    policy.prepare(t, ctx);
    std::vector<std::uint32_t> order;
    policy.order(ctx, order);
    placement_mdp<no_cost_source, Constraint> mdp(t, no_cost_source{}, rule, std::move(order));
    std::vector<double> logits;
    bool have = detail::mdp_run_episode(policy, ctx, mdp, logits, nullptr);
    if (!have) out.failure = mdp.failure();
    if (have) out.placement = mdp.to_plan();
    if (options.samples == 0) {
      out.ok = have;
      return out;
    }
    double best = 0.0;
    if (have) {
      best = static_cast<double>(score.score(t, evaluate(t, out.placement, model)));
      ++out.evaluations;
    }
    for (std::int64_t k = 0; k < options.samples; ++k) {
      rng gen(derive_seed(seed, static_cast<std::uint64_t>(k)));
      if (!detail::mdp_run_episode(policy, ctx, mdp, logits, &gen)) continue;
      plan candidate = mdp.to_plan();
      const double r = static_cast<double>(score.score(t, evaluate(t, candidate, model)));
      ++out.evaluations;
      if (!have || r > best) {
        best = r;
        out.placement = std::move(candidate);
        have = true;
      }
    }
    out.ok = have;
    if (have) out.failure.clear();
    return out;
  }
};

}  // namespace embplan::inline EMBPLAN_ABI::rl
