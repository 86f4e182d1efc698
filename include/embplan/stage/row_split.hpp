#pragma once
// The row split of a table that fits no device whole, and its layouts on a
// cluster of several hosts: row_wise (the fewest devices of any hosts, hot
// rows optionally replicated on them: the embedding-tables chapter's "shard
// the table by ID", §2, and hot-row replication, §4), table_row_wise (within
// one host) and grid (rows and columns), with the communication each adds
// (layout_comm_ms) for by_cost's choice. Invariant: the pieces cover the
// table's rows x columns exactly once (replicas aside) and each is admitted
// by the caller's rule on the state it is placed in.
// Design notes: docs/design/stage.md.

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
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/collectives.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/stage/detail/common.hpp"
#include "embplan/stage/settings.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

namespace detail {

// Row shards (and hot-row replicas) of columns [c0, c1) of table `ti` over
// the fewest devices of `candidates` (at least `min_count` of them) that hold
// them and that `rule` admits, taken in order of free memory (most first);
// none if even all candidates do not.
template <constraint Constraint>
std::optional<std::vector<shard>> split_rows_over(const task& t, const placement_state& st,
                                                  std::size_t ti, std::int32_t c0, std::int32_t c1,
                                                  std::span<const std::size_t> candidates,
                                                  std::size_t min_count, const Constraint& rule,
                                                  std::int64_t hot_rows) {
  const auto& spec = t.tables[ti];
  const auto dim = static_cast<std::uint64_t>(c1 - c0);
  const std::uint64_t row = block_bytes(1, dim, spec.weight_dtype, t.optimizer_state);
  const std::int64_t hot = std::min(std::max<std::int64_t>(hot_rows, 0), spec.rows);
  const std::uint64_t reserved = hot > 0 ? block_bytes(static_cast<std::uint64_t>(hot), dim,
                                                       spec.weight_dtype, t.optimizer_state)
                                         : 0;
  std::vector<std::size_t> by_room(candidates.begin(), candidates.end());
  std::stable_sort(by_room.begin(), by_room.end(), [&](std::size_t a, std::size_t b) {
    return free_bytes(t, st, a) > free_bytes(t, st, b);
  });
  for (std::size_t count = std::max<std::size_t>(min_count, 1); count <= by_room.size(); ++count) {
    std::vector<std::size_t> chosen(by_room.begin(),
                                    by_room.begin() + static_cast<std::ptrdiff_t>(count));
    std::sort(chosen.begin(), chosen.end());
    std::vector<std::uint64_t> cap_rows(count);
    embplan::detail::uint128 total = 0;
    for (std::size_t c = 0; c < count; ++c) {
      const std::uint64_t room = free_bytes(t, st, chosen[c]);
      cap_rows[c] = room > reserved ? (room - reserved) / row : 0;
      total += cap_rows[c];
    }
    if (total < static_cast<embplan::detail::uint128>(spec.rows)) continue;
    if (std::find(cap_rows.begin(), cap_rows.end(), std::uint64_t{0}) != cap_rows.end()) break;
    const auto counts = rowwise::proportional_row_counts(spec.rows, cap_rows);
    std::vector<shard> out;
    placement_state trial = st;
    std::int64_t begin = 0;
    for (std::size_t c = 0; c < count; ++c) {
      if (counts[c] == 0) continue;
      const shard s{static_cast<std::uint32_t>(ti),
                    static_cast<std::uint32_t>(chosen[c]),
                    c0,
                    c1,
                    begin,
                    begin + counts[c],
                    false};
      begin += counts[c];
      out.push_back(s);
    }
    if (hot > 0) {
      const std::size_t pieces = out.size();
      for (std::size_t c = 1; c < pieces; ++c)
        out.push_back(shard{static_cast<std::uint32_t>(ti), out[c].device, c0, c1, 0, hot, true});
    }
    bool admitted = true;
    for (const auto& s : out) {
      if (!rule.admits(t, trial, s)) {
        admitted = false;
        break;
      }
      trial.place(t, s);
    }
    if (admitted) return out;
  }
  return std::nullopt;
}

// Row shards of all of table `ti` over the fewest devices of the cluster
// that hold it (row_wise). Devices with as much free memory are taken host
// by host in turn (device 0 of each host, then device 1, ...), so that on an
// empty cluster of several hosts the pieces spread over hosts: pieces that
// all land in one host would be table_row_wise.
template <constraint Constraint>
std::optional<std::vector<shard>> split_by_rows(const task& t, const placement_state& st,
                                                std::size_t ti, const Constraint& rule,
                                                std::int64_t hot_rows) {
  const std::size_t per_host = static_cast<std::size_t>(std::max(t.cluster.devices_per_host, 1));
  std::vector<std::size_t> all(t.cluster.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  std::stable_sort(all.begin(), all.end(),
                   [&](std::size_t a, std::size_t b) { return a % per_host < b % per_host; });
  return split_rows_over(t, st, ti, 0, t.tables[ti].dim, all, 2, rule, hot_rows);
}

// The hosts of t's cluster, each as its devices (ascending), the hosts in
// order of free memory (most first; ties: the lower host).
inline std::vector<std::vector<std::size_t>> hosts_by_room(const task& t,
                                                           const placement_state& st) {
  const std::size_t n = t.cluster.size();
  const std::size_t hosts = t.cluster.host_of(n - 1) + 1;
  std::vector<std::vector<std::size_t>> out(hosts);
  std::vector<embplan::detail::uint128> room(hosts, 0);
  for (std::size_t d = 0; d < n; ++d) {
    out[t.cluster.host_of(d)].push_back(d);
    room[t.cluster.host_of(d)] += free_bytes(t, st, d);
  }
  std::vector<std::size_t> order(hosts);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return room[a] > room[b]; });
  std::vector<std::vector<std::size_t>> sorted;
  sorted.reserve(hosts);
  for (const std::size_t h : order)
    sorted.push_back(std::move(out[h]));
  return sorted;
}

// Row shards of table `ti` inside one host (table_row_wise): the first of
// `hosts` (hosts_by_room) whose devices hold it. None on a single host, or
// where no host holds it.
template <constraint Constraint>
std::optional<std::vector<shard>> split_within_host(
    const task& t, const placement_state& st, std::size_t ti, const Constraint& rule,
    std::int64_t hot_rows, std::span<const std::vector<std::size_t>> hosts) {
  if (!spans_hosts(t.cluster)) return std::nullopt;
  for (const auto& host : hosts) {
    if (auto pieces = split_rows_over(t, st, ti, 0, t.tables[ti].dim, host, 2, rule, hot_rows))
      return pieces;
  }
  return std::nullopt;
}

// Grid pieces of table `ti` (grid_shard): its columns cut into c blocks of
// multiples of 4 (as equal as they can be) for the fewest c >= 2 such that
// each block fits, cut by rows (or whole) inside one host of its own, the
// hosts in the order of `hosts` (hosts_by_room). None on a single host or
// where no c does.
template <constraint Constraint>
std::optional<std::vector<shard>> split_grid(const task& t, const placement_state& st,
                                             std::size_t ti, const Constraint& rule,
                                             std::int64_t hot_rows,
                                             std::span<const std::vector<std::size_t>> hosts) {
  if (!spans_hosts(t.cluster)) return std::nullopt;
  const auto most =
      std::min<std::size_t>(hosts.size(), static_cast<std::size_t>(t.tables[ti].dim / 4));
  for (std::size_t c = 2; c <= most; ++c) {
    placement_state trial = st;
    std::vector<shard> out;
    std::size_t next_host = 0;
    bool placed = true;
    for (const auto& [c0, c1] : column_blocks(t.tables[ti].dim, static_cast<std::uint32_t>(c))) {
      std::optional<std::vector<shard>> block;
      while (!block && next_host < hosts.size())
        block = split_rows_over(t, trial, ti, c0, c1, hosts[next_host++], 1, rule, hot_rows);
      if (!block) {
        placed = false;
        break;
      }
      for (const auto& s : *block) {
        trial.place(t, s);
        out.push_back(s);
      }
    }
    if (placed) return out;
  }
  return std::nullopt;
}

// What a layout of table `ti`'s pieces adds to the slowest of its devices'
// communication, alone in the cluster (the analytic all-to-all of a device
// whose host and cluster hold nothing else, analytic_cost::transfer_ms: one
// latency and its own columns to every peer, over the intra- and the
// inter-host link; plus the reduce-scatter of a table_row_wise range:
// table_row_wise_traffic).
// Compares row_wise, table_row_wise and grid layouts of one table.
inline double layout_comm_ms(const task& t, std::span<const shard> pieces) {
  const std::size_t n = t.cluster.size();
  plan p;
  p.shards.assign(pieces.begin(), pieces.end());
  std::vector<std::int64_t> dim_sum(n, 0);
  for (const auto& s : pieces)
    dim_sum[s.device] += s.cols();
  std::vector<double> reduce(n, 0.0);
  table_row_wise_traffic(t, p, std::span<std::int64_t>(dim_sum), std::span<double>(reduce));
  // The table alone: its devices' host and cluster sums are their own.
  const auto a = analytic_cost::all_to_all_of(t);
  const double h = static_cast<double>(
      std::min<std::size_t>(n, static_cast<std::size_t>(std::max(t.cluster.devices_per_host, 1))));
  double worst = 0.0;
  for (std::size_t d = 0; d < n; ++d) {
    if (dim_sum[d] == 0 && reduce[d] == 0.0) continue;
    const auto own = static_cast<double>(dim_sum[d]);
    worst = std::max(worst, analytic_cost::transfer_ms(a, own, own, h, own) + reduce[d]);
  }
  return worst;
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::stage
