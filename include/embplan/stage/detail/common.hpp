#pragma once
// What the stage's jobs share (stage/staged.hpp): a device's free
// memory, the column blocks of a table cut for min_shards or a grid, which
// tables fit some device whole, and a shard's cost in ms for the stage's
// choices (the searcher's model where it is in ms, else the analytic one).

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
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

namespace detail {

inline std::uint64_t free_bytes(const task& t, const placement_state& st, std::size_t d) noexcept {
  return memory_capacity{}.room(t, st, d);
}

// Column blocks [begin, end) cutting `dim` columns into `count` pieces of
// multiples of 4, as equal as they can be (the first ones one block of 4
// wider). Precondition: 1 <= count <= dim / 4.
inline std::vector<std::pair<std::int32_t, std::int32_t>> column_blocks(std::int32_t dim,
                                                                        std::uint32_t count) {
  const std::int32_t units = dim / 4;
  const auto n = static_cast<std::int32_t>(count);
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  std::int32_t begin = 0;
  for (std::int32_t k = 0; k < n; ++k) {
    const std::int32_t width = 4 * (units / n + (k < units % n ? 1 : 0));
    const std::int32_t end = k + 1 == n ? dim : begin + width;
    out.emplace_back(begin, end);
    begin = end;
  }
  return out;
}

// Per table: whether `rule` admits it whole on some device of an empty
// cluster (a table that fits no device is replicated if it must, or split by
// rows).
template <constraint Constraint>
std::vector<std::uint8_t> fits_whole(const task& t, const Constraint& rule) {
  const std::size_t devices = t.cluster.size();
  const placement_state empty(t);
  std::vector<std::uint8_t> out(t.tables.size(), 0);
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    for (std::size_t d = 0; d < devices && out[i] == 0; ++d)
      out[i] = rule.admits(t, empty, whole_table(t, i, d)) ? 1 : 0;
  return out;
}

// A shard's cost in ms for the stage's choices: the searcher's model where
// its unit is ms, else analytic_cost (a heuristic's score is not time).
template <cost_model CostModel>
double stage_ms(const task& t, const CostModel& model, const shard& s) {
  if constexpr (cost_unit_of<CostModel> == cost_unit::ms) {
    return static_cast<double>(model.shard_cost(t, s));
  } else {
    return analytic_cost{}.shard_cost(t, s);
  }
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::stage
