#pragma once
// stage::staged<Inner>: the stage, plan options for any searcher, each asked
// for in its stage_settings (stage/settings.hpp; none by default). Before the
// inner searcher places the tables, the stage
//  - with split_rows, splits by rows each table that no device admits whole
//    (largest first; layout row_wise, table_row_wise or grid, by default the
//    cheapest), hot rows optionally replicated on its row-shard devices: the
//    embedding-tables chapter's "shard the table by ID" (§2) and hot-row
//    replication (§4), TorchRec's row-wise sharding (stage/row_split.hpp);
//  - with data_parallel, replicates small tables as data-parallel copies, one
//    on every device (stage/data_parallel.hpp; their all-reduce:
//    cost/collectives.hpp);
//  - with rows_by_cost, cuts tables that fit into row pieces where one alone
//    would bound the plan (stage/rows_by_cost.hpp); the plan with the cuts is
//    kept only where the Reward scores it no lower than the plan without;
//  - always, cuts tables with a minimum piece count (min_shards) into column
//    blocks.
// The inner searcher then places the remaining tables, pieces and blocks,
// unchanged, on a task whose device capacities are reduced by what the stage
// took; its cost model and reward see only that sub-task, but its constraint
// is always asked in the caller's terms (detail::in_full_task). The plan
// maps every piece back to its table's rows and columns. behind_stage puts a
// searcher (each member of a portfolio) behind the stage.
// Design notes: docs/design/stage.md.

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
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
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/search/best_of.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/stage/data_parallel.hpp"
#include "embplan/stage/detail/common.hpp"
#include "embplan/stage/row_split.hpp"
#include "embplan/stage/rows_by_cost.hpp"
#include "embplan/stage/settings.hpp"
#include "embplan/stage/sub_task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

template <class Inner>
struct staged {
  Inner inner{};
  stage_settings settings{};

  // The inner searcher decides the plan of the tables that fit whole (with
  // rows_by_cost the stage also compares two plans by the reward).
  static constexpr bool uses_reward = searcher_uses_reward<Inner>;

  // The pieces of oversized table `ti` by `layout`; none if it fits in no
  // layout.
  template <constraint Constraint>
  std::optional<std::vector<shard>> split_table(const task& t, const placement_state& st,
                                                std::size_t ti, const Constraint& rule) const {
    const std::int64_t hot_rows = settings.hot_rows;
    if (settings.layout == row_layout::row_wise)
      return detail::split_by_rows(t, st, ti, rule, hot_rows);
    const auto hosts = spans_hosts(t.cluster) ? detail::hosts_by_room(t, st)
                                              : std::vector<std::vector<std::size_t>>{};
    auto local = detail::split_within_host(t, st, ti, rule, hot_rows, hosts);
    if (!local) local = detail::split_grid(t, st, ti, rule, hot_rows, hosts);
    if (settings.layout == row_layout::host_first && local) return local;
    auto spread = detail::split_by_rows(t, st, ti, rule, hot_rows);
    if (!local) return spread;
    if (!spread) return local;
    return detail::layout_comm_ms(t, *local) <= detail::layout_comm_ms(t, *spread) ? local : spread;
  }

  // Why `rule` forbids splitting table `ti` by rows over the fewest devices
  // whose free memory holds it (explain_split of a rule that has one, e.g.
  // table_rules' max_shards), or "".
  template <constraint Constraint>
  static std::string split_refusal(const task& t, const placement_state& st, std::size_t ti,
                                   const Constraint& rule) {
    if constexpr (requires { rule.explain_split(t, ti, std::size_t{}); }) {
      std::vector<std::uint64_t> room(t.cluster.size());
      for (std::size_t d = 0; d < room.size(); ++d)
        room[d] = detail::free_bytes(t, st, d);
      std::sort(room.begin(), room.end(), std::greater<>{});
      const std::uint64_t need = table_bytes(t.tables[ti], t.optimizer_state);
      std::size_t count = 0;
      embplan::detail::uint128 held = 0;
      while (count < room.size() && held < need)
        held += room[count++];
      return std::string(rule.explain_split(t, ti, std::max<std::size_t>(count, 2)));
    } else {
      return {};
    }
  }

  std::string_view name() const noexcept { return "staged"; }
  std::string label() const { return "staged(" + searcher_label(inner) + ")"; }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t seed) const {
    settings.data_parallel.validate();
    bool cut_any = false;
    search_result with = plan(t, model, rule, score, seed, settings.rows_by_cost, cut_any);
    if (!cut_any) return with;
    search_result without = plan(t, model, rule, score, seed, false, cut_any);
    // The plan the reward scores higher, the one without cuts on a tie
    // (best_of's comparison: one evaluate() per plan compared).
    const std::uint64_t evaluations = with.evaluations + without.evaluations;
    const std::uint64_t lookups = with.cache_lookups + without.cache_lookups;
    const std::uint64_t hits = with.cache_hits + without.cache_hits;
    const auto value = [&](const search_result& r) {
      return static_cast<double>(score.score(t, evaluate(t, r.placement, model)));
    };
    search_result& kept =
        !with.ok || (without.ok && !(value(with) > value(without))) ? without : with;
    kept.evaluations = evaluations + (with.ok ? 1U : 0U) + (without.ok ? 1U : 0U);
    kept.cache_lookups = lookups;
    kept.cache_hits = hits;
    return std::move(kept);
  }

 private:
  // The stage's plan; with `cut_fitting`, tables that fit cut by rows where
  // choose_row_cuts finds it cheaper (`cut_any` says whether any was).
  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result plan(const task& t, const CostModel& model, const Constraint& rule,
                     const Reward& score, std::uint64_t seed, bool cut_fitting,
                     bool& cut_any) const {
    cut_any = false;
    const std::size_t devices = t.cluster.size();
    search_result out;
    placement_state st(t);
    std::vector<std::uint8_t> replicated(t.tables.size(), 0);
    const bool split_rows = settings.split_rows;
    const bool replicating = settings.data_parallel.enabled && devices > 1;
    // Asked once for both stages; with neither, every table goes to `inner`.
    const auto fits = split_rows || replicating ? detail::fits_whole(t, rule)
                                                : std::vector<std::uint8_t>(t.tables.size(), 1);
    if (replicating) {
      detail::choose_data_parallel(t, model, rule, settings.data_parallel, fits, st,
                                   out.placement.shards, replicated);
    }
    std::vector<std::size_t> oversized;
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < t.tables.size(); ++i) {
      if (replicated[i] != 0) continue;
      (!split_rows || fits[i] != 0 ? rest : oversized).push_back(i);
    }
    // Tables the rule wants in at least two pieces (min_shards_of), cut into
    // that many column blocks for the inner searcher.
    std::vector<std::uint32_t> cut(t.tables.size(), 0);
    bool cutting = false;
    for (const std::size_t i : rest) {
      cut[i] = min_shards_of(rule, i);
      cutting = cutting || cut[i] > 1;
    }
    // Tables that fit, cut by rows by cost: each piece a sub-task table.
    const auto row_cut = cut_fitting ? detail::choose_row_cuts(t, model, rule, rest, cut)
                                     : std::vector<std::uint32_t>{};
    const auto row_cut_of = [&](std::size_t i) { return row_cut.empty() ? 0U : row_cut[i]; };
    cut_any = std::any_of(row_cut.begin(), row_cut.end(), [](std::uint32_t n) { return n > 1; });
    if (oversized.empty() && rest.size() == t.tables.size() && !cutting && !cut_any) {
      return inner.search(t, model, rule, score, seed);
    }

    std::stable_sort(oversized.begin(), oversized.end(), [&](std::size_t a, std::size_t b) {
      return table_bytes(t.tables[a], t.optimizer_state) >
             table_bytes(t.tables[b], t.optimizer_state);
    });
    std::string split_names;
    for (const std::size_t i : oversized) {
      auto pieces = split_table(t, st, i, rule);
      if (!pieces) {
        std::uint64_t total_free = 0;
        for (std::size_t d = 0; d < devices; ++d)
          total_free += detail::free_bytes(t, st, d);
        out.failure = no_device_for(t, st, i, rule);
        // A rule that forbids the split is named (max_shards, sharding, pins,
        // co-location); else memory binds.
        if (const std::string why = split_refusal(t, st, i, rule); !why.empty()) {
          out.failure += "; it cannot be split by rows either: " + why;
        } else {
          out.failure += "; split by rows across all " + std::to_string(devices) +
                         " devices it still does not fit (" + std::to_string(total_free) +
                         " bytes free in all)";
        }
        return out;
      }
      for (const auto& s : *pieces) {
        st.place(t, s);
        out.placement.shards.push_back(s);
      }
      split_names += (split_names.empty() ? "'" : ", '") + t.tables[i].name + "'";
    }
    if (rest.empty()) {
      out.ok = true;
      return out;
    }
    // The remaining tables on what the row shards left free.
    task sub;
    sub.name = t.name;
    sub.cluster = t.cluster;
    sub.batch_size = t.batch_size;
    sub.optimizer_state = t.optimizer_state;
    for (std::size_t d = 0; d < devices; ++d)
      sub.cluster.devices[d].memory_bytes = detail::free_bytes(t, st, d);
    std::vector<std::size_t> index;        // sub-task table -> table of t
    std::vector<std::int32_t> offset;      // ... and its first column there
    std::vector<std::int64_t> row_offset;  // ... and its first row
    std::string cut_names;
    for (const std::size_t i : rest) {
      if (const std::uint32_t pieces = row_cut_of(i); pieces > 1) {
        const auto ranges = rowwise::range_partition::even(t.tables[i].rows, pieces);
        for (std::uint32_t k = 0; k < ranges.shards(); ++k) {
          const std::int64_t begin = ranges.row_begin(k);
          const std::int64_t end = ranges.row_end(k);
          table_spec piece = piece_table(
              t, shard{static_cast<std::uint32_t>(i), 0, 0, t.tables[i].dim, begin, end, false});
          piece.name += " rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
          sub.tables.push_back(std::move(piece));
          index.push_back(i);
          offset.push_back(0);
          row_offset.push_back(begin);
        }
        cut_names += (cut_names.empty() ? "'" : ", '") + t.tables[i].name + "'";
        continue;
      }
      if (cut[i] <= 1) {
        sub.tables.push_back(t.tables[i]);
        index.push_back(i);
        offset.push_back(0);
        row_offset.push_back(0);
        continue;
      }
      for (const auto& [begin, end] : detail::column_blocks(t.tables[i].dim, cut[i])) {
        table_spec block = t.tables[i];
        block.dim = end - begin;
        block.name += " columns [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
        sub.tables.push_back(std::move(block));
        index.push_back(i);
        offset.push_back(begin);
        row_offset.push_back(0);
      }
    }
    const detail::in_full_task<Constraint> sub_rule(rule, t, index, offset, row_offset, st);
    search_result r = inner.search(sub, model, sub_rule, score, seed);
    out.evaluations = r.evaluations;
    out.cache_lookups = r.cache_lookups;
    out.cache_hits = r.cache_hits;
    out.made_by = std::move(r.made_by);
    if (!r.ok) {
      const auto copies = static_cast<std::size_t>(
          std::count(replicated.begin(), replicated.end(), std::uint8_t{1}));
      std::string done;
      if (copies > 0) done = "replicating " + std::to_string(copies) + " tables data-parallel";
      if (!split_names.empty()) {
        done += (done.empty() ? "splitting " : " and splitting ") + split_names + " by rows";
      }
      if (cutting)
        done += (done.empty() ? "" : " and ") + std::string(
                                                    "cutting tables with "
                                                    "min_shards into column blocks");
      if (!cut_names.empty())
        done += (done.empty() ? "cutting " : " and cutting ") + cut_names + " by rows (by cost)";
      out.failure = "after " + done + ", the other tables do not fit: " + r.failure;
      return out;
    }
    for (const auto& s : r.placement.shards)
      out.placement.shards.push_back(sub_rule.translated(s));
    if (cut_any) {
      out.evaluations +=
          detail::merge_abutting_rows_if_no_costlier(t, model, rule, score, row_cut, out.placement);
    }
    out.ok = true;
    return out;
  }
};

// The searcher behind_stage makes of `Inner`: staged<Inner>, and for
// a portfolio (best_of) the portfolio of its members, each behind its own
// stage.
template <class Inner>
struct staged_searcher {
  using type = staged<Inner>;
};
template <class... Members>
struct staged_searcher<best_of<Members...>> {
  using type = best_of<typename staged_searcher<Members>::type...>;
};
template <class Inner>
using staged_searcher_t = typename staged_searcher<Inner>::type;

// `s` behind the stage with `settings`. A best_of's members each go
// behind their own, so that the portfolio compares whole plans of the
// caller's task (best_of.hpp): behind one stage it would compare the plans of
// the stage's sub-task, whose costs leave the row pieces out.
template <class Inner>
staged_searcher_t<Inner> behind_stage(const Inner& s, const stage_settings& settings) {
  if constexpr (is_best_of<Inner>) {
    return std::apply(
        [&](const auto&... m) { return staged_searcher_t<Inner>{{behind_stage(m, settings)...}}; },
        s.searchers);
  } else {
    return {.inner = s, .settings = settings};
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::stage
