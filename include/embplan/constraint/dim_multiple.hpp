#pragma once
// dim_multiple: every placed piece has a column count that is a multiple of
// `multiple` — 4 by default, because the fused embedding-bag kernels load rows
// as 4-element vectors (FBGEMM TBE), which is why the papers draw dimensions
// from {4, 8, ..., 128} (NeuroShard §4, App. D) and NeuroShard's column-wise
// sharding (§3.3) halves a table only while the halves stay multiples of 4.

#include <cstdint>
#include <string>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct dim_multiple {
  std::int32_t multiple = 4;

  bool admits(const task&, const placement_state&, const shard& s) const {
    if (multiple <= 0) detail::fail("dim_multiple.multiple", multiple, "a positive integer");
    // A power of two (4, the default) by a mask: the searchers ask this once
    // per placement, and a division by a run-time value is ~30 cycles.
    const auto m = static_cast<std::uint32_t>(multiple);
    if ((m & (m - 1)) == 0) return (static_cast<std::uint32_t>(s.cols()) & (m - 1)) == 0;
    return s.cols() % multiple == 0;
  }

  std::string describe() const { return "columns a multiple of " + std::to_string(multiple); }
  bool reads_table_record() const noexcept { return false; }  // the shard alone
};
static_assert(constraint<dim_multiple>);

}  // namespace embplan::inline EMBPLAN_ABI
