#pragma once
// max_device_dim: a device's sum of held columns stays at most max_dim. The
// device dimension drives the all-to-all volume, so bounding it balances
// communication (NeuroShard §2.2 Observation 3; Alg. 2, the max_dim constraint
// of the greedy allocation, which the grid search tunes).

#include <cstdint>
#include <limits>
#include <string>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct max_device_dim {
  std::int64_t max_dim = std::numeric_limits<std::int64_t>::max();  // default: no bound

  bool admits(const task&, const placement_state& st, const shard& s) const {
    return st.dim_sum[s.device] + s.cols() <= max_dim;
  }

  std::string describe() const { return "device dim at most " + std::to_string(max_dim); }
  bool reads_table_record() const noexcept { return false; }  // dim_sum only
};
static_assert(constraint<max_device_dim>);

}  // namespace embplan::inline EMBPLAN_ABI
