#pragma once
// The Constraint contract: may shard `s` go to device `s.device`, given what
// is already placed? Constraints are value types; `describe()` names the rule
// in messages about infeasible tasks.

#include <concepts>
#include <cstdint>
#include <string>

#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

template <class C>
concept constraint = std::copy_constructible<C> &&
    requires(const C& c, const task& t, const placement_state& st, const shard& s) {
  { c.admits(t, st, s) } -> std::convertible_to<bool>;
  { c.describe() } -> std::convertible_to<std::string>;
};

// Optional: admits(t, st, s, bytes), given bytes == shard_bytes(t, s) by a
// caller that already knows them (the grid search asks about one piece on
// many devices and computes its bytes once). It must answer exactly as
// admits(t, st, s) does; a constraint that needs no bytes need not offer it.
template <class C>
concept bytes_aware_constraint = constraint<C> &&
    requires(const C& c, const task& t, const placement_state& st, const shard& s,
             std::uint64_t bytes) {
  { c.admits(t, st, s, bytes) } -> std::convertible_to<bool>;
};

// c.admits(t, st, s), passing the shard's bytes where c takes them.
template <constraint C>
bool admits_with_bytes(const C& c, const task& t, const placement_state& st, const shard& s,
                       std::uint64_t bytes) {
  if constexpr (bytes_aware_constraint<C>) {
    return static_cast<bool>(c.admits(t, st, s, bytes));
  } else {
    return static_cast<bool>(c.admits(t, st, s));
  }
}

}  // namespace embplan::inline EMBPLAN_ABI
