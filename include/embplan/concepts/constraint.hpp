#pragma once
// The Constraint contract: may shard `s` go to device `s.device`, given what
// is already placed? Constraints are value types; `describe()` names the rule
// in messages about infeasible tasks.

#include <concepts>
#include <cstddef>
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

// Optional: explain(t, st, table) -> std::string, why this rule leaves table
// `table` no device in state `st` ("pinned to device 3, but device 3 has ...
// bytes free and the table needs ... bytes"), or "" when it does not bind
// there. no_device_for puts it first in an infeasible task's message,
// so that an infeasible task names the binding rule and the table.
template <class C>
concept explaining_constraint = constraint<C> &&
    requires(const C& c, const task& t, const placement_state& st, std::size_t table) {
  { c.explain(t, st, table) } -> std::convertible_to<std::string>;
};

// Optional: reads_table_record() — whether admits() or explain() read
// placement_state's per-table record (placement_state::tables; user
// co-location, anti-affinity and max-shard rules do). Keeping the record costs
// a searcher an update per placement and bigger state copies, so one that
// keeps the state itself may stop it (placement_state::keep_table_record)
// where the constraint promises not to read it. Without the member: true, the
// safe answer — a rule that reads the record without saying so still sees it
// in every searcher. A false promise breaks that rule silently; the planner's
// final check (replay_constraint) keeps the record whatever the promise.
template <constraint C>
bool reads_table_record(const C& c) noexcept {
  if constexpr (requires {
                  { c.reads_table_record() } -> std::convertible_to<bool>;
                }) {
    return static_cast<bool>(c.reads_table_record());
  } else {
    return true;
  }
}

// Optional: min_shards(table) — the least number of pieces a plan must place
// table `table` as (user rules: table_rules::min_shards). No single piece
// breaks it, so admits() cannot say; a searcher's stage cuts the table into
// that many column blocks first (stage::staged) and check_plan
// counts. Without the member: 0, no minimum.
template <constraint C>
std::uint32_t min_shards_of(const C& c, std::size_t table) noexcept {
  if constexpr (requires {
                  { c.min_shards(table) } -> std::convertible_to<std::uint32_t>;
                }) {
    return static_cast<std::uint32_t>(c.min_shards(table));
  } else {
    return 0;
  }
}

// Optional: room(t, st, device) -> std::uint64_t, at least the bytes of the
// largest shard the rule could admit on `device` in state `st`: admits()
// refuses every shard there whose shard_bytes exceed it (an upper bound is
// enough; the memory capacity's is the device's free memory). It may read
// only what `st` holds on `device` (it changes when a shard is placed on or
// removed from that device, not otherwise), so that a searcher may keep it
// per device and pass the device over for larger pieces without asking (the
// grid search, search/detail/grid_engine.hpp). Without the member: no limit.
template <class C>
concept room_bounding_constraint = constraint<C> &&
    requires(const C& c, const task& t, const placement_state& st, std::size_t device) {
  { c.room(t, st, device) } -> std::convertible_to<std::uint64_t>;
};

inline constexpr std::uint64_t unlimited_room = ~std::uint64_t{0};

// c.room(t, st, device) where c offers it, else unlimited_room.
template <constraint C>
std::uint64_t room_of(const C& c, const task& t, const placement_state& st,
                      std::size_t device) noexcept {
  if constexpr (room_bounding_constraint<C>) {
    return static_cast<std::uint64_t>(c.room(t, st, device));
  } else {
    return unlimited_room;
  }
}

// c.explain(t, st, table) where c offers it, else "".
template <constraint C>
std::string explain_of(const C& c, const task& t, const placement_state& st, std::size_t table) {
  if constexpr (explaining_constraint<C>) {
    return std::string(c.explain(t, st, table));
  } else {
    return {};
  }
}

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
