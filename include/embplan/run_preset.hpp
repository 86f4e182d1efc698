#pragma once
// run_preset: the planners of presets.hpp by name, at run time (the CLI's
// registry). Kept out of presets.hpp because a call instantiates every preset
// planner: include it only where a name picks the planner.
// The registry is one list of entries (presets::all_presets), one per preset,
// each naming its preset once: preset_names() and run_preset's dispatch are
// both read off that list.
// Each name also runs with the prefix "rowwise_" (e.g. rowwise_lookup_greedy):
// the same planner behind the stage (stage::staged) with split_rows, so a
// table that fits no device is split by rows instead of failing the task.
// The other jobs of the stage (data-parallel copies, row cuts by cost) are
// asked for in run_preset's stage::stage_settings (stage/settings.hpp).

#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
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
#include "embplan/stage/settings.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// A preset built outside embplan::core, run by name through a function
// (stages: the stage's jobs, as run_preset passes them, split_rows set for a
// rowwise_ name; the preset runs behind stage::staged where any is asked for
// or `rules` has a min_shards, as presets::detail::run builds it; rules: the
// user's table_rules, planned under as run_preset's other presets).
using preset_fn =
    std::function<plan_result(const task& t, std::uint64_t seed,
                              const stage::stage_settings& stages, const table_rules& rules)>;

// The presets run_preset cannot build itself, each from trained models whose
// code needs more than this header (Eigen): presets whose entry is empty fail,
// naming the field.
struct preset_models {
  // "dreamshard": embplan::rl::dreamshard_preset(policy) (rl/dreamshard_preset.hpp)
  preset_fn dreamshard{};
  // "autoshard": embplan::rl::autoshard_preset(policy) (rl/autoshard_preset.hpp)
  preset_fn autoshard{};
};

namespace presets {

// The prefix that puts a preset behind the stage with split_rows.
inline constexpr std::string_view rowwise_prefix = "rowwise_";

namespace detail {

// `p` as it is, or with its searcher behind stage::staged with `stages`: the
// stage runs where a job is asked for or the rules have a min_shards (its
// column blocks).
template <class Planner>
plan_result run(const Planner& p, const stage::stage_settings& stages, bool min_shards,
                const task& t, std::uint64_t seed) {
  if (!stages.any() && !min_shards) return p(t, seed);
  return rowwise_planner_of<Planner>(p.cost(), stage::behind_stage(p.searcher(), stages), p.rule(),
                                     p.scorer())(t, seed);
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
  return [p = std::move(p)](const task& t, std::uint64_t seed, const stage::stage_settings& stages,
                            const table_rules& rules) {
    const bool min_shards = rules.has_min_shards();
    if (rules.empty()) return run(p, stages, min_shards, t, seed);
    return run(Planner(p.cost(), p.searcher(), with_rules(p.rule(), rules), p.scorer(), p.meter()),
               stages, min_shards, t, seed);
  };
}

// A trained preset's function from preset_models, or the error naming the
// empty field and how to fill it.
template <class Context>
plan_result run_trained(const Context& c, const preset_fn& fn, std::string_view field,
                        std::string_view how) {
  if (!fn) {
    embplan::detail::fail(field, "(empty)",
                          "a trained policy's planner for planner '" + std::string(c.name) +
                              "': " + std::string(how));
  }
  return fn(c.t, c.seed, c.stages, c.rules);
}

}  // namespace detail

// What an entry of the registry runs with: run_preset's arguments.
template <cost_model Model>
struct run_context {
  using model_type = Model;

  std::string_view name;  // as asked for, rowwise_ included
  const task& t;
  std::uint64_t seed;
  const Model& model;
  const preset_models& models;
  const table_rules& rules;
  const stage::stage_settings& stages;  // split_rows set for a rowwise_ name
  default_constraint rule;              // the presets' rule, with `rules`

  // `p` as it is, or behind the stage (detail::run).
  template <class Planner>
  plan_result plan(const Planner& p) const {
    return detail::run(p, stages, rules.has_min_shards(), t, seed);
  }
};

// The registry's entries, one per preset: its name, and how it runs from a
// run_context (a member template, so that naming an entry instantiates no
// planner). The planners that search on any cost model (neuroshard,
// neuroshard_plus, neuroshard_ls, portfolio: NeuroShard's "pre-train, then
// search", §3) search on the context's model; the others keep their own cost
// (the baselines are defined by it).
struct random_preset {
  static constexpr std::string_view name = "random";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(random_planner({}, {}, c.rule, {}));
  }
};
struct size_greedy_preset {
  static constexpr std::string_view name = "size_greedy";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(size_greedy_planner({}, {}, c.rule, {}));
  }
};
struct dim_greedy_preset {
  static constexpr std::string_view name = "dim_greedy";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(dim_greedy_planner({}, {}, c.rule, {}));
  }
};
struct lookup_greedy_preset {
  static constexpr std::string_view name = "lookup_greedy";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(lookup_greedy_planner({}, {}, c.rule, {}));
  }
};
struct size_lookup_greedy_preset {
  static constexpr std::string_view name = "size_lookup_greedy";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(size_lookup_greedy_planner({}, {}, c.rule, {}));
  }
};
struct random_search_preset {
  static constexpr std::string_view name = "random_search";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(random_search_planner({}, {}, c.rule, {}));
  }
};
// TorchRec v0.3.2's EmbeddingShardingPlanner (docs/torchrec.md). A
// min_shards rule does not put it behind the stage: the searcher gives it to
// TorchRec as a min_partition (search/torchrec.hpp, apply_rules), as a
// TorchRec user would.
struct torchrec_preset {
  static constexpr std::string_view name = "torchrec";
  template <class Context>
  static plan_result run(const Context& c) {
    return detail::run(torchrec_planner({}, {}, c.rule, {}), c.stages, false, c.t, c.seed);
  }
};
// A TorchRec-style greedy after NeuroShard's appendix E.3 (table- and
// column-wise, perf-ordered partitioner); not TorchRec's planner.
struct torchrec_like_preset {
  static constexpr std::string_view name = "torchrec_like";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(torchrec_like_planner({}, {}, c.rule, {}));
  }
};
struct neuroshard_preset {
  static constexpr std::string_view name = "neuroshard";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(basic_neuroshard_planner<typename Context::model_type>(c.model, {}, c.rule, {}));
  }
};
struct neuroshard_plus_preset {
  static constexpr std::string_view name = "neuroshard_plus";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(
        basic_neuroshard_plus_planner<typename Context::model_type>(c.model, {}, c.rule, {}));
  }
};
struct neuroshard_ls_preset {
  static constexpr std::string_view name = "neuroshard_ls";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(
        basic_neuroshard_ls_planner<typename Context::model_type>(c.model, {}, c.rule, {}));
  }
};
// A trained policy's planner: preset_models::dreamshard.
struct dreamshard_preset {
  static constexpr std::string_view name = "dreamshard";
  template <class Context>
  static plan_result run(const Context& c) {
    return detail::run_trained(c, c.models.dreamshard, "preset_models.dreamshard",
                               "embplan::rl::dreamshard_preset(rl::dreamshard_policy::load(path)) "
                               "(rl/dreamshard_preset.hpp)");
  }
};
// A trained policy's planner: preset_models::autoshard.
struct autoshard_preset {
  static constexpr std::string_view name = "autoshard";
  template <class Context>
  static plan_result run(const Context& c) {
    return detail::run_trained(c, c.models.autoshard, "preset_models.autoshard",
                               "embplan::rl::autoshard_preset(rl::autoshard_policy::load(path)) "
                               "(rl/autoshard_preset.hpp)");
  }
};
struct portfolio_preset {
  static constexpr std::string_view name = "portfolio";
  template <class Context>
  static plan_result run(const Context& c) {
    return c.plan(basic_portfolio_planner<typename Context::model_type>(c.model, {}, c.rule, {}));
  }
};

// A list of entries: their names, in the list's order, at compile time.
template <class... Presets>
struct preset_list {
  static constexpr std::array<std::string_view, sizeof...(Presets)> names{Presets::name...};
};

// Every preset run_preset knows, in the order of preset_names().
using all_presets =
    preset_list<random_preset, size_greedy_preset, dim_greedy_preset, lookup_greedy_preset,
                size_lookup_greedy_preset, random_search_preset, torchrec_preset,
                torchrec_like_preset, neuroshard_preset, neuroshard_plus_preset,
                neuroshard_ls_preset, dreamshard_preset, autoshard_preset, portfolio_preset>;

namespace detail {

consteval bool distinct_and_unprefixed(std::span<const std::string_view> names) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty() || names[i].starts_with(rowwise_prefix)) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (names[i] == names[j]) return false;
  }
  return true;
}
static_assert(distinct_and_unprefixed(all_presets::names),
              "embplan::presets::all_presets: each preset needs a name of its own, without the "
              "rowwise_ prefix");

inline std::string joined_names() {
  std::string out;
  for (const auto n : all_presets::names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out + " (each also prefixed rowwise_: tables that fit no device split by rows)";
}

// The entry named `base` run on `c`; an unknown name fails naming 'planner',
// the name as asked for and the accepted names.
template <class... Presets, class Context>
plan_result dispatch(preset_list<Presets...>, std::string_view base, const Context& c) {
  std::optional<plan_result> out;
  static_cast<void>(((base == Presets::name && (out.emplace(Presets::run(c)), true)) || ...));
  if (!out) embplan::detail::fail("planner", c.name, "one of " + joined_names());
  return std::move(*out);
}

}  // namespace detail

}  // namespace presets

// The names run_preset accepts, in a fixed order (each also prefixed rowwise_).
constexpr std::span<const std::string_view> preset_names() noexcept {
  return presets::all_presets::names;
}

// Runs the named preset on `t`. The planners that search on any cost model
// (neuroshard, neuroshard_plus, neuroshard_ls, portfolio and their rowwise_
// forms) search on `model`, e.g. a learned neural_cost, by default the
// analytic model; the others keep their own cost. "dreamshard" runs
// models.dreamshard (a trained policy's planner, embplan::rl::dreamshard_preset)
// and throws embplan::error naming 'preset_models.dreamshard' when that is
// empty; "autoshard" likewise runs models.autoshard
// (embplan::rl::autoshard_preset). An unknown name throws embplan::error naming
// the field 'planner', the value and the accepted names.
// A template even without `model`, so that a TU that never calls it does not
// instantiate the twenty-two planners.
// `rules`: the user's per-table constraints (table_rules, built for `t`),
// which every preset plans under, in default_constraint; empty by default.
// `stages`: the stage's jobs (stage::stage_settings, none by default): the
// row split of tables that fit no device (split_rows; a rowwise_ name sets
// it too), the small tables replicated first (data_parallel), where split
// tables' pieces go on a cluster of several hosts (layout), tables that fit
// cut by rows where cheaper (rows_by_cost). The preset runs behind
// stage::staged where any job is asked for or `rules` has a min_shards
// (whose tables the stage cuts into column blocks), else as it is.
template <cost_model Model = analytic_cost>
plan_result run_preset(std::string_view name, const task& t, std::uint64_t seed = 0,
                       const Model& model = Model{}, const preset_models& models = {},
                       const table_rules& rules = {}, const stage::stage_settings& stages = {}) {
  const bool rowwise = name.starts_with(presets::rowwise_prefix);
  const std::string_view base = rowwise ? name.substr(presets::rowwise_prefix.size()) : name;
  stage::stage_settings asked = stages;
  asked.split_rows = asked.split_rows || rowwise;
  const presets::run_context<Model> c{.name = name,
                                      .t = t,
                                      .seed = seed,
                                      .model = model,
                                      .models = models,
                                      .rules = rules,
                                      .stages = asked,
                                      .rule = {memory_capacity{}, dim_multiple{}, rules}};
  return presets::detail::dispatch(presets::all_presets{}, base, c);
}

// The same with the data-parallel copies and the layout as separate
// arguments: stage_settings{.layout = layout, .data_parallel = data_parallel}.
// (The seventh argument picks the overload by its type; a bare `{}` there
// fits both: leave it out instead.)
template <cost_model Model>
plan_result run_preset(std::string_view name, const task& t, std::uint64_t seed, const Model& model,
                       const preset_models& models, const table_rules& rules,
                       const stage::data_parallel_options& data_parallel,
                       stage::row_layout layout = stage::row_layout::by_cost) {
  return run_preset(name, t, seed, model, models, rules,
                    stage::stage_settings{.layout = layout, .data_parallel = data_parallel});
}

}  // namespace embplan::inline EMBPLAN_ABI
