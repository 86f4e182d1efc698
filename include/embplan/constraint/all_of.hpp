#pragma once
// all_of<Cs...>: the conjunction of constraints — a shard is admitted when
// every part admits it (in order, stopping at the first refusal).
//   all_of rule{memory_capacity{}, dim_multiple{.multiple = 4}};  // CTAD
// default_constraint is what the papers' settings impose: memory capacity and
// column counts that are multiples of 4.

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "embplan/concepts/constraint.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/memory.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"

namespace embplan {

template <constraint... Cs>
class all_of {
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

  // "memory capacity and columns a multiple of 4"; "no constraint" when empty.
  std::string describe() const {
    if constexpr (sizeof...(Cs) == 0) {
      return "no constraint";
    } else {
      std::string out;
      std::apply(
          [&](const auto&... c) {
            ((out += (out.empty() ? "" : " and "), out += std::string(c.describe())), ...);
          },
          parts_);
      return out;
    }
  }

  const std::tuple<Cs...>& parts() const noexcept { return parts_; }

 private:
  std::tuple<Cs...> parts_{};
};

template <class... Cs>
all_of(Cs...) -> all_of<Cs...>;

using default_constraint = all_of<memory_capacity, dim_multiple>;
static_assert(bytes_aware_constraint<default_constraint>);
static_assert(constraint<all_of<>>);

}  // namespace embplan
