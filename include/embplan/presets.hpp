#pragma once
// The papers' planners under readable names (as nlohmann/json names
// `json = basic_json<>`); run the same by name at run time with run_preset
// (embplan/run_preset.hpp, the CLI's registry):
//   random_planner, random_search_planner (AutoShard §5.3),
//   size/dim/lookup/size_lookup_greedy_planner (sorted greedy on a heuristic
//   cost: NeuroShard App. E.1, AutoShard §5.1), torchrec_planner (TorchRec
//   v0.3.2's EmbeddingShardingPlanner, its own plan: search/torchrec.hpp,
//   docs/torchrec.md), torchrec_like_planner (a
//   TorchRec-style greedy after NeuroShard's appendix E.3 (table- and
//   column-wise, perf-ordered partitioner); not TorchRec's planner),
//   neuroshard_planner (NeuroShard §3.3, Alg. 1-2, as its authors'
//   code makes it), neuroshard_plus_planner (embplan's changes to it),
//   neuroshard_ls_planner (then local search), portfolio_planner
//   (neuroshard_ls and torchrec_like, the better plan kept), exact_planner
//   (the optimum table-wise plan of a small task), and basic_*_planner<Cost>
//   for the same on any cost model. dreamshard_planner and autoshard_planner
//   live in rl/dreamshard_preset.hpp and rl/autoshard_preset.hpp (they need
//   Eigen; this header needs only the standard library).
// The heuristic greedy planners report plan_result.cost_ms priced by the
// analytic model and search_cost in the heuristic's units.
// All use default_constraint: memory capacity, columns a multiple of 4, and the
// user's table_rules (empty unless given; run_preset takes them by name).
// rowwise_planner_of<P>: P with its searcher behind the stage (stage::staged,
// split_rows on), so a table that fits no device is split by rows instead of
// failing the task (stage/staged.hpp); build its searcher with
// stage::behind_stage.
// Design notes, one line per preset: docs/design/presets.md.

#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/cost/torchrec_cost.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/best_of.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/exact.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/random_placement.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/sorted_greedy.hpp"
#include "embplan/search/torchrec.hpp"
#include "embplan/search/torchrec_like.hpp"
#include "embplan/stage/settings.hpp"
#include "embplan/stage/staged.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

using random_planner =
    planner<analytic_cost, random_placement, default_constraint, neg_max_cost_reward>;
using size_greedy_planner = planner<size_cost, sorted_greedy, default_constraint, balance_reward>;
using dim_greedy_planner = planner<dim_cost, sorted_greedy, default_constraint, balance_reward>;
using lookup_greedy_planner =
    planner<lookup_cost, sorted_greedy, default_constraint, balance_reward>;
using size_lookup_greedy_planner =
    planner<size_lookup_cost, sorted_greedy, default_constraint, balance_reward>;
using random_search_planner =
    planner<analytic_cost, random_search, default_constraint, neg_max_cost_reward>;
// TorchRec v0.3.2's planner (search/torchrec.hpp): its plan, rated by its own
// perf model (torchrec_cost, the search model), priced like the other presets
// on the analytic model.
using torchrec_planner =
    planner<torchrec_cost, torchrec_search, default_constraint, neg_max_cost_reward, analytic_cost>;
// A TorchRec-style greedy after NeuroShard's appendix E.3 (table- and
// column-wise, perf-ordered partitioner); not TorchRec's planner.
using torchrec_like_planner =
    planner<analytic_cost, torchrec_like, default_constraint, neg_max_cost_reward>;
template <cost_model Cost = analytic_cost>
using basic_neuroshard_planner =
    planner<Cost, faithful_column_beam, default_constraint, neg_max_cost_reward>;
using neuroshard_planner = basic_neuroshard_planner<>;
template <cost_model Cost = analytic_cost>
using basic_neuroshard_plus_planner =
    planner<Cost, column_beam, default_constraint, neg_max_cost_reward>;
using neuroshard_plus_planner = basic_neuroshard_plus_planner<>;
template <cost_model Cost = analytic_cost>
using basic_neuroshard_ls_planner =
    planner<Cost, local_search<column_beam>, default_constraint, neg_max_cost_reward>;
using neuroshard_ls_planner = basic_neuroshard_ls_planner<>;
template <cost_model Cost = analytic_cost>
using basic_exact_planner =
    planner<Cost, exact_table_wise, default_constraint, neg_max_cost_reward>;
using exact_planner = basic_exact_planner<>;

// neuroshard_ls and torchrec_like, the plan of the two the reward scores
// higher (search/best_of.hpp).
template <cost_model Cost = analytic_cost>
using basic_portfolio_planner = planner<Cost, best_of<local_search<column_beam>, torchrec_like>,
                                        default_constraint, neg_max_cost_reward>;
using portfolio_planner = basic_portfolio_planner<>;

// Planner with its searcher behind the stage (stage::staged; a portfolio's
// members each behind their own: stage::behind_stage). Default-constructed,
// Planner's searcher with the rows of a table that fits no device split
// (stage_settings{.split_rows = true}, the rowwise_ presets); from parts, the
// searcher as given.
template <class Planner>
class rowwise_planner_of
    : public planner<typename Planner::cost_model_type,
                     stage::staged_searcher_t<typename Planner::searcher_type>,
                     typename Planner::constraint_type, typename Planner::reward_type> {
  using base = planner<typename Planner::cost_model_type,
                       stage::staged_searcher_t<typename Planner::searcher_type>,
                       typename Planner::constraint_type, typename Planner::reward_type>;

 public:
  using base::base;
  rowwise_planner_of()
      : base({}, stage::behind_stage(typename Planner::searcher_type{}, {.split_rows = true}), {},
             {}) {}
};
using rowwise_lookup_greedy_planner = rowwise_planner_of<lookup_greedy_planner>;

}  // namespace embplan::inline EMBPLAN_ABI
