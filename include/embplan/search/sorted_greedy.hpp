#pragma once
// sorted_greedy: the papers' heuristic baseline (NeuroShard App. E.1, AutoShard
// §5.1 "Heuristic Algorithms"; Acun et al. 2021, Lui et al. 2021). Tables are
// sorted by descending cost and, starting from the costliest, each goes whole
// to the admitted device with the lowest running sum of costs, so that every
// device ends with roughly the same sum. With a heuristic cost model this is
// size-, dim-, lookup- or size-lookup-greedy.
//
// Order and ties follow NeuroShard's sharders.py exactly: the tables are
// sorted ascending by (shard_cost, weight bytes, index) and popped from the end, i.e.
// descending by the whole tuple (among equal costs and sizes the higher index
// goes first). A table goes to the admitted device with the lowest running
// load; equal loads go to the device with less memory taken, then to the lower
// index. The cost of a table is its shard_cost on device 0 for the order and
// on the chosen device for the load (the same number on a uniform cluster).
//
// A constructive baseline: it never compares complete plans, so the Reward
// does not change its plan (uses_reward = false).
//
// Complexity: O(T log T + T log D) when the first device tried is admitted; a
// min-heap keyed by (load, memory, index) yields devices in exactly the order
// of a linear scan, and refused devices are pushed back unchanged.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace search::detail {

struct table_key {
  double cost = 0.0;
  std::uint64_t bytes = 0;
  std::size_t index = 0;

  friend bool operator<(const table_key& a, const table_key& b) noexcept {
    return std::tie(a.cost, a.bytes, a.index) < std::tie(b.cost, b.bytes, b.index);
  }
};

struct device_key {
  double load = 0.0;
  std::uint64_t memory_bytes = 0;
  std::size_t index = 0;

  // Reversed, so that std::priority_queue (a max-heap) yields the smallest key.
  friend bool operator<(const device_key& a, const device_key& b) noexcept {
    return std::tie(b.load, b.memory_bytes, b.index) < std::tie(a.load, a.memory_bytes, a.index);
  }
};

// A NaN would break the sort's ordering; a cost model that yields one is named.
template <cost_model CostModel>
double finite_cost(const task& t, const CostModel& model, const shard& s) {
  const auto cost = static_cast<double>(model.shard_cost(t, s));
  if (!std::isfinite(cost)) {
    embplan::detail::fail(embplan::detail::path(embplan::detail::path("tables", s.table),
                                                std::string(model.name()) + " shard_cost"),
                          cost, "a finite cost");
  }
  return cost;
}

}  // namespace search::detail

struct sorted_greedy {
  static constexpr bool uses_reward = false;  // constructive: no plans compared

  std::string_view name() const noexcept { return "sorted_greedy"; }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule, const Reward&,
                       std::uint64_t) const {
    using search::detail::device_key;
    using search::detail::table_key;
    const std::size_t tables = t.tables.size();
    const std::size_t devices = t.cluster.size();
    search_result out;

    std::vector<table_key> order(tables);
    for (std::size_t i = 0; i < tables; ++i) {
      order[i] = table_key{.cost = search::detail::finite_cost(t, model, whole_table(t, i, 0)),
                           .bytes = table_bytes(t.tables[i]),
                           .index = i};
    }
    out.evaluations = tables;
    std::sort(order.begin(), order.end());

    std::vector<device_key> heap_storage;
    heap_storage.reserve(devices);
    for (std::size_t d = 0; d < devices; ++d)
      heap_storage.push_back(device_key{.load = 0.0, .memory_bytes = 0, .index = d});
    std::priority_queue<device_key> heap(std::less<device_key>{}, std::move(heap_storage));

    placement_state st(t);
    std::vector<std::size_t> assignment(tables);
    std::vector<device_key> refused;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const std::size_t i = it->index;
      refused.clear();
      bool placed = false;
      while (!heap.empty()) {
        device_key top = heap.top();
        heap.pop();
        const shard s = whole_table(t, i, top.index);
        if (!rule.admits(t, st, s)) {
          refused.push_back(top);
          continue;
        }
        st.place(t, s);
        if (top.index == 0) {  // the cost on device 0 is already known
          top.load += it->cost;
        } else {
          top.load += search::detail::finite_cost(t, model, s);
          ++out.evaluations;
        }
        top.memory_bytes = st.memory_bytes[top.index];
        heap.push(top);
        assignment[i] = top.index;
        placed = true;
        break;
      }
      for (const auto& k : refused)
        heap.push(k);
      if (!placed) {
        out.failure = no_device_for(t, st, i, rule);
        return out;
      }
    }
    out.placement = table_wise_plan(t, assignment);
    out.ok = true;
    return out;
  }
};
static_assert(searcher<sorted_greedy>);

}  // namespace embplan::inline EMBPLAN_ABI
