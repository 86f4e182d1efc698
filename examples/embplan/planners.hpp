#pragma once
// The planners of `embplan plan --planner` and `compare --planners`: one name
// parser for both, and the one place that runs a preset and reads its
// embplan::plan_result (so a change to either is adapted here alone).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/stage/settings.hpp"
#include "models.hpp"

namespace embplan_cli {

// The presets (embplan::preset_names()), each also with the prefix rowwise_:
// the same planner, splitting a table that fits no device by rows.
std::vector<std::string> planner_names();

// "random, size_greedy, ... (each also prefixed rowwise_: ...)", for help and errors.
std::string planner_list();

// `name` if it is a preset or rowwise_ + a preset, else an error naming `flag`
// and the value.
std::string parse_planner(const std::string& name, std::string_view flag);

// dreamshard or rowwise_dreamshard: the planners that need --policy.
bool is_dreamshard(std::string_view name);
bool is_autoshard(std::string_view name);
// A rowwise_ planner: splits a table that fits no device by rows.
bool is_rowwise(std::string_view name);

// What the CLI reads of a planner's result.
struct planned {
  bool ok = false;
  std::string failure;  // when !ok
  embplan::plan placement;
  double search_ms = 0.0;
  std::uint64_t cache_lookups = 0;  // the searcher's cost cache, if it has one
  std::uint64_t cache_hits = 0;
  std::string made_by;  // a portfolio's member whose plan it is (search_result::made_by)
};

// Runs the named planner (parse_planner's) on `t`; NeuroShard's planners
// search on the planning model, dreamshard places with pm.policy (where that
// is null, a failure saying why) (embplan::run_preset).
// `rules`: the user's constraints (plan --constraints), empty by default.
// `stages`: small tables replicated first (--data-parallel auto), where a
// rowwise_ planner puts a split table's pieces across hosts (--row-layout),
// tables that fit cut by rows where cheaper (--rows-by-cost auto); the
// rowwise_ prefix of `name` adds the row split.
planned run_planner(const std::string& name, const embplan::task& t, std::uint64_t seed,
                    const planning_model& pm, const embplan::table_rules& rules = {},
                    const embplan::stage::stage_settings& stages = {});

// "none" or "auto" for `flag` (--tiers, --data-parallel), else an error naming
// the flag and the value.
void check_none_or_auto(std::string_view flag, const std::string& value);

// The tables of `t` larger than the memory of every device: what the
// rowwise_ planners split by rows, and every other planner fails on.
std::size_t oversized_tables(const embplan::task& t);

// Every preset plans under embplan::default_constraint, whose dim_multiple
// places only pieces of a multiple of 4 columns: a table of another dim fits
// no device whatever its memory. Refused before planning, naming `where`'s
// table (index and name), its dim and the rule.
void check_dim_multiple(std::span<const embplan::table_spec> tables, std::string_view where);

// A failure for a person: sizes in GiB ("4294967296 bytes" -> "4.000 GiB"),
// and, where `t` holds an oversized table and `planner` does not split by
// rows, the rowwise_ planners suggested.
std::string failure_text(const std::string& planner, const std::string& failure,
                         const embplan::task& t);

// "try a rowwise_ planner (e.g. rowwise_<base of planner> or rowwise_torchrec_like) ..."
std::string rowwise_hint(const std::string& planner);

}  // namespace embplan_cli
