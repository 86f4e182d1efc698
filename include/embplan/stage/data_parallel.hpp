#pragma once
// Data-parallel copies: which small tables the stage replicates, one whole
// copy on every device (shard::data_parallel; their gradients' all-reduce is
// priced by cost/collectives.hpp), chosen where a copy's compute and
// all-reduce cost less than the all-to-all its columns would add, within
// data_parallel_options::memory_fraction of the smallest device.
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
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/collectives.hpp"
#include "embplan/stage/detail/common.hpp"
#include "embplan/stage/settings.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

// The copy of table `ti` on `device` that a data-parallel table holds there.
inline shard data_parallel_copy(const task& t, std::size_t ti, std::size_t device) {
  shard s = whole_table(t, ti, device);
  s.data_parallel = true;
  return s;
}

namespace detail {

// Places the copies of table `ti` on every device of `st` if `rule` admits
// each in turn; false (st unchanged) otherwise.
template <constraint Constraint>
bool place_copies(const task& t, placement_state& st, std::size_t ti, const Constraint& rule,
                  std::vector<shard>& out) {
  placement_state trial = st;
  const std::size_t first = out.size();
  for (std::size_t d = 0; d < t.cluster.size(); ++d) {
    const shard s = data_parallel_copy(t, ti, d);
    if (!rule.admits(t, trial, s)) {
      out.resize(first);
      return false;
    }
    trial.place(t, s);
    out.push_back(s);
  }
  st = std::move(trial);
  return true;
}

// The tables to replicate (docs/design/stage.md), their copies placed in
// `st` and appended to `copies`; `placed[i]` set for each. fits[i]:
// fits_whole's answer for table i.
template <cost_model CostModel, constraint Constraint>
void choose_data_parallel(const task& t, const CostModel& model, const Constraint& rule,
                          const data_parallel_options& o, std::span<const std::uint8_t> fits,
                          placement_state& st, std::vector<shard>& copies,
                          std::vector<std::uint8_t>& placed) {
  const std::size_t devices = t.cluster.size();
  const auto price = [&](const shard& s) { return stage_ms(t, model, s); };
  const double column_ms = all_to_all_column_ms(t.cluster, t.batch_size);
  const double latency = t.cluster.collective_latency_ms;
  const auto d_count = static_cast<double>(devices);
  // What the plan would cost with set S replicated (docs/design/stage.md):
  // the inner searcher's tables at their lower bound, the copies on every
  // device, the columns left in the all-to-all and one all-reduce.
  std::vector<double> whole(t.tables.size(), 0.0);
  std::vector<std::size_t> by_whole;  // the tables the inner searcher places, costliest first
  double sum_whole = 0.0;
  std::int64_t sum_dim = 0;
  double copies_ms = 0.0;
  std::uint64_t gradient_bytes = 0;
  struct candidate {
    std::size_t table;
    double saving;  // ms per device, balanced
    std::uint64_t bytes;
    double copy_ms;
  };
  std::vector<candidate> by_cost;
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    const auto& spec = t.tables[i];
    const bool in_hbm = spec.placement.tier == memory_tier::hbm;
    if (fits[i] == 0) {  // forced: copies or nothing (then the row split or the inner searcher)
      if (in_hbm && place_copies(t, st, i, rule, copies)) {
        placed[i] = 1;
        copies_ms += price(data_parallel_copy(t, i, 0));
        gradient_bytes += data_parallel_gradient_bytes(spec);
      }
      continue;
    }
    whole[i] = price(whole_table(t, i, 0));
    by_whole.push_back(i);
    sum_whole += whole[i];
    sum_dim += spec.dim;
    if (!in_hbm) continue;
    const double copy = price(data_parallel_copy(t, i, 0));
    const double saving = whole[i] / d_count + static_cast<double>(spec.dim) * column_ms - copy -
                          (all_reduce_ms(t.cluster, data_parallel_gradient_bytes(spec)) - latency);
    if (saving > 0.0) by_cost.push_back({i, saving, table_bytes(spec, t.optimizer_state), copy});
  }
  std::stable_sort(by_whole.begin(), by_whole.end(),
                   [&](std::size_t a, std::size_t b) { return whole[a] > whole[b]; });
  std::stable_sort(by_cost.begin(), by_cost.end(), [](const candidate& a, const candidate& b) {
    // saving / bytes, descending, without dividing (bytes > 0)
    return a.saving * static_cast<double>(b.bytes) > b.saving * static_cast<double>(a.bytes);
  });
  std::vector<std::uint8_t> taken(t.tables.size(), 0);
  std::size_t top = 0;  // by_whole[top]: the costliest table not taken
  const auto plan_ms = [&](double whole_ms, std::int64_t dims, double copy_ms, std::uint64_t bytes,
                           std::size_t without) {
    std::size_t k = top;
    while (k < by_whole.size() && (taken[by_whole[k]] != 0 || by_whole[k] == without))
      ++k;
    const double largest = k < by_whole.size() ? whole[by_whole[k]] : 0.0;
    return std::max(largest, whole_ms / d_count) + copy_ms + static_cast<double>(dims) * column_ms +
           all_reduce_ms(t.cluster, bytes);
  };
  std::uint64_t smallest = t.cluster.devices.front().memory_bytes;
  for (const auto& d : t.cluster.devices)
    smallest = std::min(smallest, d.memory_bytes);
  const auto budget = static_cast<std::uint64_t>(o.memory_fraction * static_cast<double>(smallest));
  std::uint64_t used = 0;
  for (const auto& c : by_cost) {
    if (c.bytes > budget - used) continue;
    const auto& spec = t.tables[c.table];
    const std::uint64_t grad = data_parallel_gradient_bytes(spec);
    const double now = plan_ms(sum_whole, sum_dim, copies_ms, gradient_bytes, t.tables.size());
    const double then = plan_ms(sum_whole - whole[c.table], sum_dim - spec.dim,
                                copies_ms + c.copy_ms, gradient_bytes + grad, c.table);
    if (!(then < now)) continue;
    if (!place_copies(t, st, c.table, rule, copies)) continue;
    used += c.bytes;
    taken[c.table] = 1;
    placed[c.table] = 1;
    sum_whole -= whole[c.table];
    sum_dim -= spec.dim;
    copies_ms += c.copy_ms;
    gradient_bytes += grad;
    while (top < by_whole.size() && taken[by_whole[top]] != 0)
      ++top;
  }
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::stage
