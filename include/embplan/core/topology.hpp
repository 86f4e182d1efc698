#pragma once
// Devices and the links between them. Devices may differ in memory and
// bandwidth; hosts group devices_per_host consecutive devices, all hosts full
// or the devices in one host (validate).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

inline constexpr std::uint64_t gib = std::uint64_t{1} << 30;

// Defaults describe the NVIDIA RTX 2080 Ti servers the papers measured on
// (NeuroShard §4, AutoShard §5.1): 616 GB/s GDDR6 and a 5.5 MB L2 (NVIDIA
// Turing TU102 whitepaper), 4 GiB for embeddings per GPU (NeuroShard Table 5).
// The L2 bandwidth is an estimate (~3x DRAM, as microbenchmarks of Turing
// report); it only prices re-reads of rows hot enough to stay in L2.
struct device_spec {
  std::string name{};
  std::uint64_t memory_bytes = 4 * gib;
  double memory_bandwidth_gbps = 616.0;   // GB/s of device memory
  double cache_bandwidth_gbps = 2000.0;   // GB/s when a row is re-read from L2
  std::uint64_t cache_bytes = 5'767'168;  // last-level cache (5.5 MiB)
  // Host DRAM for this rank's tables off HBM (uvm_caching and host keep their
  // weights and optimizer state there; TorchRec's Topology calls it ddr_cap
  // per rank). 0: not limited, so a task written before it plans, reads,
  // writes and hashes as it did.
  std::uint64_t dram_bytes = 0;

  friend bool operator==(const device_spec&, const device_spec&) = default;
};

// Links: PCIe 3.0 x16 between GPUs of one host (15.75 GB/s theoretical, ~12
// GB/s achieved by all-to-all; the 2080 Ti has no NVLink in 8-GPU servers) and
// a 100 Gb/s NIC between hosts (12.5 GB/s).
struct topology {
  std::vector<device_spec> devices{};
  std::int32_t devices_per_host = 8;
  double intra_host_bandwidth_gbps = 12.0;
  double inter_host_bandwidth_gbps = 12.5;
  double collective_latency_ms = 0.05;  // fixed start-up cost of one all-to-all

  std::size_t size() const noexcept { return devices.size(); }

  std::size_t host_of(std::size_t device) const noexcept {
    return device / static_cast<std::size_t>(devices_per_host);
  }

  friend bool operator==(const topology&, const topology&) = default;
};

// Whether `t` has more than one host (devices_per_host < size()).
inline bool spans_hosts(const topology& t) noexcept {
  return t.size() > static_cast<std::size_t>(std::max<std::int32_t>(t.devices_per_host, 1));
}

// Hosts of up to 8 devices that validate() accepts for `count` devices: 8
// (the default) where count <= 8 or a multiple of 8, else the largest divisor
// of count below 8 (12 devices: hosts of 6; a prime count: hosts of 1).
inline std::int32_t servers_of_8(std::size_t count) noexcept {
  if (count <= 8 || count % 8 == 0) return 8;
  std::int32_t per = 7;
  while (count % static_cast<std::size_t>(per) != 0)
    --per;
  return per;
}

// `count` identical devices; devices_per_host 0: servers_of_8(count).
inline topology uniform_topology(std::size_t count, device_spec device = {},
                                 std::int32_t devices_per_host = 0) {
  topology t;
  t.devices.assign(count, device);
  for (std::size_t i = 0; i < count; ++i)
    t.devices[i].name = "cuda:" + std::to_string(i);
  t.devices_per_host = devices_per_host == 0 ? servers_of_8(count) : devices_per_host;
  return t;
}

inline void validate(const topology& t, std::string_view where = "topology") {
  const auto devices = detail::path(where, "devices");
  if (t.devices.empty()) detail::fail(devices, 0, "at least one device");
  for (std::size_t i = 0; i < t.devices.size(); ++i) {
    const auto& d = t.devices[i];
    const auto at = detail::path(devices, i);
    if (d.memory_bytes == 0) detail::fail(detail::path(at, "memory_bytes"), 0, "a positive size");
    if (!std::isfinite(d.memory_bandwidth_gbps) || d.memory_bandwidth_gbps <= 0.0) {
      detail::fail(detail::path(at, "memory_bandwidth_gbps"), d.memory_bandwidth_gbps,
                   "a positive bandwidth");
    }
    if (!std::isfinite(d.cache_bandwidth_gbps) || d.cache_bandwidth_gbps <= 0.0) {
      detail::fail(detail::path(at, "cache_bandwidth_gbps"), d.cache_bandwidth_gbps,
                   "a positive bandwidth");
    }
  }
  const auto per_host = detail::path(where, "devices_per_host");
  if (t.devices_per_host <= 0) detail::fail(per_host, t.devices_per_host, "a positive integer");
  // Hosts are devices_per_host consecutive devices: one host may be partly
  // filled (4 devices of an 8-GPU server), several must all be full.
  const auto per = static_cast<std::size_t>(t.devices_per_host);
  if (t.devices.size() > per && t.devices.size() % per != 0) {
    detail::fail(per_host, t.devices_per_host,
                 "a divisor of the " + std::to_string(t.devices.size()) +
                     " devices (hosts of equal size), or at least their number (one host)");
  }
  if (!std::isfinite(t.intra_host_bandwidth_gbps) || t.intra_host_bandwidth_gbps <= 0.0) {
    detail::fail(detail::path(where, "intra_host_bandwidth_gbps"), t.intra_host_bandwidth_gbps,
                 "a positive bandwidth");
  }
  if (!std::isfinite(t.inter_host_bandwidth_gbps) || t.inter_host_bandwidth_gbps <= 0.0) {
    detail::fail(detail::path(where, "inter_host_bandwidth_gbps"), t.inter_host_bandwidth_gbps,
                 "a positive bandwidth");
  }
  if (!std::isfinite(t.collective_latency_ms) || t.collective_latency_ms < 0.0) {
    detail::fail(detail::path(where, "collective_latency_ms"), t.collective_latency_ms,
                 "a latency >= 0");
  }
}

}  // namespace embplan::inline EMBPLAN_ABI
