#pragma once
// Collectives a plan's sharding types add beyond the pooled all-to-all that
// CostModel::communication prices (docs/sharding.md): the gradient
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
#include <span>
#include <tuple>
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
// data-parallel choice (stage/data_parallel.hpp) weighs a table-wise table's
// columns with it.
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

// Table-row-wise traffic (TorchRec's table_row_wise; docs/sharding.md). A
// column range of a table cut by rows into pieces on k >= 2 devices of one
// host, in a cluster of several hosts, is reduced inside the host before it
// crosses the network: its pieces' partial pooled sums
// (batch x w fp32 values for a range of w columns) are reduce-scattered over
// the intra-host link, each of the k devices sending (k - 1) / k of them,
// and each device then sends 1/k of the range's columns (w split into k
// integer parts, the devices in index order) through the all-to-all. Row
// pieces spread over several hosts (row_wise) send all w columns each: their
// partial sums cannot be added before they leave the host. One range of a
// table cut both ways (grid_shard: column blocks across hosts, each cut by
// rows inside one) is reduced the same way, block by block.
//
// table_row_wise_traffic(t, p, dim_sum, reduce_ms): given dim_sum as
// state_of(t, p) counts it (every piece's full width), moves each such
// range's columns to their shares and adds to reduce_ms[d] the reduce-scatter
// time of device d: one collective_latency_ms plus its bytes at the intra-host
// bandwidth, where it takes part in any. It prices the forward reduce-scatter
// of the pooled outputs and, the same volume in reverse, the backward
// all-gather of their gradients (evaluate adds it to both). Returns the
// number of ranges reduced so (0: dim_sum and reduce_ms untouched).
// Precondition: p's shards name tables and devices of t.
inline std::size_t table_row_wise_traffic(const task& t, const plan& p,
                                          std::span<std::int64_t> dim_sum,
                                          std::span<double> reduce_ms) {
  const std::size_t n = t.cluster.size();
  if (!spans_hosts(t.cluster)) return 0;  // one host: row_wise and table_row_wise are one thing
  std::vector<const shard*> cut;          // pieces of a table that hold only some of its rows
  for (const auto& s : p.shards) {
    if (s.replica || s.data_parallel) continue;
    if (s.row_begin != 0 || s.row_end != t.tables[s.table].rows) cut.push_back(&s);
  }
  if (cut.empty()) return 0;
  std::sort(cut.begin(), cut.end(), [](const shard* a, const shard* b) {
    return std::tie(a->table, a->col_begin, a->col_end, a->device, a->row_begin) <
           std::tie(b->table, b->col_begin, b->col_end, b->device, b->row_begin);
  });
  std::vector<double> bytes(n, 0.0);
  std::vector<std::uint32_t> on;  // a range's devices, each once, ascending
  std::size_t ranges = 0;
  for (std::size_t i = 0; i < cut.size();) {
    std::size_t j = i;
    on.clear();
    bool one_host = true;
    while (j < cut.size() && cut[j]->table == cut[i]->table &&
           cut[j]->col_begin == cut[i]->col_begin && cut[j]->col_end == cut[i]->col_end) {
      if (on.empty() || on.back() != cut[j]->device) on.push_back(cut[j]->device);
      one_host = one_host && t.cluster.host_of(cut[j]->device) == t.cluster.host_of(cut[i]->device);
      ++j;
    }
    if (one_host && on.size() >= 2) {
      ++ranges;
      const std::int64_t w = cut[i]->cols();
      const auto k = static_cast<std::int64_t>(on.size());
      for (std::size_t q = i; q < j; ++q)
        dim_sum[cut[q]->device] -= w;
      const double sent = static_cast<double>(k - 1) / static_cast<double>(k) *
                          static_cast<double>(t.batch_size) * static_cast<double>(w) *
                          cost::detail::pooled_bytes;
      for (std::int64_t c = 0; c < k; ++c) {
        dim_sum[on[static_cast<std::size_t>(c)]] += w * (c + 1) / k - w * c / k;
        bytes[on[static_cast<std::size_t>(c)]] += sent;
      }
    }
    i = j;
  }
  if (ranges == 0) return 0;
  const double intra_bpms =
      t.cluster.intra_host_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
  for (std::size_t d = 0; d < n; ++d) {
    if (bytes[d] > 0.0) reduce_ms[d] += t.cluster.collective_latency_ms + bytes[d] / intra_bpms;
  }
  return ranges;
}

}  // namespace embplan::inline EMBPLAN_ABI
