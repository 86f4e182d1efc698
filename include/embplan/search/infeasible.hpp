#pragma once
// The message a searcher returns when a table fits on no device — for custom
// searchers, so that every planner fails the same readable way.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// Devices listed one by one up to this many; beyond it, only the roomiest.
inline constexpr std::size_t listed_devices = 16;

// The index by which a message names table `table` of `t`: the caller's
// index where `rule` asks its questions about another task than `t` (the
// stage's sub-task rule, stage::detail::in_full_task, whose tables are
// renumbered: full_table_index), else `table`.
template <constraint Constraint>
std::size_t table_index_in_messages(const Constraint& rule, std::size_t table) {
  if constexpr (requires {
                  { rule.full_table_index(table) } -> std::convertible_to<std::size_t>;
                }) {
    return static_cast<std::size_t>(rule.full_table_index(table));
  } else {
    return table;
  }
}

// Why table `table` of `t` fits on no device in state `st` under `rule`:
// which table (name, index, bytes), under which rule (rule.describe()), and how
// much memory is left on each device (or, past listed_devices devices, where
// the most is left). Where the rule explains itself for this table
// (explaining_constraint, e.g. table_rules' pins), its explanation instead. A searcher that gives
// up returns it as search_result::failure, e.g.
//   if (!placed) return {.ok = false, .failure = no_device_for(t, st, i, rule)};
template <constraint Constraint>
std::string no_device_for(const task& t, const placement_state& st, std::size_t table,
                          const Constraint& rule) {
  const auto& spec = t.tables[table];
  const std::string index = std::to_string(table_index_in_messages(rule, table));
  // A rule that explains itself names the binding rule first (user
  // constraints, e.g. "t17: pinned to device 3 but device 3 has 1.2 GiB free,
  // needs 3.1 GiB").
  if (std::string why = explain_of(rule, t, st, table); !why.empty())
    return "table '" + spec.name + "' (index " + index + "): " + why;
  const std::size_t devices = t.cluster.size();
  std::string out = "table '" + spec.name + "' (index " + index + ", " +
                    std::to_string(table_bytes(spec, t.optimizer_state)) +
                    " bytes) fits on no device under " + std::string(rule.describe()) + "; ";
  const auto free_bytes = [&](std::size_t d) {
    const std::uint64_t cap = t.cluster.devices[d].memory_bytes;
    return st.memory_bytes[d] < cap ? cap - st.memory_bytes[d] : std::uint64_t{0};
  };
  if (devices <= listed_devices) {
    out += "free memory per device:";
    for (std::size_t d = 0; d < devices; ++d) {
      out += (d == 0 ? " " : ", ");
      out += std::to_string(d) + ": " + std::to_string(free_bytes(d)) + " bytes";
    }
  } else {
    std::size_t roomiest = 0;
    for (std::size_t d = 1; d < devices; ++d)
      if (free_bytes(d) > free_bytes(roomiest)) roomiest = d;
    out += "largest free memory: " + std::to_string(free_bytes(roomiest)) + " bytes on device " +
           std::to_string(roomiest) + " of " + std::to_string(devices);
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI
