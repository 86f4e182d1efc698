#pragma once
// Host DRAM capacity (device_spec::dram_bytes; memory tiers): the tables in
// uvm_caching and host keep their weights and optimizer state in host DRAM
// (shard_dram_bytes, core/plan.hpp). A capacity of 0 is "not
// limited"; these helpers say so once for validation, the memory constraint,
// choose_tiers and the report.

#include <cstdint>
#include <optional>

#include "embplan/core/checked.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// used + need fit in capacity (0: always), written so that it cannot wrap.
constexpr bool dram_fits(std::uint64_t capacity, std::uint64_t used, std::uint64_t need) noexcept {
  return capacity == 0 || (used <= capacity && need <= capacity - used);
}

// capacity - used; 0 where used exceeds it. Meaningless where capacity is 0.
constexpr std::uint64_t dram_free_bytes(std::uint64_t capacity, std::uint64_t used) noexcept {
  return used < capacity ? capacity - used : 0;
}

// The cluster's host DRAM: the sum of the devices' dram_bytes, or none (not
// limited) where a device has no limit.
inline std::optional<std::uint64_t> cluster_dram_bytes(const topology& t) {
  std::uint64_t sum = 0;
  for (const auto& d : t.devices) {
    if (d.dram_bytes == 0) return std::nullopt;
    sum = checked_add(sum, d.dram_bytes, "cluster host DRAM");
  }
  return sum;
}

}  // namespace embplan::inline EMBPLAN_ABI
