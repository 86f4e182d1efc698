#pragma once
// memory_capacity: a shard may go to a device only while the device's memory
// holds it (AutoShard §2.2, the memory constraint of the sharding task; 4 GB per
// GPU in NeuroShard Table 5). Bytes follow shard_bytes: weights of the block
// plus the task's optimizer state.

#include <cstdint>
#include <string>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct memory_capacity {
  bool admits(const task& t, const placement_state& st, const shard& s) const {
    return admits(t, st, s, shard_bytes(t, s));
  }

  // bytes: shard_bytes(t, s), computed by the caller (bytes_aware_constraint).
  bool admits(const task& t, const placement_state& st, const shard& s, std::uint64_t bytes) const {
    const std::uint64_t capacity = t.cluster.devices[s.device].memory_bytes;
    const std::uint64_t used = st.memory_bytes[s.device];
    // used + need <= capacity, written so that it cannot wrap.
    return used <= capacity && bytes <= capacity - used;
  }

  std::string describe() const { return "memory capacity"; }
};
static_assert(bytes_aware_constraint<memory_capacity>);

}  // namespace embplan::inline EMBPLAN_ABI
