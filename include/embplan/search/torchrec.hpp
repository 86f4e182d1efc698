#pragma once
// torchrec_search: TorchRec v0.3.2's EmbeddingShardingPlanner as a Searcher
// (torchrec/planner.hpp runs it; docs/torchrec.md says how the task becomes
// TorchRec's inputs and how the port is checked plan for plan against
// TorchRec itself). The plan is TorchRec's own: its perf and storage
// estimators, its reservation, proposers and partitioner decide it; the cost
// model and the reward are not read (uses_reward = false), and the
// constraint is the planner's check afterwards: TorchRec knows nothing of
// embplan's table rules, so a plan that breaks one leaves the planner as a
// failure naming the rule, never as a plan.
// TorchRec's ParameterSharding in embplan's shards:
//  - data_parallel: a whole copy on every device (shard::data_parallel);
//  - table_wise: the table on its rank;
//  - column_wise, table_column_wise: the column blocks on their ranks;
//  - row_wise, table_row_wise: the row blocks on their ranks (an empty block,
//    which TorchRec gives the last ranks of a table of few rows, is no shard).
// By default each table is offered only the kernel of its tier (hbm: fused,
// or dense for data_parallel; uvm_caching: fused_uvm_caching; host:
// fused_uvm): the task fixes where a table lives, as a ParameterConstraints
// compute_kernels would. With options.all_kernels, TorchRec may pick another
// tier; a plan that does fails, naming the table, since a plan cannot move a
// table between tiers (torchrec::plan returns it whole).

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/torchrec/planner.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace search::detail {

// The tier a TorchRec compute kernel keeps a table in.
constexpr memory_tier tier_of(torchrec::compute_kernel k) noexcept {
  switch (k) {
    case torchrec::compute_kernel::dense:
    case torchrec::compute_kernel::fused:
      return memory_tier::hbm;
    case torchrec::compute_kernel::fused_uvm_caching:
      return memory_tier::uvm_caching;
    case torchrec::compute_kernel::fused_uvm:
      return memory_tier::host;
  }
  return memory_tier::hbm;
}

// Block `b` of table `i` under TorchRec sharding `type` as embplan's piece
// on `rank`.
inline shard piece_of(std::size_t i, const torchrec::shard_block& b, torchrec::sharding_type type,
                      std::int64_t rank) noexcept {
  shard piece;
  piece.table = static_cast<std::uint32_t>(i);
  piece.device = static_cast<std::uint32_t>(rank);
  piece.col_begin = static_cast<std::int32_t>(b.col_offset);
  piece.col_end = static_cast<std::int32_t>(b.col_offset + b.cols);
  piece.row_begin = b.row_offset;
  piece.row_end = b.row_offset + b.rows;
  piece.data_parallel = type == torchrec::sharding_type::data_parallel;
  return piece;
}

}  // namespace search::detail

// TorchRec's plan as embplan's shards (see the header comment), or the
// failure naming the first table whose kernel puts it in another tier than
// the task's.
inline search_result to_search_result(const task& t, const torchrec::planner_result& r) {
  search_result out;
  out.evaluations = r.proposals;
  if (!r.ok) {
    out.failure = r.message;
    return out;
  }
  for (std::size_t i = 0; i < r.tables.size(); ++i) {
    const auto& table = r.tables[i];
    const auto tier = search::detail::tier_of(table.kernel);
    if (tier != t.tables[i].placement.tier) {
      out.failure = "TorchRec's planner put table " + std::to_string(i) + " ('" + t.tables[i].name +
                    "') in compute kernel " + std::string(torchrec::to_string(table.kernel)) +
                    " (tier " + std::string(to_string(tier)) + "), but the task keeps it in tier " +
                    std::string(to_string(t.tables[i].placement.tier)) +
                    ": give the table that placement, or plan without all_kernels";
      out.placement = {};
      return out;
    }
    for (const auto& s : table.shards) {
      if (s.block.rows == 0 || s.block.cols == 0) continue;
      out.placement.shards.push_back(search::detail::piece_of(i, s.block, table.type, s.rank));
    }
  }
  out.ok = true;
  return out;
}

// The user's table rules that TorchRec's ParameterConstraints can say, set on
// `in` for table i of `t` (docs/torchrec.md, "A constraints file as
// ParameterConstraints"):
//  - min_shards n > 1: min_partition 4 x floor(dim / 4n) columns (unless the
//    options' min_partition already cuts n blocks), so that a column-wise
//    layout has at least n blocks;
//  - the kinds of piece a table may be placed as, max_shards and min_shards:
//    sharding_types, those whose layout of the table (shard_layout, its
//    empty blocks left out) has only pieces of allowed kinds (kinds_needed,
//    as the plan's check reads them) and a number of pieces (replicas
//    count) within the bounds.
// Pins, hosts, co-location and anti-affinity have no ParameterConstraints:
// TorchRec plans without them, and the planner checks the plan afterwards.
// "", or why a table's rules leave it no sharding type.
inline std::string apply_rules(torchrec::planner_inputs& in, const task& t,
                               const table_rules& rules) {
  if (rules.empty()) return {};
  in.sharding_types.assign(in.tables.size(), {});
  for (std::size_t i = 0; i < in.tables.size(); ++i) {
    if (!rules.rules_table(i)) continue;
    auto& table = in.tables[i];
    const std::uint32_t most = rules.max_shards(i);
    const std::uint32_t least = rules.min_shards(i);
    const std::uint8_t kinds = rules.allowed_kinds(i);
    if (least > 1 && !(table.min_partition > 0 && table.cols / table.min_partition >= least)) {
      table.min_partition =
          static_cast<std::int32_t>(std::max<std::int64_t>(4, table.cols / (4 * least) * 4));
    }
    if (kinds == 15 && most == 0 && least <= 1) continue;
    auto& allowed = in.sharding_types[i];
    for (const auto type : torchrec::all_sharding_types) {
      std::uint32_t pieces = 0;
      std::uint8_t needed = 0;
      for (const auto& b : torchrec::shard_layout(type, table, in.cluster)) {
        if (b.rows == 0 || b.cols == 0) continue;
        ++pieces;
        needed |= kinds_needed(t, search::detail::piece_of(i, b, type, 0));
      }
      if ((needed & ~kinds) != 0) continue;
      if (most > 0 && pieces > most) continue;
      if (least > 1 && pieces < least) continue;
      allowed.push_back(type);
    }
    if (allowed.empty()) {
      return "TorchRec's planner: the rules of table '" + t.tables[i].name + "' (index " +
             std::to_string(i) +
             ") leave it no TorchRec sharding type (none lays it out in pieces of the allowed "
             "kinds, in the allowed number)";
    }
  }
  return {};
}

struct torchrec_search {
  torchrec::planner_options options{};

  static constexpr bool uses_reward = false;  // TorchRec's own perf rating decides

  std::string_view name() const noexcept { return "torchrec"; }

  // The user's rules, where the constraint carries them (default_constraint),
  // become ParameterConstraints (apply_rules); the planner checks the plan
  // against all of them afterwards.
  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel&, const Constraint& c, const Reward&,
                       std::uint64_t) const {
    auto in = torchrec::inputs_of(t, options);
    if constexpr (std::is_same_v<Constraint, default_constraint>) {
      if (auto why = apply_rules(in, t, std::get<2>(c.parts())); !why.empty()) {
        search_result out;
        out.failure = std::move(why);
        return out;
      }
    }
    return to_search_result(t, torchrec::plan(in, options));
  }
};
static_assert(searcher<torchrec_search>);

}  // namespace embplan::inline EMBPLAN_ABI
