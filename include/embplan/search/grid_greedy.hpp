#pragma once
// grid_greedy: NeuroShard's table-wise search (Alg. 2, "greedy grid search",
// §3.3): tables sorted by predicted single-table compute cost, each to the
// admitted device with the lowest predicted compute cost of what it holds,
// under a max-device-dim bound; the bound is grid-searched over M points from
// the mean device dim to 1.5 x it, and of the M plans, each priced as the
// simulator (evaluate()) prices it, the one the Reward scores highest is kept
// (uses_reward: under neg_max_cost_reward, the cheapest, as in the paper).
// Device costs are cached per search (NeuroShard's "implementation with
// caching"); the cache's use is reported in search_result.
//   grid_greedy{.grid = 11}   // M = 11, the paper's default
// The algorithm and its exact shortcuts: search/detail/grid_engine.hpp. The
// column-wise outer loop (Alg. 1) is column_beam (search/column_beam.hpp).

#include <cstdint>
#include <string_view>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/grid_engine.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct grid_greedy {
  std::int32_t grid = 11;  // M: bounds tried between 1.0 and 1.5 x the mean device dim

  static constexpr bool uses_reward = true;  // ranks the M plans by reward.score

  std::string_view name() const noexcept { return "grid_greedy"; }

  void validate() const {
    if (grid <= 0) detail::fail("grid_greedy.grid", grid, "a positive number of grid steps (M)");
  }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t) const {
    validate();
    search::detail::cost_cache cache(search::detail::engine_cache_slots(model));
    search::detail::grid_engine<CostModel, Constraint, Reward> engine(t, model, rule, cache, score);
    std::vector<search::detail::piece> pieces;
    pieces.reserve(t.tables.size());
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      pieces.push_back(search::detail::make_piece(t, whole_table(t, i, 0)));
    auto found = engine.run(pieces, grid, true);

    search_result out;
    out.cache_lookups = cache.lookups();
    out.cache_hits = cache.hits();
    out.evaluations = cache.misses() + engine.comm_calls();
    if (!found.ok) {
      out.failure = std::move(found.failure);
      return out;
    }
    std::vector<std::size_t> assignment(found.device.begin(), found.device.end());
    out.placement = table_wise_plan(t, assignment);
    out.ok = true;
    return out;
  }
};
static_assert(searcher<grid_greedy>);

}  // namespace embplan::inline EMBPLAN_ABI
