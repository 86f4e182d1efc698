#pragma once
// Collectives a plan's sharding types add beyond the pooled all-to-all that
// CostModel::communication prices (issue 24, sharding types): the gradient
// all-reduce of data-parallel tables. Priced from the topology alone, whatever
// the cost model: no learned model has been trained on it, and its volume is
// the tables' bytes, not their pooled columns.
//
// all_reduce_ms(topology, bytes): the hierarchical (two-level) ring that NCCL
// runs across hosts, every device holding `bytes`. With h devices per host and
// H hosts (h = min(devices_per_host, D), H = ceil(D / h)):
//   one host:  2 (h - 1) / h x bytes over the intra-host link (a ring
//              all-reduce: a reduce-scatter and an all-gather);
//   H hosts:   a reduce-scatter inside each host, (h - 1) / h x bytes intra,
//              a ring all-reduce of each device's 1/h slice across hosts,
//              2 (H - 1) / H x bytes / h inter, an all-gather inside the host,
//              (h - 1) / h x bytes intra;
// plus one collective_latency_ms, the fixed start-up the all-to-all pays too.
// Every device finishes it at the same time, so it adds the same time to each.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// Milliseconds of an all-reduce of `bytes` on every device of `topo` (see the
// header comment); 0 for no bytes or a single device.
inline double all_reduce_ms(const topology& topo, std::uint64_t bytes) noexcept {
  const std::size_t n = topo.size();
  if (bytes == 0 || n <= 1) return 0.0;
  const std::size_t per_host =
      std::min(n, static_cast<std::size_t>(std::max<std::int32_t>(topo.devices_per_host, 1)));
  const std::size_t hosts = (n + per_host - 1) / per_host;
  const double b = static_cast<double>(bytes);
  const double h = static_cast<double>(per_host);
  const double intra_bpms = topo.intra_host_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
  const double inter_bpms = topo.inter_host_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
  if (hosts == 1) return topo.collective_latency_ms + 2.0 * (h - 1.0) / h * b / intra_bpms;
  const double big_h = static_cast<double>(hosts);
  return topo.collective_latency_ms + 2.0 * (h - 1.0) / h * b / intra_bpms +
         2.0 * (big_h - 1.0) / big_h * (b / h) / inter_bpms;
}

// What one more pooled column held by some device adds to each device's
// all-to-all, forward and backward, once the columns are balanced: every other
// device receives its share of the batch, (batch / D) x 4 bytes, over the link
// class most peers sit behind (inter-host when there are several hosts). The
// data-parallel choice (rowwise/split.hpp) weighs a table-wise table's columns
// with it.
inline double all_to_all_column_ms(const topology& topo, std::int64_t batch) noexcept {
  const std::size_t n = topo.size();
  if (n <= 1) return 0.0;
  const auto per_host = static_cast<std::size_t>(std::max<std::int32_t>(topo.devices_per_host, 1));
  const double bandwidth =
      n > per_host ? topo.inter_host_bandwidth_gbps : topo.intra_host_bandwidth_gbps;
  return 2.0 * static_cast<double>(batch) / static_cast<double>(n) * cost::detail::pooled_bytes /
         (bandwidth * cost::detail::bytes_per_ms_per_gbps);
}

// The gradient bytes of plan p's data-parallel tables, each table once
// (data_parallel_gradient_bytes, core/plan.hpp). Precondition: p's shards
// name tables of t.
inline std::uint64_t data_parallel_bytes(const task& t, const plan& p) {
  std::uint64_t total = 0;
  std::vector<std::uint8_t> seen;
  for (const auto& s : p.shards) {
    if (!s.data_parallel) continue;
    if (seen.empty()) seen.assign(t.tables.size(), 0);
    if (seen[s.table] != 0) continue;
    seen[s.table] = 1;
    total = checked_add(total, data_parallel_gradient_bytes(t.tables[s.table]),
                        "data-parallel gradient bytes");
  }
  return total;
}

// all_reduce_ms of plan p's data-parallel gradients: what evaluate() adds to
// every device's backward communication.
inline double data_parallel_all_reduce_ms(const task& t, const plan& p) {
  return all_reduce_ms(t.cluster, data_parallel_bytes(t, p));
}

}  // namespace embplan::inline EMBPLAN_ABI
