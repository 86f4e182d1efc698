#pragma once
// Lower bounds on the best achievable max device load, to report how far a
// plan is from optimal (its gap) without solving the NP-hard partition.
//
// additive_lower_bound = max(largest single table cost, sum of costs / D) over
// whole tables, where a table's cost is its shard_cost. No table-wise plan can
// put less than its costliest table on one device nor less than the average on
// the busiest, so for an ADDITIVE model — one whose device cost is the sum of
// its shards' shard_cost and which has no communication, e.g. the heuristic
// costs — this bounds the max device cost of every plan from below. It stays a
// bound for analytic_cost, whose device cost only adds a launch and the
// all-to-all to the sum of shard costs; for other non-additive models (learned
// ones, where a fused group may cost less than its parts) it is only a
// reference scale.
//
// On a cluster whose devices differ, a table's cost is the minimum over the
// devices; devices with identical specs (ignoring names) are priced once.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace search::detail {

// Equal in everything but the name: device_spec's own comparison, so a field
// added to device_spec is compared here too.
inline bool same_hardware(const device_spec& a, const device_spec& b) {
  device_spec renamed = a;
  renamed.name = b.name;
  return renamed == b;
}

}  // namespace search::detail

template <cost_model CostModel>
double additive_lower_bound(const task& t, const CostModel& model) {
  const std::size_t devices = t.cluster.size();
  if (devices == 0 || t.tables.empty()) return 0.0;
  // One representative device per distinct hardware spec.
  std::vector<std::size_t> kinds;
  for (std::size_t d = 0; d < devices; ++d) {
    const bool seen = std::any_of(kinds.begin(), kinds.end(), [&](std::size_t k) {
      return search::detail::same_hardware(t.cluster.devices[k], t.cluster.devices[d]);
    });
    if (!seen) kinds.push_back(d);
  }
  double largest = 0.0;
  double sum = 0.0;
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    double cheapest = std::numeric_limits<double>::infinity();
    for (const std::size_t d : kinds)
      cheapest = std::min(cheapest, static_cast<double>(model.shard_cost(t, whole_table(t, i, d))));
    largest = std::max(largest, cheapest);
    sum += cheapest;
  }
  return std::max(largest, sum / static_cast<double>(devices));
}

// Relative gap of a cost to a bound: cost / bound - 1 (0 = provably optimal
// for additive models). 0 when both are 0; +infinity when only the bound is.
inline double gap_to_bound(double cost, double bound) noexcept {
  if (bound <= 0.0) return cost <= 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return cost / bound - 1.0;
}

}  // namespace embplan::inline EMBPLAN_ABI
