#pragma once
// One random table-wise placement: each table, in index order, to a device
// drawn uniformly from those the constraint admits at that moment.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::search::detail {

template <constraint Constraint>
search_result random_table_wise(const task& t, const Constraint& rule, std::uint64_t stream_seed) {
  const std::size_t devices = t.cluster.size();
  rng gen(stream_seed);
  placement_state st(t);
  std::vector<std::size_t> legal;
  legal.reserve(devices);
  search_result out;
  out.placement.shards.reserve(t.tables.size());
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    legal.clear();
    for (std::size_t d = 0; d < devices; ++d)
      if (rule.admits(t, st, whole_table(t, i, d))) legal.push_back(d);
    if (legal.empty()) {
      out.placement.shards.clear();
      out.failure = no_device_for(t, st, i, rule);
      return out;
    }
    const shard s = whole_table(t, i, legal[gen.below(legal.size())]);
    st.place(t, s);
    out.placement.shards.push_back(s);
  }
  out.ok = true;
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::search::detail
