#pragma once
// check_plan: everything wrong with a plan for a task, each problem naming the
// table or device and the values (`embplan plan --check plan.json`
// re-validates a plan against a task: coverage, memory, constraints; see
// docs/report.md). The structural checks are validate()'s own
// (core/plan.hpp, plan_problems); the Constraint is replayed over the plan's
// shards in plan order, as the planner holds a searcher's plan to it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// The plan's shards, in plan order, through c.admits, each placed after it was
// asked whether refused or not; refused(i) for each shard i it refuses, until
// refused returns false. Shards with usable[i] == 0 are neither asked nor
// placed (an empty `usable`: every shard is asked).
template <constraint Constraint, class Refused>
void replay_constraint(const task& t, const plan& p, const Constraint& c, Refused&& refused,
                       std::span<const std::uint8_t> usable = {}) {
  placement_state st(t);  // the record kept whatever c promises: this is the final check
  for (std::size_t i = 0; i < p.shards.size(); ++i) {
    if (!usable.empty() && usable[i] == 0) continue;
    const shard& s = p.shards[i];
    if (!static_cast<bool>(c.admits(t, st, s)) && !refused(i)) return;
    st.place(t, s);
  }
}

// Every problem of `p` for `t`: validate()'s (references, shapes, column
// multiple, coverage, memory per `check`) and each shard `c` refuses, replayed
// over the shards that name a table and a device of the task with a legal
// shape; then each table placed as fewer pieces than c's min_shards
// (min_shards_of). Empty: the plan is valid.
template <constraint Constraint>
std::vector<plan_problem> check_plan(const task& t, const plan& p, const Constraint& c,
                                     plan_check check = {}) {
  auto out = plan_problems(t, p, check);
  std::vector<std::uint8_t> usable(p.shards.size(), 1);
  for (std::size_t i = 0; i < p.shards.size(); ++i)
    usable[i] = well_formed(t, p.shards[i]) ? 1 : 0;
  replay_constraint(
      t, p, c,
      [&](std::size_t i) {
        const auto& s = p.shards[i];
        out.push_back({plan_problem_kind::constraint, table_subject(t, s.table),
                       detail::field_message(
                           detail::path("shards", i), detail::to_display(describe_shard(t, s)),
                           "a placement that " + std::string(c.describe()) + " admits")});
        return true;
      },
      usable);
  // A table placed as fewer pieces than the constraint's min_shards (data-
  // parallel copies and replicas aside: a piece holds a part of the table).
  std::vector<std::uint32_t> pieces;
  for (std::size_t ti = 0; ti < t.tables.size(); ++ti) {
    const std::uint32_t least = min_shards_of(c, ti);
    if (least <= 1) continue;
    if (pieces.empty()) {
      pieces.assign(t.tables.size(), 0);
      for (std::size_t i = 0; i < p.shards.size(); ++i) {
        const auto& s = p.shards[i];
        if (usable[i] != 0 && !s.replica && !s.data_parallel) ++pieces[s.table];
      }
    }
    if (pieces[ti] >= least) continue;
    out.push_back(
        {plan_problem_kind::constraint, table_subject(t, ti),
         detail::field_message(detail::path("tables", ti), detail::to_display(t.tables[ti].name),
                               "at least " + std::to_string(least) +
                                   " pieces (min_shards), but it is placed as " +
                                   std::to_string(pieces[ti]))});
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI
