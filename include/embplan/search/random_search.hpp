#pragma once
// random_search: AutoShard's random-search baseline (§5.3): draw `budget`
// random legal table-wise placements, price each with embplan::evaluate under
// the planner's cost model, score it with the reward, and keep the best
// (uses_reward: higher reward wins; on a tie the earlier sample stays).
// Sample i draws from the sub-stream derive_seed(seed, i), so sample 0 is
// random_placement's plan for the same seed and the result never scores
// below it.
//
// evaluations counts cost-model calls, as search_result says: each priced
// sample costs one compute() per device and two communication() calls.
// Samples that hit a table with no admitted device are skipped; if every
// sample does, the first failure is returned.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/search/detail/random_table_wise.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct random_search {
  std::uint32_t budget = 100;  // samples drawn (AutoShard Fig. 9 goes up to 1,000)

  static constexpr bool uses_reward = true;  // keeps the sample scored highest

  std::string_view name() const noexcept { return "random_search"; }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t seed) const {
    if (budget == 0) detail::fail("random_search.budget", budget, "at least 1 sample");
    search_result best;
    double best_score = 0.0;
    std::string first_failure;
    std::uint64_t evaluations = 0;
    for (std::uint32_t i = 0; i < budget; ++i) {
      search_result sample = search::detail::random_table_wise(t, rule, derive_seed(seed, i));
      if (!sample.ok) {
        if (first_failure.empty()) first_failure = std::move(sample.failure);
        continue;
      }
      const double value =
          static_cast<double>(score.score(t, evaluate(t, sample.placement, model)));
      evaluations += t.cluster.size() + 2;
      if (!best.ok || value > best_score) {
        best = std::move(sample);
        best_score = value;
      }
    }
    if (!best.ok) best.failure = std::move(first_failure);
    best.evaluations = evaluations;
    return best;
  }
};
static_assert(searcher<random_search>);

}  // namespace embplan::inline EMBPLAN_ABI
