#pragma once
// run_preset: the planners of presets.hpp by name, at run time (the CLI's
// registry). Kept out of presets.hpp because a call instantiates every preset
// planner: include it only where a name picks the planner.
// Each name also runs with the prefix "rowwise_" (e.g. rowwise_lookup_greedy):
// the same planner behind stage::split_oversized, so a table that fits no
// device is split by rows instead of failing the task (stage/split_oversized.hpp).
// With data_parallel_options{.enabled = true}, any of them first replicates
// the small tables that are cheaper data-parallel (stage/split_oversized.hpp).

#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"
#include "embplan/stage_options.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace presets::detail {

inline constexpr std::array<std::string_view, 13> names{
    "random",        "size_greedy", "dim_greedy", "lookup_greedy",   "size_lookup_greedy",
    "random_search", "torchrec",    "neuroshard", "neuroshard_plus", "neuroshard_ls",
    "dreamshard",    "autoshard",   "portfolio"};

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

// The stages before a preset's searcher, all in stage::split_oversized:
// the row split of a table that fits no device (the rowwise_ names), the
// column blocks of tables the user's rules give a min_shards (cut whenever
// the stage runs), and what the caller asks for (stage_options: data-parallel
// copies, the layout across hosts, row cuts by cost). None: the preset as it
// is.
struct preset_stages {
  bool split_rows = false;
  bool min_shards = false;  // the rules have a min_shards: the stage must run
  stage_options options{};

  bool any() const noexcept {
    return split_rows || min_shards || options.data_parallel.enabled || options.rows_by_cost;
  }
};

// A preset built outside embplan::core, run by name through a function
// (stages: behind stage::split_oversized, as presets::detail::run builds it;
// rules: the user's table_rules, planned under as run_preset's other presets).
using preset_fn = std::function<plan_result(const task& t, std::uint64_t seed,
                                            const preset_stages& stages, const table_rules& rules)>;

// The presets run_preset cannot build itself, each from trained models whose
// code needs more than this header (Eigen): presets whose entry is empty fail,
// naming the field.
struct preset_models {
  // "dreamshard": embplan::dreamshard_preset(policy) (rl/dreamshard_preset.hpp)
  preset_fn dreamshard{};
  // "autoshard": embplan::autoshard_preset(policy) (rl/autoshard_preset.hpp)
  preset_fn autoshard{};
};

// The names run_preset accepts, in a fixed order.
inline std::span<const std::string_view> preset_names() noexcept {
  return presets::detail::names;
}

namespace presets::detail {

// `p` as it is, or with its searcher behind stage::split_oversized.
template <class Planner>
plan_result run(const Planner& p, const preset_stages& stages, const task& t, std::uint64_t seed) {
  if (!stages.any()) return p(t, seed);
  return rowwise_planner_of<Planner>(
      p.cost(),
      stage::behind_stage(p.searcher(), {.split_rows = stages.split_rows,
                                         .data_parallel = stages.options.data_parallel,
                                         .layout = stages.options.layout,
                                         .rows_by_cost = stages.options.rows_by_cost}),
      p.rule(), p.scorer())(t, seed);
}

// The preset's default_constraint with the user's rules in place of its
// (empty) table_rules.
inline default_constraint with_rules(const default_constraint& rule, const table_rules& rules) {
  return {std::get<0>(rule.parts()), std::get<1>(rule.parts()), rules};
}

// A planner as a preset_fn (copied into the function).
template <class Planner>
preset_fn as_preset_fn(Planner p) {
  static_assert(std::same_as<typename Planner::constraint_type, default_constraint>,
                "embplan::as_preset_fn: a preset plans under default_constraint, which "
                "carries the user's table_rules");
  return [p = std::move(p)](const task& t, std::uint64_t seed, const preset_stages& stages,
                            const table_rules& rules) {
    if (rules.empty()) return run(p, stages, t, seed);
    return run(Planner(p.cost(), p.searcher(), with_rules(p.rule(), rules), p.scorer(), p.meter()),
               stages, t, seed);
  };
}

}  // namespace presets::detail

// Runs the named preset on `t`. The planners that search on any cost model
// (neuroshard, neuroshard_plus, neuroshard_ls, portfolio and their rowwise_
// forms: NeuroShard's "pre-train, then search", §3) search on `model`, e.g. a
// learned neural_cost, by default the analytic model; the others keep their
// own cost (the baselines are defined by it). "dreamshard" runs
// models.dreamshard (a trained policy's planner, embplan::dreamshard_preset)
// and throws embplan::error naming 'preset_models.dreamshard' when that is
// empty; "autoshard" likewise runs models.autoshard
// (embplan::autoshard_preset). An unknown name throws embplan::error naming
// the field 'planner', the value and the accepted names.
// A template even without `model`, so that a TU that never calls it does not
// instantiate the twenty-two planners.
// `rules`: the user's per-table constraints (table_rules, built for `t`),
// which every preset plans under, in default_constraint; empty by default.
// `options` (stage_options): the small tables replicated first
// (data_parallel, off by default); where the rowwise_ presets put a split
// table's pieces on a cluster of several hosts (layout, stage::row_layout;
// by cost by default); tables that fit cut by rows where cheaper
// (rows_by_cost, off by default; stage/split_oversized.hpp).
template <cost_model Model>
plan_result run_preset(std::string_view name, const task& t, std::uint64_t seed, const Model& model,
                       const preset_models& models, const table_rules& rules,
                       const stage_options& options) {
  namespace pd = presets::detail;
  const bool rowwise = name.starts_with(pd::rowwise_prefix);
  const std::string_view base = rowwise ? name.substr(pd::rowwise_prefix.size()) : name;
  const default_constraint rule{memory_capacity{}, dim_multiple{}, rules};
  const preset_stages stages{
      .split_rows = rowwise, .min_shards = rules.has_min_shards(), .options = options};
  const auto run = [&]<class Planner>(Planner p) { return pd::run(p, stages, t, seed); };
  if (base == "random") return run(random_planner({}, {}, rule, {}));
  if (base == "size_greedy") return run(size_greedy_planner({}, {}, rule, {}));
  if (base == "dim_greedy") return run(dim_greedy_planner({}, {}, rule, {}));
  if (base == "lookup_greedy") return run(lookup_greedy_planner({}, {}, rule, {}));
  if (base == "size_lookup_greedy") return run(size_lookup_greedy_planner({}, {}, rule, {}));
  if (base == "random_search") return run(random_search_planner({}, {}, rule, {}));
  if (base == "torchrec") return run(torchrec_planner({}, {}, rule, {}));
  if (base == "neuroshard") return run(basic_neuroshard_planner<Model>(model, {}, rule, {}));
  if (base == "neuroshard_plus") {
    return run(basic_neuroshard_plus_planner<Model>(model, {}, rule, {}));
  }
  if (base == "neuroshard_ls") return run(basic_neuroshard_ls_planner<Model>(model, {}, rule, {}));
  if (base == "portfolio") return run(basic_portfolio_planner<Model>(model, {}, rule, {}));
  if (base == "dreamshard") {
    if (!models.dreamshard) {
      detail::fail("preset_models.dreamshard", "(empty)",
                   "a trained policy's planner for planner '" + std::string(name) +
                       "': embplan::dreamshard_preset(rl::dreamshard_policy::load(path)) "
                       "(rl/dreamshard_preset.hpp)");
    }
    return models.dreamshard(t, seed, stages, rules);
  }
  if (base == "autoshard") {
    if (!models.autoshard) {
      detail::fail("preset_models.autoshard", "(empty)",
                   "a trained policy's planner for planner '" + std::string(name) +
                       "': embplan::autoshard_preset(rl::autoshard_policy::load(path)) "
                       "(rl/autoshard_preset.hpp)");
    }
    return models.autoshard(t, seed, stages, rules);
  }
  detail::fail("planner", name, "one of " + pd::joined_names());
}

// The same with the stage options as separate arguments.
template <cost_model Model = analytic_cost>
plan_result run_preset(std::string_view name, const task& t, std::uint64_t seed = 0,
                       const Model& model = Model{}, const preset_models& models = {},
                       const table_rules& rules = {},
                       const stage::data_parallel_options& data_parallel = {},
                       stage::row_layout layout = stage::row_layout::by_cost) {
  return run_preset(name, t, seed, model, models, rules,
                    stage_options{.data_parallel = data_parallel, .layout = layout});
}

}  // namespace embplan::inline EMBPLAN_ABI
