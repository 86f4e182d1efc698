#pragma once
// choose_tiers: a pre-pass that moves tables out of HBM when the task's tables
// do not fit the cluster's (the memory-tiers option, docs/sharding.md). While
// the tables' HBM need (shard_bytes of each whole table) exceeds hbm_fill x
// the cluster's total HBM, it moves one table at a time to uvm_caching or
// host, taking the move with the least added cost per HBM byte freed, until
// the need fits:
//  - candidates: each table still in hbm that is not `fixed` (a constraint
//    already chose its tier), in uvm_caching with the cache the miss-ratio
//    curve says is worth having (cheapest_tier_within_budget just below the
//    table's HBM bytes: the largest cache before the curve goes flat, or
//    host where caching saves nothing), and in host;
//  - added cost: analytic_cost::tiered_shard_cost of the whole table on
//    device 0 minus its cost in hbm (per-device figures differ by bandwidth
//    alone, so the order is the same on a uniform cluster);
//  - ties go to the lower table index, then to uvm_caching: deterministic.
// A table is moved at most once. If every table has been considered and the
// need still exceeds the fill, it stops: planning then reports what does not
// fit. Tables already off hbm count with their own tier's bytes.
// Host DRAM: a table off hbm keeps its weights and optimizer state there
// (shard_dram_bytes), so a move is skipped (the table stays in hbm, the next
// move is tried) where the tables off hbm would need more than the cluster's
// host DRAM, the sum of the devices' dram_bytes (not limited where a device
// has none set: cluster_dram_bytes). The sum is the most a plan can use; the
// memory constraint then places each shard within its own device's.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/host_dram.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/rowwise/cache_sizing.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

struct tier_options {
  double hbm_fill = 0.9;  // the tables may take this fraction of the cluster's HBM
  analytic_cost model{};  // prices each move
};

struct tier_move {
  std::size_t table = 0;
  tier_placement placement{};         // where it went
  std::uint64_t hbm_freed_bytes = 0;  // shard_bytes of the whole table, before - after
  double added_cost_ms = 0.0;         // tiered_shard_cost - shard_cost in hbm
};

namespace detail {

inline std::uint64_t table_hbm_bytes(const task& t, std::size_t i) {
  return shard_bytes(t, whole_table(t, i, 0));
}

}  // namespace detail

// The tables' HBM need: shard_bytes of every whole table in its tier.
inline std::uint64_t tables_hbm_bytes(const task& t) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    sum = checked_add(sum, detail::table_hbm_bytes(t, i), "tables' HBM");
  return sum;
}

// Moves tables of `t` off hbm as the header comment says; `fixed[i]` (if
// given, one per table) leaves table i where it is. Returns the moves in order.
inline std::vector<tier_move> choose_tiers(task& t, const tier_options& o = {},
                                           const std::vector<bool>& fixed = {}) {
  validate(t);
  if (!(o.hbm_fill > 0.0 && o.hbm_fill <= 1.0)) {
    embplan::detail::fail("tier_options.hbm_fill", o.hbm_fill, "a fraction of HBM in (0, 1]");
  }
  if (!fixed.empty() && fixed.size() != t.tables.size()) {
    embplan::detail::fail("fixed.size", fixed.size(),
                          "one flag per table (" + std::to_string(t.tables.size()) + ")");
  }
  long double capacity = 0.0L;
  for (const auto& d : t.cluster.devices)
    capacity += static_cast<long double>(d.memory_bytes);
  const long double target = capacity * static_cast<long double>(o.hbm_fill);
  std::uint64_t need = tables_hbm_bytes(t);
  std::vector<tier_move> out;
  if (static_cast<long double>(need) <= target) return out;
  // A table's move does not depend on the others' (its bytes and cost are its
  // own), so each table's best move is found once and the moves are taken in
  // order of their score: the same moves as choosing the best of all tables
  // again after each one.
  struct candidate {
    double score;
    tier_move move;
  };
  std::vector<candidate> best;
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    if (!fixed.empty() && fixed[i]) continue;
    table_spec& spec = t.tables[i];
    if (spec.placement.tier != memory_tier::hbm) continue;
    const shard whole = whole_table(t, i, 0);
    const std::uint64_t before = shard_bytes(t, whole);
    const double hbm_ms = o.model.shard_cost(t, whole);
    const auto in_hbm = table_storage(spec, t.batch_size, t.optimizer_state, {});
    const tier_placement cached =
        rowwise::cheapest_tier_within_budget(spec, t.batch_size, t.optimizer_state,
                                             in_hbm.total().hbm_bytes - 1)
            .placement;
    std::optional<candidate> mine;
    for (const tier_placement& where : {cached, tier_placement{.tier = memory_tier::host}}) {
      spec.placement = where;
      const std::uint64_t after = shard_bytes(t, whole);
      spec.placement = {};
      if (after >= before) continue;
      const double added = o.model.tiered_shard_cost(t, whole, where) - hbm_ms;
      const double score = added / static_cast<double>(before - after);
      if (!mine || score < mine->score) {
        mine = candidate{score,
                         {.table = i,
                          .placement = where,
                          .hbm_freed_bytes = before - after,
                          .added_cost_ms = added}};
      }
    }
    if (mine) best.push_back(*mine);
  }
  // Lowest score first; among equal scores the lower table index (best is in
  // table order, and the sort is stable).
  std::stable_sort(best.begin(), best.end(),
                   [](const candidate& a, const candidate& b) { return a.score < b.score; });
  const std::optional<std::uint64_t> dram_capacity = cluster_dram_bytes(t.cluster);
  std::uint64_t dram_need = 0;  // of the tables off hbm, counted where the DRAM is limited
  for (std::size_t i = 0; dram_capacity && i < t.tables.size(); ++i)
    dram_need = checked_add(dram_need, shard_dram_bytes(t, whole_table(t, i, 0)), "tables' DRAM");
  for (const auto& c : best) {
    if (static_cast<long double>(need) <= target) break;
    table_spec& spec = t.tables[c.move.table];
    if (dram_capacity) {
      const std::uint64_t dram = table_bytes(spec, t.optimizer_state);  // shard_dram_bytes off hbm
      if (!dram_fits(*dram_capacity, dram_need, dram)) continue;
      dram_need += dram;
    }
    spec.placement = c.move.placement;
    need -= c.move.hbm_freed_bytes;
    out.push_back(c.move);
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::stage
