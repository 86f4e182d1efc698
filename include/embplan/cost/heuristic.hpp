#pragma once
// The papers' four heuristic cost functions (NeuroShard App. E.1, AutoShard
// §5.1 "Heuristic Algorithms"): what the sorted-greedy baselines balance.
//   size        = rows x cols x dtype bytes of the piece (bytes, no optimizer state)
//   dim         = cols
//   lookup      = cols x pooling factor
//   size_lookup = cols x pooling factor x log10(rows)
// App. E.1 describes size-lookup as "the product of the table dimension, the
// mean pooling factor, and the table size"; the code that produced the paper's
// Table 1 (neuroshard/sharders.py, size_lookup_greedy_shard) multiplies by
// log10 of the hash size instead, and we follow the code.
// The values are heuristic "cost units", not milliseconds: compute() reports
// the sum over a device's group as fwd_ms (bwd_ms = 0) and communication is
// zero, so a plan's max_ms under these models is its largest device load —
// exactly the quantity the greedy baselines balance. Only ordering and ratios
// matter; the units of each kind differ.
//
// A row-wise piece carries the share of the lookups that falls in its rows
// (uniform indices): pooling factor x rows(piece) / rows(table); for whole
// tables and column pieces that is the table's pooling factor, as in the papers.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

enum class heuristic : std::uint8_t { size, dim, lookup, size_lookup };

template <heuristic Kind>
struct heuristic_cost {
  // Scores, not milliseconds: a planner that searches on one reports its plan
  // priced by a meter in ms (planner.hpp).
  static constexpr cost_unit unit = cost_unit::heuristic;

  std::string_view name() const noexcept {
    switch (Kind) {
      case heuristic::size:
        return "size";
      case heuristic::dim:
        return "dim";
      case heuristic::lookup:
        return "lookup";
      case heuristic::size_lookup:
        return "size_lookup";
    }
    return "size";
  }

  double shard_cost(const task& t, const shard& s) const {
    const auto& spec = t.tables[s.table];
    const double cols = static_cast<double>(s.cols());
    const double rows = static_cast<double>(s.rows());
    if constexpr (Kind == heuristic::size) {
      return static_cast<double>(block_bytes(static_cast<std::uint64_t>(s.rows()),
                                             static_cast<std::uint64_t>(s.cols()),
                                             spec.weight_dtype));
    } else if constexpr (Kind == heuristic::dim) {
      return cols;
    } else {
      const double lookups = spec.pooling_factor * rows / static_cast<double>(spec.rows);
      if constexpr (Kind == heuristic::lookup) {
        return cols * lookups;
      } else {
        return cols * lookups * std::log10(rows);
      }
    }
  }

  // Additive by definition: the group's load is the sum of its pieces.
  compute_cost compute(const task& t, std::span<const shard> group, std::size_t) const {
    double sum = 0.0;
    for (const auto& s : group)
      sum += shard_cost(t, s);
    return compute_cost{.fwd_ms = sum, .bwd_ms = 0.0};
  }

  // The heuristics do not model communication.
  void communication(const task&, std::span<const std::int64_t>, std::span<const double>,
                     std::span<comm_cost> out) const {
    std::fill(out.begin(), out.end(), comm_cost{});
  }
};

using size_cost = heuristic_cost<heuristic::size>;
static_assert(cost_model<size_cost>);
using dim_cost = heuristic_cost<heuristic::dim>;
static_assert(cost_model<dim_cost>);
using lookup_cost = heuristic_cost<heuristic::lookup>;
static_assert(cost_model<lookup_cost>);
using size_lookup_cost = heuristic_cost<heuristic::size_lookup>;
static_assert(cost_model<size_lookup_cost>);
static_assert(cost_unit_of<lookup_cost> == cost_unit::heuristic);

}  // namespace embplan::inline EMBPLAN_ABI
