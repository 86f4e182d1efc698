#pragma once
// all_of<Cs...>: the conjunction of constraints — a shard is admitted when
// every part admits it (in order, stopping at the first refusal).
//   all_of rule{memory_capacity{}, dim_multiple{.multiple = 4}};  // CTAD
// default_constraint is what the papers' settings impose: memory capacity and
// column counts that are multiples of 4.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "embplan/concepts/constraint.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace detail {

// all_of's parts are checked one requirement at a time, so that a part that is
// no constraint fails with its position and type (the instantiation of
// all_of_part<Position, Part> in the diagnostic) and the requirement it misses.
template <std::size_t Position, class Part>
struct all_of_part {
  static_assert(std::copy_constructible<Part>,
                "embplan::all_of: part is not copy-constructible (constraints are value types)");
  static_assert(
      requires(const Part& c, const task& t, const placement_state& st, const shard& s) {
        { c.admits(t, st, s) } -> std::convertible_to<bool>;
      },
      "embplan::all_of: part has no const member admits(const task&, const placement_state&, "
      "const shard&) returning bool");
  static_assert(
      requires(const Part& c) {
        { c.describe() } -> std::convertible_to<std::string>;
      },
      "embplan::all_of: part has no const member describe() returning std::string");
  static constexpr bool ok = constraint<Part>;
};

template <class... Cs, std::size_t... Position>
consteval bool all_parts_are_constraints(std::index_sequence<Position...>) {
  return (all_of_part<Position, Cs>::ok && ...);
}

}  // namespace detail

template <class... Cs>
class all_of {
  static_assert(detail::all_parts_are_constraints<Cs...>(std::index_sequence_for<Cs...>{}),
                "embplan::all_of: every part must model embplan::constraint (see above for which "
                "part misses which member)");

 public:
  all_of() = default;
  explicit(false) all_of(Cs... parts) requires(sizeof...(Cs) > 0) : parts_(std::move(parts)...) {}

  bool admits(const task& t, const placement_state& st, const shard& s) const {
    return std::apply(
        [&](const auto&... c) { return (static_cast<bool>(c.admits(t, st, s)) && ...); }, parts_);
  }

  // With the shard's bytes known (bytes_aware_constraint): passed to the
  // parts that take them.
  bool admits(const task& t, const placement_state& st, const shard& s, std::uint64_t bytes) const {
    return std::apply(
        [&](const auto&... c) { return (admits_with_bytes(c, t, st, s, bytes) && ...); }, parts_);
  }

  // The least room any part leaves (room_bounding_constraint; unlimited_room
  // where no part bounds it).
  std::uint64_t room(const task& t, const placement_state& st, std::size_t device) const noexcept {
    return std::apply(
        [&](const auto&... c) {
          std::uint64_t least = unlimited_room;
          ((least = std::min(least, room_of(c, t, st, device))), ...);
          return least;
        },
        parts_);
  }

  // "memory capacity and columns a multiple of 4"; a part that describes
  // itself as "" (an empty table_rules) is left out; "no constraint" when
  // nothing is left.
  std::string describe() const {
    std::string out;
    std::apply(
        [&](const auto&... c) {
          (
              [&] {
                const std::string part(c.describe());
                if (part.empty()) return;
                out += (out.empty() ? "" : " and ") + part;
              }(),
              ...);
        },
        parts_);
    return out.empty() ? "no constraint" : out;
  }

  // Whether any part reads the per-table record (reads_table_record).
  bool reads_table_record() const noexcept {
    return std::apply([](const auto&... c) { return (embplan::reads_table_record(c) || ...); },
                      parts_);
  }

  // The first part's explain (explaining_constraint) that is not "".
  std::string explain(const task& t, const placement_state& st, std::size_t table) const {
    std::string out;
    std::apply(
        [&](const auto&... c) {
          ((out.empty() ? (void)(out = explain_of(c, t, st, table)) : (void)0), ...);
        },
        parts_);
    return out;
  }

  // The first part's explain_split (table_rules::explain_split) that is not "".
  std::string explain_split(const task& t, std::size_t table, std::size_t devices_needed) const {
    std::string out;
    std::apply(
        [&](const auto&... c) {
          (
              [&] {
                if constexpr (requires { c.explain_split(t, table, devices_needed); }) {
                  if (out.empty()) out = std::string(c.explain_split(t, table, devices_needed));
                }
              }(),
              ...);
        },
        parts_);
    return out;
  }

  // The largest min_shards(table) of the parts that have one (min_shards_of).
  std::uint32_t min_shards(std::size_t table) const noexcept {
    return std::apply(
        [&](const auto&... c) {
          return std::max({std::uint32_t{0}, min_shards_of(c, table)...});
        },
        parts_);
  }

  const std::tuple<Cs...>& parts() const noexcept { return parts_; }

 private:
  std::tuple<Cs...> parts_{};
};

template <class... Cs>
all_of(Cs...) -> all_of<Cs...>;

// The papers' constraint (memory capacity, columns a multiple of 4)...
using paper_constraint = all_of<memory_capacity, dim_multiple>;
// ... and what every preset plans under: the same, with the user's per-table
// rules. A default-constructed one carries empty table_rules, which
// admit everything after one pointer test: the papers' planners are unchanged.
//   default_constraint rule{memory_capacity{}, dim_multiple{}, table_rules(t, c)};
using default_constraint = all_of<memory_capacity, dim_multiple, table_rules>;
static_assert(bytes_aware_constraint<default_constraint>);
static_assert(explaining_constraint<default_constraint>);
static_assert(room_bounding_constraint<default_constraint>);
static_assert(constraint<all_of<>>);

}  // namespace embplan::inline EMBPLAN_ABI
