#pragma once
// The sub-task's constraint: the inner searcher places the tables the stage
// left on a task whose tables are renumbered (blocks and row pieces are tables
// of their own) and whose capacities are reduced by what the stage placed;
// in_full_task asks the caller's rule every question in the caller's terms
// (table index, columns and rows moved back, a state that adds the stage's
// shards and merges the per-table records), so a user rule that names a
// table keeps meaning that table. Invariant: admits() answers as the caller's
// rule answers for the translated shard on the combined state.
// Design notes: docs/design/stage.md.

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

namespace detail {

// Record `b` of a sub-task table added to record `a` of the same full table.
inline table_placement merged(table_placement a, const table_placement& b) noexcept {
  if (a.pieces == 0) return b;
  if (b.pieces == 0) return a;
  a.on_home += b.home == a.home ? b.on_home : 0;
  a.pieces += b.pieces;
  a.seen |= b.seen;
  return a;
}

// The constraint the inner searcher is given: questions about the sub-task
// (tables renumbered, capacities reduced by the row shards) translated into
// the caller's task. A sub-task shard of table k is asked about as table
// index[k] of `full`, its columns moved right by offset[k] (a table cut into
// column blocks for min_shards is several sub-task tables) and its rows by
// row_offset[k] (a table cut by rows_by_cost: one per piece), on a state that
// adds the row shards (`base`) to what the inner searcher placed; the
// sub-task's reduced capacities and the full task's capacities with the row
// shards counted are the same memory.
template <constraint Constraint>
class in_full_task {
 public:
  in_full_task(const Constraint& rule, const task& full, std::span<const std::size_t> index,
               std::span<const std::int32_t> offset, std::span<const std::int64_t> row_offset,
               const placement_state& base) noexcept
      : rule_(&rule)
      , full_(&full)
      , index_(index)
      , offset_(offset)
      , row_offset_(row_offset)
      , base_(&base)
      , dram_free_(!holds_limited_dram(full, base))
      , same_in_sub_task_(same_in_sub_task(rule) && dram_free_) {}

  bool admits(const task& sub, const placement_state& st, const shard& s) const {
    if (same_in_sub_task_) return static_cast<bool>(rule_->admits(sub, st, s));
    return admits_translated(sub, st, s, nullptr);
  }
  // The bytes of a sub-task shard are those of the same block of the full
  // task's table (the sub-task's tables are copies).
  bool admits(const task& sub, const placement_state& st, const shard& s,
              std::uint64_t bytes) const {
    if (same_in_sub_task_) return admits_with_bytes(*rule_, sub, st, s, bytes);
    return admits_translated(sub, st, s, &bytes);
  }
  std::string describe() const { return std::string(rule_->describe()); }
  // room_bounding_constraint: for default_constraint, its room on the
  // sub-task (its memory capacity's: the same memory as the full task's with
  // the row shards counted, and every path of admits() asks it, user rules
  // only refusing more). Else no limit: the translated room would need the
  // combined state.
  std::uint64_t room(const task& sub, const placement_state& st,
                     std::size_t device) const noexcept {
    if constexpr (std::same_as<Constraint, default_constraint>) {
      return room_of(*rule_, sub, st, device);
    } else {
      return unlimited_room;
    }
  }
  // The inner searcher must keep the per-table record where the caller's
  // rule reads it (co-location, anti-affinity, max shards): combined() passes
  // it on.
  bool reads_table_record() const noexcept { return embplan::reads_table_record(*rule_); }
  std::string explain(const task&, const placement_state& st, std::size_t table) const {
    return explain_of(*rule_, *full_, combined(st), index_[table]);
  }

  // The caller's index of sub-task table `table` (what a searcher's failure
  // message names it by: search/infeasible.hpp).
  std::size_t full_table_index(std::size_t table) const noexcept { return index_[table]; }

  // Sub-task shard `s` in the caller's terms: its table, columns and rows
  // there (how the stage maps the inner searcher's plan back).
  shard translated(shard s) const noexcept {
    const std::int32_t shift = offset_[s.table];
    const std::int64_t row_shift = row_offset_[s.table];
    s.table = static_cast<std::uint32_t>(index_[s.table]);
    s.col_begin += shift;
    s.col_end += shift;
    s.row_begin += row_shift;
    s.row_end += row_shift;
    return s;
  }

 private:
  // Whether `rule` answers a sub-task question as it answers the translated
  // one, so that admits() may skip the translation (combined() copies the
  // whole device state, O(devices + tables) a question): default_constraint
  // with no user rules, whose memory capacity and column multiple read only
  // the shard's block and its device's memory (the sub-task's capacities are
  // what the row shards and copies left free).
  static bool same_in_sub_task(const Constraint& rule) noexcept {
    if constexpr (std::same_as<Constraint, default_constraint>) {
      return std::get<2>(rule.parts()).empty();
    } else {
      return false;
    }
  }

  // admits() where the sub-task's question is not the full task's: for a
  // table no user rule names (unruled), the memory capacity's and the column
  // multiple's answers on the sub-task; else the rule's on the combined
  // state. Kept out of admits(), which the searchers' steps inline.
  bool admits_translated(const task& sub, const placement_state& st, const shard& s,
                         const std::uint64_t* bytes) const {
    const auto ask = [&](const auto& rule, const task& t, const placement_state& state,
                         const shard& piece) {
      return bytes != nullptr ? admits_with_bytes(rule, t, state, piece, *bytes)
                              : static_cast<bool>(rule.admits(t, state, piece));
    };
    if constexpr (std::same_as<Constraint, default_constraint>) {
      if (unruled(s)) {
        const auto& parts = rule_->parts();
        return ask(std::get<0>(parts), sub, st, s) && ask(std::get<1>(parts), sub, st, s);
      }
    }
    return ask(*rule_, *full_, combined(st), translated(s));
  }

  // For default_constraint with user rules: whether no rule names the
  // shard's table. Then the rules admit it without reading the state
  // (table_rules::rules_table), and the answer is the memory capacity's and
  // the column multiple's, which read the sub-task as same_in_sub_task says;
  // no combined state is built (O(devices + tables) a question, which
  // dominates planning with rules on many tables; docs/design/stage.md).
  bool unruled(
      const shard& s) const noexcept requires std::same_as<Constraint, default_constraint> {
    return dram_free_ && !std::get<2>(rule_->parts()).rules_table(index_[s.table]);
  }

  // Whether the row shards and copies already hold host DRAM that a limit
  // counts: the sub-task keeps the full capacities of host DRAM (a free 0
  // would read as "not limited"), so then every question is translated.
  static bool holds_limited_dram(const task& full, const placement_state& base) noexcept {
    for (std::size_t d = 0; d < base.dram_bytes.size(); ++d)
      if (base.dram_bytes[d] != 0 && full.cluster.devices[d].dram_bytes != 0) return true;
    return false;
  }

  placement_state combined(const placement_state& st) const {
    placement_state out = *base_;
    for (std::size_t d = 0; d < out.memory_bytes.size(); ++d) {
      out.memory_bytes[d] += st.memory_bytes[d];
      out.dim_sum[d] += st.dim_sum[d];
      out.shard_count[d] += st.shard_count[d];
      if (d < st.dram_bytes.size()) out.dram_bytes[d] += st.dram_bytes[d];  // may be unsized
    }
    // The sub-task's tables are not the split ones: their records move over
    // under their full-task indices, the blocks of one table's merged.
    if (!st.tables.empty() && out.tables.size() < full_->tables.size())
      out.tables.resize(full_->tables.size());
    for (std::size_t k = 0; k < st.tables.size(); ++k)
      if (st.tables[k].pieces > 0)
        out.tables[index_[k]] = merged(out.tables[index_[k]], st.tables[k]);
    return out;
  }

  const Constraint* rule_;
  const task* full_;
  std::span<const std::size_t> index_;
  std::span<const std::int32_t> offset_;
  std::span<const std::int64_t> row_offset_;
  const placement_state* base_;
  bool dram_free_;  // !holds_limited_dram
  bool same_in_sub_task_;
};

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::stage
