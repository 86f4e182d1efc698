#pragma once
// Cost records, all in milliseconds (docs/pricing.md): a plan costs the max
// over devices of forward + backward compute + forward + backward
// communication; its degree of balance is min / max compute (AutoShard §5.1).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct compute_cost {
  double fwd_ms = 0.0;
  double bwd_ms = 0.0;
  double total_ms() const noexcept { return fwd_ms + bwd_ms; }
};

struct comm_cost {
  double fwd_ms = 0.0;
  double bwd_ms = 0.0;
};

struct device_cost {
  double fwd_compute_ms = 0.0;
  double bwd_compute_ms = 0.0;
  double fwd_comm_ms = 0.0;
  double bwd_comm_ms = 0.0;

  double total_ms() const noexcept {
    return fwd_compute_ms + bwd_compute_ms + fwd_comm_ms + bwd_comm_ms;
  }

  friend bool operator==(const device_cost&, const device_cost&) = default;
};

struct plan_cost {
  std::vector<device_cost> devices{};
  std::vector<std::uint64_t> memory_bytes{};
  std::vector<std::int64_t> dim_sum{};

  double max_ms() const noexcept {
    double m = 0.0;
    for (const auto& d : devices)
      m = std::max(m, d.total_ms());
    return m;
  }
  double min_ms() const noexcept {
    if (devices.empty()) return 0.0;
    double m = devices.front().total_ms();
    for (const auto& d : devices)
      m = std::min(m, d.total_ms());
    return m;
  }
  // AutoShard's degree of balance (§5.1 "Metrics"): the minimum over the
  // maximum shard latency, where a shard's latency is its kernel time, the
  // forward + backward compute. (Not the totals: under evaluate() the forward
  // all-to-all makes every device wait for the last one, so totals come out
  // nearly equal whatever the placement.) 1.0 for a plan with no compute.
  double balance() const noexcept {
    if (devices.empty()) return 1.0;
    double lo = devices.front().fwd_compute_ms + devices.front().bwd_compute_ms;
    double hi = lo;
    for (const auto& d : devices) {
      const double c = d.fwd_compute_ms + d.bwd_compute_ms;
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    return hi > 0.0 ? lo / hi : 1.0;
  }
};

}  // namespace embplan::inline EMBPLAN_ABI
