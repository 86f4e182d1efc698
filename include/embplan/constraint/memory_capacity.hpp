#pragma once
// memory_capacity: a shard may go to a device only while the device's memory
// holds it (AutoShard §2.2, the memory constraint of the sharding task; 4 GB per
// GPU in NeuroShard Table 5). Bytes follow shard_bytes: weights of the block
// plus the task's optimizer state. A shard of a table off hbm (uvm_caching,
// host) must also fit the host DRAM of its device where that is limited
// (device_spec::dram_bytes, shard_dram_bytes); hbm tables never look at it.

#include <cstddef>
#include <cstdint>
#include <string>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/host_dram.hpp"
#include "embplan/core/memory_tier.hpp"
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
    if (used > capacity || bytes > capacity - used) return false;
    if (t.tables[s.table].placement.tier == memory_tier::hbm) [[likely]]
      return true;
    return dram_fits(t.cluster.devices[s.device].dram_bytes, dram_used(st, s.device),
                     shard_dram_bytes(t, s));
  }

  // The device's free memory (room_bounding_constraint): no shard of more
  // bytes fits. Host DRAM, for tables off hbm, may refuse smaller ones too.
  std::uint64_t room(const task& t, const placement_state& st, std::size_t device) const noexcept {
    const std::uint64_t capacity = t.cluster.devices[device].memory_bytes;
    const std::uint64_t used = st.memory_bytes[device];
    return used > capacity ? 0 : capacity - used;
  }

  std::string describe() const { return "memory capacity"; }
  // Reads the per-device sums only, never placement_state::tables.
  bool reads_table_record() const noexcept { return false; }

  // Why table `table` fits on no device where host DRAM is what binds: a
  // table off hbm whose weights and optimizer state no device's host DRAM can
  // take ("its tier uvm_caching keeps it in host DRAM, but device 3 (the
  // roomiest) has 536870912 bytes of host DRAM free, needs 1288490188 bytes";
  // the CLI shows bytes as GiB). "" otherwise: no_device_for then lists
  // each device's free HBM.
  std::string explain(const task& t, const placement_state& st, std::size_t table) const {
    const auto tier = t.tables[table].placement.tier;
    if (tier == memory_tier::hbm) return {};
    const std::uint64_t need = shard_dram_bytes(t, whole_table(t, table, 0));
    std::size_t roomiest = 0;
    std::uint64_t most_free = 0;
    for (std::size_t d = 0; d < t.cluster.size(); ++d) {
      const std::uint64_t capacity = t.cluster.devices[d].dram_bytes;
      if (dram_fits(capacity, dram_used(st, d), need)) return {};
      const std::uint64_t free = dram_free_bytes(capacity, dram_used(st, d));
      if (d == 0 || free > most_free) {
        roomiest = d;
        most_free = free;
      }
    }
    return "its tier " + std::string(to_string(tier)) + " keeps it in host DRAM, but device " +
           std::to_string(roomiest) + (t.cluster.size() > 1 ? " (the roomiest)" : "") + " has " +
           std::to_string(most_free) + " bytes of host DRAM free, needs " + std::to_string(need) +
           " bytes";
  }

 private:
  // A searcher that keeps its own sums may leave dram_bytes unsized: nothing
  // counted there.
  static std::uint64_t dram_used(const placement_state& st, std::size_t d) noexcept {
    return d < st.dram_bytes.size() ? st.dram_bytes[d] : 0;
  }
};
static_assert(bytes_aware_constraint<memory_capacity>);
static_assert(explaining_constraint<memory_capacity>);
static_assert(room_bounding_constraint<memory_capacity>);

}  // namespace embplan::inline EMBPLAN_ABI
