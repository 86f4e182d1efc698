#pragma once
// The papers' planners under readable names (as nlohmann/json names
// `json = basic_json<>`); run the same by name at run time with run_preset
// (embplan/run_preset.hpp, the CLI's registry).
//   random_planner              random legal placement, priced by the analytic model
//   size/dim/lookup/size_lookup_greedy_planner
//                               sorted greedy over a heuristic cost (NeuroShard
//                               App. E.1, AutoShard §5.1); plan_result.cost_ms
//                               is priced by the analytic model, search_cost
//                               in the heuristic's units
//   random_search_planner       best of 100 random placements under the analytic
//                               model (AutoShard §5.3)
//   torchrec_planner            TorchRec-like: column blocks, greedy proposers and
//                               perf partitioner on the analytic shard cost
//                               (NeuroShard App. E.3; search/torchrec_like.hpp)
//   neuroshard_planner          NeuroShard's online search as its authors' code
//                               makes it: column beam search + greedy grid search
//                               with a cost cache (§3.3, Alg. 1-2; faithful_column_beam)
//   neuroshard_plus_planner     the same search with embplan's six changes
//                               (column_beam_improvements: distinct splittable
//                               candidates and states, an unbounded grid pass,
//                               infeasible states ranked, communication clamped,
//                               exact grid bounds)
//   neuroshard_ls_planner       neuroshard_plus, then local search (moves, swaps,
//                               splits, merges at the bottleneck devices; a
//                               memory-first start where the beam fits nothing)
//   portfolio_planner           neuroshard_ls and torchrec_like both plan; the plan
//                               the reward scores higher is kept (search/best_of.hpp)
//   basic_neuroshard_planner<Cost>, basic_neuroshard_plus_planner<Cost>,
//   basic_neuroshard_ls_planner<Cost>, basic_portfolio_planner<Cost>: the same on
//                               any cost model (e.g. a learned one)
//   exact_planner               the optimum table-wise plan of a small task (at most
//                               16 tables by default) under the analytic model:
//                               depth-first with symmetry breaking (search/exact.hpp)
//   basic_exact_planner<Cost>   the same on any cost model
//   dreamshard_planner          DreamShard's trained policy (Alg. 2), in
//                               rl/dreamshard_preset.hpp (embplan::nn: it needs Eigen,
//                               this header needs only the standard library)
//   autoshard_planner           AutoShard's trained policy-value network, in
//                               rl/autoshard_preset.hpp (likewise)
// All use default_constraint: memory capacity, columns a multiple of 4, and the
// user's table_rules (empty unless given: a planner built as
// random_planner({}, {}, default_constraint{memory_capacity{}, dim_multiple{},
// table_rules(t, rules)}, {}) honours them; run_preset takes them by name).
// rowwise_planner_of<P>: P with its searcher behind rowwise::split_oversized,
// so a table that fits no device is split by rows instead of failing the task
// (rowwise/split.hpp); build its searcher with rowwise::behind_stage.

#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rowwise/split.hpp"
#include "embplan/search/best_of.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/exact.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/random_placement.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/sorted_greedy.hpp"
#include "embplan/search/torchrec_like.hpp"
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
using torchrec_planner =
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

// Planner with its searcher behind rowwise::split_oversized (a portfolio's
// members each behind their own: rowwise::behind_stage).
template <class Planner>
using rowwise_planner_of =
    planner<typename Planner::cost_model_type,
            rowwise::staged_searcher_t<typename Planner::searcher_type>,
            typename Planner::constraint_type, typename Planner::reward_type>;
using rowwise_lookup_greedy_planner = rowwise_planner_of<lookup_greedy_planner>;

}  // namespace embplan::inline EMBPLAN_ABI
