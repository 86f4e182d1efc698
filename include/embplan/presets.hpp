#pragma once
// The papers' planners under readable names (as nlohmann/json names
// `json = basic_json<>`), and a runtime registry of them for the CLI.
//   random_planner              random legal placement, priced by the analytic model
//   size/dim/lookup/size_lookup_greedy_planner
//                               sorted greedy over a heuristic cost (NeuroShard
//                               App. E.1, AutoShard §5.1); plan_result.cost is
//                               then in that heuristic's units, not ms
//   random_search_planner       best of 100 random placements under the analytic
//                               model (AutoShard §5.3)
//   torchrec_planner            TorchRec-like: column blocks, greedy proposers and
//                               perf partitioner on the analytic shard cost
//                               (NeuroShard App. E.3; search/torchrec_like.hpp)
//   neuroshard_planner          NeuroShard's online search: column beam search +
//                               greedy grid search with a cost cache (§3.3, Alg. 1-2)
//   neuroshard_ls_planner       NeuroShard's search, then local search (moves, swaps,
//                               splits, merges at the bottleneck devices; a
//                               memory-first start where the beam fits nothing)
//   basic_neuroshard_planner<Cost>, basic_neuroshard_ls_planner<Cost>: the same
//                               on any cost model (e.g. a learned one)
// All use default_constraint: memory capacity and columns a multiple of 4.
// Each name also runs with the prefix "rowwise_" (e.g. rowwise_lookup_greedy):
// the same planner behind rowwise::split_oversized, so a table that fits no
// device is split by rows instead of failing the task (rowwise/split.hpp).

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rowwise/split.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/greedy.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/random.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/torchrec_like.hpp"

namespace embplan {

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
    planner<Cost, column_beam, default_constraint, neg_max_cost_reward>;
using neuroshard_planner = basic_neuroshard_planner<>;
template <cost_model Cost = analytic_cost>
using basic_neuroshard_ls_planner =
    planner<Cost, local_search<column_beam>, default_constraint, neg_max_cost_reward>;
using neuroshard_ls_planner = basic_neuroshard_ls_planner<>;

// Planner with its searcher behind rowwise::split_oversized.
template <class Planner>
using rowwise_planner_of =
    planner<typename Planner::cost_model_type,
            rowwise::split_oversized<typename Planner::searcher_type>,
            typename Planner::constraint_type, typename Planner::reward_type>;
using rowwise_lookup_greedy_planner = rowwise_planner_of<lookup_greedy_planner>;

namespace presets::detail {

inline constexpr std::array<std::string_view, 9> names{
    "random",        "size_greedy", "dim_greedy", "lookup_greedy", "size_lookup_greedy",
    "random_search", "torchrec",    "neuroshard", "neuroshard_ls"};

inline constexpr std::string_view rowwise_prefix = "rowwise_";

inline std::string joined_names() {
  std::string out;
  for (const auto n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out + " (each also prefixed rowwise_: tables that fit no device split by rows)";
}

}  // namespace presets::detail

// The names run_preset accepts, in a fixed order.
inline std::span<const std::string_view> preset_names() noexcept {
  return presets::detail::names;
}

namespace presets::detail {

// `p` as it is, or with its searcher behind rowwise::split_oversized.
template <class Planner>
plan_result run(const Planner& p, bool rowwise, const task& t, std::uint64_t seed) {
  if (!rowwise) return p(t, seed);
  return rowwise_planner_of<Planner>(
      p.cost(), rowwise::split_oversized<typename Planner::searcher_type>{.inner = p.searcher()},
      p.rule(), p.scorer())(t, seed);
}

}  // namespace presets::detail

// Runs the named preset on `t`. The planners that search on any cost model
// (neuroshard, neuroshard_ls and their rowwise_ forms: NeuroShard's "pre-train,
// then search", §3) search on `model`, e.g. a learned neural_cost; the others
// keep their own cost (the baselines are defined by it). An unknown name throws
// embplan::error naming the field 'planner', the value and the accepted names.
template <cost_model Model>
plan_result run_preset(std::string_view name, const task& t, std::uint64_t seed,
                       const Model& model) {
  namespace pd = presets::detail;
  const bool rowwise = name.starts_with(pd::rowwise_prefix);
  const std::string_view base = rowwise ? name.substr(pd::rowwise_prefix.size()) : name;
  if (base == "random") return pd::run(random_planner{}, rowwise, t, seed);
  if (base == "size_greedy") return pd::run(size_greedy_planner{}, rowwise, t, seed);
  if (base == "dim_greedy") return pd::run(dim_greedy_planner{}, rowwise, t, seed);
  if (base == "lookup_greedy") return pd::run(lookup_greedy_planner{}, rowwise, t, seed);
  if (base == "size_lookup_greedy") return pd::run(size_lookup_greedy_planner{}, rowwise, t, seed);
  if (base == "random_search") return pd::run(random_search_planner{}, rowwise, t, seed);
  if (base == "torchrec") return pd::run(torchrec_planner{}, rowwise, t, seed);
  if (base == "neuroshard") {
    return pd::run(basic_neuroshard_planner<Model>(model, {}, {}, {}), rowwise, t, seed);
  }
  if (base == "neuroshard_ls") {
    return pd::run(basic_neuroshard_ls_planner<Model>(model, {}, {}, {}), rowwise, t, seed);
  }
  detail::fail("planner", name, "one of " + pd::joined_names());
}

// The same with every planner on its default cost (the analytic model for
// neuroshard and neuroshard_ls).
inline plan_result run_preset(std::string_view name, const task& t, std::uint64_t seed = 0) {
  return run_preset(name, t, seed, analytic_cost{});
}

}  // namespace embplan
