#pragma once
// rowwise::split_oversized<Inner>: row-wise sharding as a plan option, for any
// searcher. A table that no device admits whole (it is larger than any
// device's memory) is split by rows instead of making the task infeasible —
// the chapter's "shard the table by ID" (embedding-tables chapter §2), and
// TorchRec's row-wise sharding, which none of the papers' learned planners
// offers. Then the inner searcher places the remaining tables, unchanged.
//
// Per oversized table, largest first: the devices are taken in order of free
// memory (most first) and S is the smallest count whose free memory holds the
// table; its rows go to those S devices as contiguous ranges proportional to
// the rows each can hold (ranges ascending by device index), so each ends up
// filled to about the same share. Contiguous ranges are what a plan records
// (shard row_begin/row_end); rowwise/partition.hpp's hash_partition is the
// alternative for ID-correlated hotness, where the plan's ranges then count
// hash buckets rather than raw IDs.
// On a cluster of several hosts that is one layout of three (`layout`, issue
// 24 sharding types; by default the cheapest, by layout_comm_ms: what the
// table adds to its slowest device's communication):
//  - row_wise: as above, the devices of any hosts; every piece sends its
//    partial sums for all the table's columns across the network;
//  - table_row_wise: the same inside one host (the first, in order of free
//    memory, that holds it); the partial sums are reduce-scattered inside the host
//    first, so the network carries each column once
//    (table_row_wise_traffic, cost/collectives.hpp);
//  - grid (where no host holds it): the columns cut into the fewest blocks
//    of multiples of 4, each block on a host of its own, cut by rows there
//    (or whole on one device).
// On fast intra-host links (NVLink) the host-local layouts win; on links as
// slow as the network (the default topology's PCIe) the reduce-scatter costs
// about what it saves and row_wise often stays the cheaper.
// Optional hot rows (`hot_rows` = k > 0): rows [0, k) of each split table are
// also stored, as declared replicas, on each of its other row-shard devices
// so their reads can spread (§4). This assumes IDs ordered by popularity (row
// 0 hottest, as after a frequency-sorted remap); room for them is reserved on
// every chosen device.
// The inner searcher then sees a task of the remaining tables whose device
// capacities are reduced by what the row shards took. Its cost model and
// reward do not see the row shards' load: the remaining tables are balanced
// among themselves. Its constraint, though, is always asked in the caller's
// terms (detail::in_full_task): the full task, each table under its own index
// (a rule that pins "table 3" still means the caller's table 3, not the third
// table of the sub-task) and a device state that counts the row shards.
//
// Data-parallel tables (data_parallel.enabled, off by default; issue 24,
// sharding types): before the row splits, small tables may be replicated as
// data-parallel copies (shard::data_parallel), one whole copy on every device,
// each serving 1/D of the batch, their gradients all-reduced
// (cost/collectives.hpp). Which ones:
//  - forced: a table in hbm that no device admits whole while the rule admits
//    a copy on every device (the user allows it data_parallel only);
//  - by cost: candidates are the tables in hbm whose copies cost each device
//    less than placing them whole would, once balanced:
//      whole: shard_cost(whole table) / D + dim x all_to_all_column_ms
//      copies: shard_cost(one copy) + all_reduce_ms(its gradient) minus the
//              collective's start-up (paid once for all the tables)
//    tried by that saving per byte (ties: the lower index); one is taken if
//    it lowers the estimate of the plan's cost with set S replicated,
//      max(costliest table placed whole, sum of them / D)
//        + sum of the copies' costs + the whole tables' dims x column_ms
//        + all_reduce_ms(the copies' gradients)
//    (the compute bound matters where one big table makes the plan: copies
//    then add to its device what placed whole they would not), the copies
//    keep within memory_fraction of the smallest device memory and the rule
//    admits all of them. Shard costs come from the searcher's model where its
//    unit is ms, else from analytic_cost (a heuristic's score is not time).
// Row pieces for tables that fit (rows_by_cost, off by default; issue 24:
// "the planner picks the sharding type per table by cost"). A table whose
// narrowest column block (4 x ceil((dim / 4) / min(D, dim / 4)) columns, the
// best a column split can do) still costs more than the balanced share of the
// tables the inner searcher places (share = the sum of their whole costs /
// D) bounds the plan however it is placed; cut by rows into
// S = ceil(whole / share) pieces (2 <= S <= D; even row ranges, each with its
// share of the lookups, piece_table) it does not, but every piece sends all
// the table's columns in the all-to-all. S is at most the pieces the rule
// admits one per device on distinct devices of an empty cluster (a user's
// allowed devices and max_shards; fewer, larger pieces are asked again).
// Which of those tables to cut is chosen on the data-parallel estimate of the
// plan's cost (above):
//   max(the largest bound left, the costliest piece, sum of costs / D)
//     + the columns in the all-to-all x all_to_all_column_ms,
// over the tables in order of their bound (largest first), the number cut
// being the one with the lowest estimate (none where cutting none is as
// low); a table the rule refuses row pieces (its allowed sharding kinds) is
// never cut. The pieces are not placed by the stage: each becomes a table of
// the sub-task (named "<table> rows [a, b)"), which the inner searcher
// places with the rest, balancing their load as any other table's (the plan
// maps them back to their rows); hot_rows and `layout` are for oversized
// tables only. As the estimate leaves out where the rest goes, the stage
// then plans both ways, with those cuts and without (the inner searcher
// twice), and keeps the plan the Reward scores higher on evaluate() of the
// caller's task, the one without cuts on a tie (best_of's comparison):
// rows_by_cost never gives a plan the reward scores lower than the stage
// without it. Where the estimate cuts nothing the inner searcher runs once.
// Pieces of one table the inner searcher puts on one device with abutting
// rows become one piece (merge_abutting_rows: the same bytes and lookups)
// where the reward scores the plan so no lower.
// Tables with a minimum piece count (min_shards_of(rule, table) > 1, the
// user's min_shards) are cut into that many column blocks of multiples of 4
// (as equal as they can be) before the inner searcher runs, each block a
// table of its sub-task, which it places (or splits further) like any other;
// the plan maps the blocks back to their table's columns.
//
// Every device carries the same copies, so the inner searcher balances the
// other tables without them (on a uniform cluster they add the same time to
// every device: what they cost is the same wherever the rest goes).

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
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/collectives.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/search/best_of.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

// Which tables a split_oversized stage replicates as data-parallel copies
// (the header comment says how it chooses).
struct data_parallel_options {
  bool enabled = false;
  double memory_fraction = 0.1;  // of the smallest device memory, for all copies together

  void validate() const {
    if (!(memory_fraction >= 0.0 && memory_fraction <= 1.0)) {
      embplan::detail::fail("data_parallel.memory_fraction", memory_fraction,
                            "a fraction in [0, 1]");
    }
  }
};

// The copy of table `ti` on `device` that a data-parallel table holds there.
inline shard data_parallel_copy(const task& t, std::size_t ti, std::size_t device) {
  shard s = whole_table(t, ti, device);
  s.data_parallel = true;
  return s;
}

namespace detail {

inline std::uint64_t free_bytes(const task& t, const placement_state& st, std::size_t d) noexcept {
  return memory_capacity{}.room(t, st, d);
}

// Column blocks [begin, end) cutting `dim` columns into `count` pieces of
// multiples of 4, as equal as they can be (the first ones one block of 4
// wider). Precondition: 1 <= count <= dim / 4.
inline std::vector<std::pair<std::int32_t, std::int32_t>> column_blocks(std::int32_t dim,
                                                                        std::uint32_t count) {
  const std::int32_t units = dim / 4;
  const auto n = static_cast<std::int32_t>(count);
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  std::int32_t begin = 0;
  for (std::int32_t k = 0; k < n; ++k) {
    const std::int32_t width = 4 * (units / n + (k < units % n ? 1 : 0));
    const std::int32_t end = k + 1 == n ? dim : begin + width;
    out.emplace_back(begin, end);
    begin = end;
  }
  return out;
}

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
    const auto counts = proportional_row_counts(spec.rows, cap_rows);
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

// Places the copies of table `ti` on every device of `st` if `rule` admits
// each in turn; false (st unchanged) otherwise.
template <constraint Constraint>
bool place_copies(const task& t, placement_state& st, std::size_t ti, const Constraint& rule,
                  std::vector<shard>& out) {
  placement_state trial = st;
  const std::size_t first = out.size();
  for (std::size_t d = 0; d < t.cluster.size(); ++d) {
    const shard s = data_parallel_copy(t, ti, d);
    if (!rule.admits(t, trial, s)) {
      out.resize(first);
      return false;
    }
    trial.place(t, s);
    out.push_back(s);
  }
  st = std::move(trial);
  return true;
}

// Per table: whether `rule` admits it whole on some device of an empty
// cluster (a table that fits no device is replicated if it must, or split by
// rows).
template <constraint Constraint>
std::vector<std::uint8_t> fits_whole(const task& t, const Constraint& rule) {
  const std::size_t devices = t.cluster.size();
  const placement_state empty(devices);
  std::vector<std::uint8_t> out(t.tables.size(), 0);
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    for (std::size_t d = 0; d < devices && out[i] == 0; ++d)
      out[i] = rule.admits(t, empty, whole_table(t, i, d)) ? 1 : 0;
  return out;
}

// A shard's cost in ms for the stage's choices: the searcher's model where
// its unit is ms, else analytic_cost (a heuristic's score is not time).
template <cost_model CostModel>
double stage_ms(const task& t, const CostModel& model, const shard& s) {
  if constexpr (cost_unit_of<CostModel> == cost_unit::ms) {
    return static_cast<double>(model.shard_cost(t, s));
  } else {
    return analytic_cost{}.shard_cost(t, s);
  }
}

// The tables to replicate (see the header comment), their copies placed in
// `st` and appended to `copies`; `placed[i]` set for each. fits[i]:
// fits_whole's answer for table i.
template <cost_model CostModel, constraint Constraint>
void choose_data_parallel(const task& t, const CostModel& model, const Constraint& rule,
                          const data_parallel_options& o, std::span<const std::uint8_t> fits,
                          placement_state& st, std::vector<shard>& copies,
                          std::vector<std::uint8_t>& placed) {
  const std::size_t devices = t.cluster.size();
  const auto price = [&](const shard& s) { return stage_ms(t, model, s); };
  const double column_ms = all_to_all_column_ms(t.cluster, t.batch_size);
  const double latency = t.cluster.collective_latency_ms;
  const auto d_count = static_cast<double>(devices);
  // What the plan would cost with set S replicated (the header comment):
  // the inner searcher's tables at their lower bound, the copies on every
  // device, the columns left in the all-to-all and one all-reduce.
  std::vector<double> whole(t.tables.size(), 0.0);
  std::vector<std::size_t> by_whole;  // the tables the inner searcher places, costliest first
  double sum_whole = 0.0;
  std::int64_t sum_dim = 0;
  double copies_ms = 0.0;
  std::uint64_t gradient_bytes = 0;
  struct candidate {
    std::size_t table;
    double saving;  // ms per device, balanced
    std::uint64_t bytes;
    double copy_ms;
  };
  std::vector<candidate> by_cost;
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    const auto& spec = t.tables[i];
    const bool in_hbm = spec.placement.tier == memory_tier::hbm;
    if (fits[i] == 0) {  // forced: copies or nothing (then the row split or the inner searcher)
      if (in_hbm && place_copies(t, st, i, rule, copies)) {
        placed[i] = 1;
        copies_ms += price(data_parallel_copy(t, i, 0));
        gradient_bytes += data_parallel_gradient_bytes(spec);
      }
      continue;
    }
    whole[i] = price(whole_table(t, i, 0));
    by_whole.push_back(i);
    sum_whole += whole[i];
    sum_dim += spec.dim;
    if (!in_hbm) continue;
    const double copy = price(data_parallel_copy(t, i, 0));
    const double saving = whole[i] / d_count + static_cast<double>(spec.dim) * column_ms - copy -
                          (all_reduce_ms(t.cluster, data_parallel_gradient_bytes(spec)) - latency);
    if (saving > 0.0) by_cost.push_back({i, saving, table_bytes(spec, t.optimizer_state), copy});
  }
  std::stable_sort(by_whole.begin(), by_whole.end(),
                   [&](std::size_t a, std::size_t b) { return whole[a] > whole[b]; });
  std::stable_sort(by_cost.begin(), by_cost.end(), [](const candidate& a, const candidate& b) {
    // saving / bytes, descending, without dividing (bytes > 0)
    return a.saving * static_cast<double>(b.bytes) > b.saving * static_cast<double>(a.bytes);
  });
  std::vector<std::uint8_t> taken(t.tables.size(), 0);
  std::size_t top = 0;  // by_whole[top]: the costliest table not taken
  const auto plan_ms = [&](double whole_ms, std::int64_t dims, double copy_ms, std::uint64_t bytes,
                           std::size_t without) {
    std::size_t k = top;
    while (k < by_whole.size() && (taken[by_whole[k]] != 0 || by_whole[k] == without))
      ++k;
    const double largest = k < by_whole.size() ? whole[by_whole[k]] : 0.0;
    return std::max(largest, whole_ms / d_count) + copy_ms + static_cast<double>(dims) * column_ms +
           all_reduce_ms(t.cluster, bytes);
  };
  std::uint64_t smallest = t.cluster.devices.front().memory_bytes;
  for (const auto& d : t.cluster.devices)
    smallest = std::min(smallest, d.memory_bytes);
  const auto budget = static_cast<std::uint64_t>(o.memory_fraction * static_cast<double>(smallest));
  std::uint64_t used = 0;
  for (const auto& c : by_cost) {
    if (c.bytes > budget - used) continue;
    const auto& spec = t.tables[c.table];
    const std::uint64_t grad = data_parallel_gradient_bytes(spec);
    const double now = plan_ms(sum_whole, sum_dim, copies_ms, gradient_bytes, t.tables.size());
    const double then = plan_ms(sum_whole - whole[c.table], sum_dim - spec.dim,
                                copies_ms + c.copy_ms, gradient_bytes + grad, c.table);
    if (!(then < now)) continue;
    if (!place_copies(t, st, c.table, rule, copies)) continue;
    used += c.bytes;
    taken[c.table] = 1;
    placed[c.table] = 1;
    sum_whole -= whole[c.table];
    sum_dim -= spec.dim;
    copies_ms += c.copy_ms;
    gradient_bytes += grad;
    while (top < by_whole.size() && taken[by_whole[top]] != 0)
      ++top;
  }
}

// rows_by_cost's choice (the header comment): per table of `rest` (those the
// inner searcher places; `min_pieces[i] > 1`: cut into column blocks for
// min_shards, never by rows), the number of row pieces it is cut into, 0 for
// none.
template <cost_model CostModel, constraint Constraint>
std::vector<std::uint32_t> choose_row_cuts(const task& t, const CostModel& model,
                                           const Constraint& rule,
                                           std::span<const std::size_t> rest,
                                           std::span<const std::uint32_t> min_pieces) {
  const std::size_t devices = t.cluster.size();
  std::vector<std::uint32_t> out(t.tables.size(), 0);
  if (devices < 2 || rest.empty()) return out;
  const auto d_count = static_cast<double>(devices);
  std::vector<double> whole(t.tables.size(), 0.0);
  std::vector<double> bound(t.tables.size(), 0.0);
  double sum = 0.0;
  std::int64_t dims = 0;
  for (const std::size_t i : rest) {
    const shard w = whole_table(t, i, 0);
    whole[i] = stage_ms(t, model, w);
    bound[i] = whole[i];
    const std::int32_t units = t.tables[i].dim / 4;
    if (units >= 2) {
      const auto k = static_cast<std::int32_t>(
          std::min<std::size_t>(devices, static_cast<std::size_t>(units)));
      shard block = w;
      block.col_end = 4 * ((units + k - 1) / k);
      bound[i] = stage_ms(t, model, block);
    }
    sum += whole[i];
    dims += t.tables[i].dim;
  }
  const double share = sum / d_count;
  if (!(share > 0.0)) return out;
  // The most even row pieces of table i, at most `wanted`, that the rule
  // admits one per device on distinct devices of an empty cluster (its allowed
  // kinds and devices, max_shards, memory): where fewer are admitted, as many
  // larger pieces are asked again; 0 where fewer than two are.
  const auto admitted_pieces = [&](std::size_t i, std::uint32_t wanted) {
    std::uint32_t pieces = wanted;
    while (pieces >= 2) {
      const auto ranges = range_partition::even(t.tables[i].rows, pieces);
      placement_state trial(devices);
      std::uint32_t placed = 0;
      for (std::size_t d = 0; d < devices && placed < pieces; ++d) {
        shard s = whole_table(t, i, d);
        s.row_begin = ranges.row_begin(placed);
        s.row_end = ranges.row_end(placed);
        if (!rule.admits(t, trial, s)) continue;
        trial.place(t, s);
        ++placed;
      }
      if (placed == pieces) return pieces;
      pieces = placed;
    }
    return std::uint32_t{0};
  };
  struct candidate {
    std::size_t table;
    std::uint32_t pieces;
    double piece_ms;
  };
  std::vector<std::size_t> order;
  double rest_bound = 0.0;  // the largest bound of a table never cut
  for (const std::size_t i : rest) {
    if (min_pieces[i] <= 1 && bound[i] > share && t.tables[i].rows >= 2) {
      order.push_back(i);
    } else {
      rest_bound = std::max(rest_bound, bound[i]);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return bound[a] > bound[b]; });
  std::vector<candidate> cuts;
  for (const std::size_t i : order) {
    const double wanted = std::ceil(whole[i] / share);
    auto pieces = wanted >= d_count
                      ? static_cast<std::uint32_t>(devices)
                      : std::max<std::uint32_t>(2, static_cast<std::uint32_t>(wanted));
    pieces = static_cast<std::uint32_t>(std::min<std::int64_t>(pieces, t.tables[i].rows));
    pieces = admitted_pieces(i, pieces);
    if (pieces < 2) {
      rest_bound = std::max(rest_bound, bound[i]);
      continue;
    }
    const std::int64_t rows = range_partition::even(t.tables[i].rows, pieces).rows_in(0);
    const shard piece{static_cast<std::uint32_t>(i), 0, 0, t.tables[i].dim, 0, rows, false};
    cuts.push_back({i, pieces, stage_ms(t, model, piece)});
  }
  const double column_ms = all_to_all_column_ms(t.cluster, t.batch_size);
  const auto estimate = [&](std::size_t k, double sum_k, std::int64_t dims_k, double pieces_k) {
    const double next = k < cuts.size() ? std::max(bound[cuts[k].table], rest_bound) : rest_bound;
    return std::max({next, pieces_k, sum_k / d_count}) + static_cast<double>(dims_k) * column_ms;
  };
  double best = estimate(0, sum, dims, 0.0);
  std::size_t best_k = 0;
  double most_piece = 0.0;
  for (std::size_t k = 0; k < cuts.size(); ++k) {
    const auto& c = cuts[k];
    sum += static_cast<double>(c.pieces) * c.piece_ms - whole[c.table];
    dims += static_cast<std::int64_t>(c.pieces - 1) * t.tables[c.table].dim;
    most_piece = std::max(most_piece, c.piece_ms);
    const double e = estimate(k + 1, sum, dims, most_piece);
    if (e < best) {
      best = e;
      best_k = k + 1;
    }
  }
  for (std::size_t k = 0; k < best_k; ++k)
    out[cuts[k].table] = cuts[k].pieces;
  return out;
}

// Row pieces of a table cut by rows_by_cost (`row_cut[table] > 1`) that the
// inner searcher put on one device with abutting rows, merged into one piece
// (the first's place in `shards` kept) where the rule admits the merged piece
// on its own (its kind: all rows are table_wise); shards of other tables are
// left as they are. The device holds the same bytes and looks up the same
// rows either way.
template <constraint Constraint>
void merge_abutting_rows(const task& t, const Constraint& rule,
                         std::span<const std::uint32_t> row_cut, std::vector<shard>& shards) {
  std::vector<std::size_t> cut;  // indices of the cut tables' pieces
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const auto& s = shards[k];
    if (!s.replica && !s.data_parallel && s.table < row_cut.size() && row_cut[s.table] > 1)
      cut.push_back(k);
  }
  if (cut.size() < 2) return;
  std::stable_sort(cut.begin(), cut.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = shards[a];
    const auto& y = shards[b];
    return std::tie(x.table, x.device, x.col_begin, x.row_begin) <
           std::tie(y.table, y.device, y.col_begin, y.row_begin);
  });
  const placement_state empty(t.cluster.size());
  std::vector<std::uint8_t> gone(shards.size(), 0);
  std::size_t into = cut[0];
  for (std::size_t k = 1; k < cut.size(); ++k) {
    shard& a = shards[into];
    const shard& b = shards[cut[k]];
    if (b.table == a.table && b.device == a.device && b.col_begin == a.col_begin &&
        b.col_end == a.col_end && b.row_begin == a.row_end) {
      shard joined = a;
      joined.row_end = b.row_end;
      if (rule.admits(t, empty, joined)) {
        a = joined;
        gone[cut[k]] = 1;
        continue;
      }
    }
    into = cut[k];
  }
  std::size_t kept = 0;
  for (std::size_t k = 0; k < shards.size(); ++k)
    if (gone[k] == 0) shards[kept++] = shards[k];
  shards.resize(kept);
}

// merge_abutting_rows on a copy of `p`'s shards, kept where the reward scores
// the merged plan no lower than `p`: a model may price one piece of 2n rows
// unlike two of n on one device, and models disagree (on two
// NeuroShard-protocol tasks the bundled learned model prices torchrec's plan
// 3.3-3.5 % higher merged, where the analytic model torchrec decides on does
// not score it lower). Returns the evaluate() calls made (two where anything
// merged, else none).
template <cost_model CostModel, constraint Constraint, reward Reward>
std::uint64_t merge_abutting_rows_if_no_costlier(const task& t, const CostModel& model,
                                                 const Constraint& rule, const Reward& score,
                                                 std::span<const std::uint32_t> row_cut, plan& p) {
  plan merged = p;
  merge_abutting_rows(t, rule, row_cut, merged.shards);
  if (merged.shards.size() == p.shards.size()) return 0;
  const auto value = [&](const plan& x) {
    return static_cast<double>(score.score(t, evaluate(t, x, model)));
  };
  if (!(value(merged) < value(p))) p = std::move(merged);
  return 2;
}

// Record `b` of a sub-task table added to record `a` of the same full table.
inline table_placement merged(table_placement a, const table_placement& b) noexcept {
  if (a.pieces == 0) return b;
  if (b.pieces == 0) return a;
  a.on_home += b.home == a.home ? b.on_home : 0;
  a.pieces += b.pieces;
  return a;
}

// The constraint the inner searcher is given: questions about the sub-task
// (tables renumbered, capacities reduced by the row shards) translated into
// the caller's task. A sub-task shard of table k is asked about as table
// index[k] of `full`, its columns moved right by offset[k] (a table cut into
// column blocks for min_shards is several sub-task tables) and its rows by
// row_offset[k] (a table cut by rows_by_cost: one per piece), on a state that
// adds the row shards (`base`) to what the inner searcher placed; the
// sub-task's reduced capacities and the full task's capacities with the row
// shards counted are the same memory.
template <constraint Constraint>
class in_full_task {
 public:
  in_full_task(const Constraint& rule, const task& full, std::span<const std::size_t> index,
               std::span<const std::int32_t> offset, std::span<const std::int64_t> row_offset,
               const placement_state& base) noexcept
      : rule_(&rule)
      , full_(&full)
      , index_(index)
      , offset_(offset)
      , row_offset_(row_offset)
      , base_(&base)
      , dram_free_(!holds_limited_dram(full, base))
      , same_in_sub_task_(same_in_sub_task(rule) && dram_free_) {}

  bool admits(const task& sub, const placement_state& st, const shard& s) const {
    if (same_in_sub_task_) return static_cast<bool>(rule_->admits(sub, st, s));
    return admits_translated(sub, st, s, nullptr);
  }
  // The bytes of a sub-task shard are those of the same block of the full
  // task's table (the sub-task's tables are copies).
  bool admits(const task& sub, const placement_state& st, const shard& s,
              std::uint64_t bytes) const {
    if (same_in_sub_task_) return admits_with_bytes(*rule_, sub, st, s, bytes);
    return admits_translated(sub, st, s, &bytes);
  }
  std::string describe() const { return std::string(rule_->describe()); }
  // room_bounding_constraint: for default_constraint, its room on the
  // sub-task (its memory capacity's: the same memory as the full task's with
  // the row shards counted, and every path of admits() asks it, user rules
  // only refusing more). Else no limit: the translated room would need the
  // combined state.
  std::uint64_t room(const task& sub, const placement_state& st,
                     std::size_t device) const noexcept {
    if constexpr (std::same_as<Constraint, default_constraint>) {
      return room_of(*rule_, sub, st, device);
    } else {
      return unlimited_room;
    }
  }
  // The inner searcher must keep the per-table record where the caller's
  // rule reads it (co-location, anti-affinity, max shards): combined() passes
  // it on.
  bool reads_table_record() const noexcept { return embplan::reads_table_record(*rule_); }
  std::string explain(const task&, const placement_state& st, std::size_t table) const {
    return explain_of(*rule_, *full_, combined(st), index_[table]);
  }

 private:
  // Whether `rule` answers a sub-task question as it answers the translated
  // one, so that admits() may skip the translation (combined() copies the
  // whole device state, O(devices + tables) a question): default_constraint
  // with no user rules, whose memory capacity and column multiple read only
  // the shard's block and its device's memory (the sub-task's capacities are
  // what the row shards and copies left free).
  static bool same_in_sub_task(const Constraint& rule) noexcept {
    if constexpr (std::same_as<Constraint, default_constraint>) {
      return std::get<2>(rule.parts()).empty();
    } else {
      return false;
    }
  }

  // admits() where the sub-task's question is not the full task's: for a
  // table no user rule names (unruled), the memory capacity's and the column
  // multiple's answers on the sub-task; else the rule's on the combined
  // state. Kept out of admits(), which the searchers' steps inline.
  bool admits_translated(const task& sub, const placement_state& st, const shard& s,
                         const std::uint64_t* bytes) const {
    const auto ask = [&](const auto& rule, const task& t, const placement_state& state,
                         const shard& piece) {
      return bytes != nullptr ? admits_with_bytes(rule, t, state, piece, *bytes)
                              : static_cast<bool>(rule.admits(t, state, piece));
    };
    if constexpr (std::same_as<Constraint, default_constraint>) {
      if (unruled(s)) {
        const auto& parts = rule_->parts();
        return ask(std::get<0>(parts), sub, st, s) && ask(std::get<1>(parts), sub, st, s);
      }
    }
    return ask(*rule_, *full_, combined(st), translated(s));
  }

  // For default_constraint with user rules: whether no rule names the
  // shard's table. Then the rules admit it without reading the state
  // (table_rules::rules_table), and the answer is the memory capacity's and
  // the column multiple's, which read the sub-task as same_in_sub_task says;
  // no combined state is built (O(devices + tables) a question: with two
  // rules on 500 tables x 8 devices, 0.57 s against 0.15 s without rules).
  bool unruled(
      const shard& s) const noexcept requires std::same_as<Constraint, default_constraint> {
    return dram_free_ && !std::get<2>(rule_->parts()).rules_table(index_[s.table]);
  }

  // Whether the row shards and copies already hold host DRAM that a limit
  // counts: the sub-task keeps the full capacities of host DRAM (a free 0
  // would read as "not limited"), so then every question is translated.
  static bool holds_limited_dram(const task& full, const placement_state& base) noexcept {
    for (std::size_t d = 0; d < base.dram_bytes.size(); ++d)
      if (base.dram_bytes[d] != 0 && full.cluster.devices[d].dram_bytes != 0) return true;
    return false;
  }

  shard translated(shard s) const noexcept {
    const std::int32_t shift = offset_[s.table];
    const std::int64_t row_shift = row_offset_[s.table];
    s.table = static_cast<std::uint32_t>(index_[s.table]);
    s.col_begin += shift;
    s.col_end += shift;
    s.row_begin += row_shift;
    s.row_end += row_shift;
    return s;
  }
  placement_state combined(const placement_state& st) const {
    placement_state out = *base_;
    for (std::size_t d = 0; d < out.memory_bytes.size(); ++d) {
      out.memory_bytes[d] += st.memory_bytes[d];
      out.dim_sum[d] += st.dim_sum[d];
      out.shard_count[d] += st.shard_count[d];
      if (d < st.dram_bytes.size()) out.dram_bytes[d] += st.dram_bytes[d];  // may be unsized
    }
    // The sub-task's tables are not the split ones: their records move over
    // under their full-task indices, the blocks of one table's merged.
    if (!st.tables.empty() && out.tables.size() < full_->tables.size())
      out.tables.resize(full_->tables.size());
    for (std::size_t k = 0; k < st.tables.size(); ++k)
      if (st.tables[k].pieces > 0)
        out.tables[index_[k]] = merged(out.tables[index_[k]], st.tables[k]);
    return out;
  }

  const Constraint* rule_;
  const task* full_;
  std::span<const std::size_t> index_;
  std::span<const std::int32_t> offset_;
  std::span<const std::int64_t> row_offset_;
  const placement_state* base_;
  bool dram_free_;  // !holds_limited_dram
  bool same_in_sub_task_;
};

}  // namespace detail

// Where a table that fits no device goes (split_oversized::layout), on a
// cluster of several hosts:
enum class row_layout {
  by_cost,    // the cheaper of host_first's host-local layout and row_wise, where
              // both fit (layout_comm_ms; ties: the host-local one)
  row_wise,   // the fewest devices of any hosts (the only layout on one host)
  host_first  // table_row_wise where a host holds it, else grid, else row_wise
};

// The layouts' names, in the enum's order.
inline constexpr std::array<std::string_view, 3> row_layout_names{"by_cost", "row_wise",
                                                                  "host_first"};

inline std::string_view to_string(row_layout l) noexcept {
  return row_layout_names[static_cast<std::size_t>(l)];
}

// "by_cost" | "row_wise" | "host_first"; anything else fails naming `field`.
inline row_layout row_layout_from(std::string_view text, std::string_view field) {
  for (std::size_t i = 0; i < row_layout_names.size(); ++i)
    if (text == row_layout_names[i]) return static_cast<row_layout>(i);
  embplan::detail::fail(field, text, "one of by_cost, row_wise, host_first");
}

template <class Inner>
struct split_oversized {
  Inner inner{};
  std::int64_t hot_rows = 0;  // rows [0, hot_rows) of a split table replicated (0: none)
  bool split_rows = true;     // false: a table that fits no device is left to `inner`
  data_parallel_options data_parallel{};    // small tables replicated (off by default)
  row_layout layout = row_layout::by_cost;  // where a split table's pieces go, across hosts
  bool rows_by_cost = false;  // also cut tables that fit by rows where cheaper (header comment)

  // The inner searcher decides the plan of the tables that fit whole (with
  // rows_by_cost the stage also compares two plans by the reward).
  static constexpr bool uses_reward = searcher_uses_reward<Inner>;

  // The pieces of oversized table `ti` by `layout`; none if it fits in no
  // layout.
  template <constraint Constraint>
  std::optional<std::vector<shard>> split_table(const task& t, const placement_state& st,
                                                std::size_t ti, const Constraint& rule) const {
    if (layout == row_layout::row_wise) return detail::split_by_rows(t, st, ti, rule, hot_rows);
    const auto hosts = spans_hosts(t.cluster) ? detail::hosts_by_room(t, st)
                                              : std::vector<std::vector<std::size_t>>{};
    auto local = detail::split_within_host(t, st, ti, rule, hot_rows, hosts);
    if (!local) local = detail::split_grid(t, st, ti, rule, hot_rows, hosts);
    if (layout == row_layout::host_first && local) return local;
    auto spread = detail::split_by_rows(t, st, ti, rule, hot_rows);
    if (!local) return spread;
    if (!spread) return local;
    return detail::layout_comm_ms(t, *local) <= detail::layout_comm_ms(t, *spread) ? local : spread;
  }

  std::string_view name() const noexcept { return "rowwise_split"; }
  std::string label() const { return "rowwise_split(" + searcher_label(inner) + ")"; }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t seed) const {
    data_parallel.validate();
    bool cut_any = false;
    search_result with = plan(t, model, rule, score, seed, rows_by_cost, cut_any);
    if (!cut_any) return with;
    search_result without = plan(t, model, rule, score, seed, false, cut_any);
    // The plan the reward scores higher, the one without cuts on a tie
    // (best_of's comparison: one evaluate() per plan compared).
    const std::uint64_t evaluations = with.evaluations + without.evaluations;
    const std::uint64_t lookups = with.cache_lookups + without.cache_lookups;
    const std::uint64_t hits = with.cache_hits + without.cache_hits;
    const auto value = [&](const search_result& r) {
      return static_cast<double>(score.score(t, evaluate(t, r.placement, model)));
    };
    search_result& kept =
        !with.ok || (without.ok && !(value(with) > value(without))) ? without : with;
    kept.evaluations = evaluations + (with.ok ? 1U : 0U) + (without.ok ? 1U : 0U);
    kept.cache_lookups = lookups;
    kept.cache_hits = hits;
    return std::move(kept);
  }

 private:
  // The stage's plan; with `cut_fitting`, tables that fit cut by rows where
  // choose_row_cuts finds it cheaper (`cut_any` says whether any was).
  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result plan(const task& t, const CostModel& model, const Constraint& rule,
                     const Reward& score, std::uint64_t seed, bool cut_fitting,
                     bool& cut_any) const {
    cut_any = false;
    const std::size_t devices = t.cluster.size();
    search_result out;
    placement_state st(devices);
    std::vector<std::uint8_t> replicated(t.tables.size(), 0);
    const bool replicating = data_parallel.enabled && devices > 1;
    // Asked once for both stages; with neither, every table goes to `inner`.
    const auto fits = split_rows || replicating ? detail::fits_whole(t, rule)
                                                : std::vector<std::uint8_t>(t.tables.size(), 1);
    if (replicating) {
      detail::choose_data_parallel(t, model, rule, data_parallel, fits, st, out.placement.shards,
                                   replicated);
    }
    std::vector<std::size_t> oversized;
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < t.tables.size(); ++i) {
      if (replicated[i] != 0) continue;
      (!split_rows || fits[i] != 0 ? rest : oversized).push_back(i);
    }
    // Tables the rule wants in at least two pieces (min_shards_of), cut into
    // that many column blocks for the inner searcher.
    std::vector<std::uint32_t> cut(t.tables.size(), 0);
    bool cutting = false;
    for (const std::size_t i : rest) {
      cut[i] = min_shards_of(rule, i);
      cutting = cutting || cut[i] > 1;
    }
    // Tables that fit, cut by rows by cost: each piece a sub-task table.
    const auto row_cut = cut_fitting ? detail::choose_row_cuts(t, model, rule, rest, cut)
                                     : std::vector<std::uint32_t>{};
    const auto row_cut_of = [&](std::size_t i) { return row_cut.empty() ? 0U : row_cut[i]; };
    cut_any = std::any_of(row_cut.begin(), row_cut.end(), [](std::uint32_t n) { return n > 1; });
    if (oversized.empty() && rest.size() == t.tables.size() && !cutting && !cut_any) {
      return inner.search(t, model, rule, score, seed);
    }

    std::stable_sort(oversized.begin(), oversized.end(), [&](std::size_t a, std::size_t b) {
      return table_bytes(t.tables[a], t.optimizer_state) >
             table_bytes(t.tables[b], t.optimizer_state);
    });
    std::string split_names;
    for (const std::size_t i : oversized) {
      auto pieces = split_table(t, st, i, rule);
      if (!pieces) {
        std::uint64_t total_free = 0;
        for (std::size_t d = 0; d < devices; ++d)
          total_free += detail::free_bytes(t, st, d);
        out.failure = search::no_device_for(t, st, i, rule) + "; split by rows across all " +
                      std::to_string(devices) + " devices it still does not fit (" +
                      std::to_string(total_free) + " bytes free in all)";
        return out;
      }
      for (const auto& s : *pieces) {
        st.place(t, s);
        out.placement.shards.push_back(s);
      }
      split_names += (split_names.empty() ? "'" : ", '") + t.tables[i].name + "'";
    }
    if (rest.empty()) {
      out.ok = true;
      return out;
    }
    // The remaining tables on what the row shards left free.
    task sub;
    sub.name = t.name;
    sub.cluster = t.cluster;
    sub.batch_size = t.batch_size;
    sub.optimizer_state = t.optimizer_state;
    for (std::size_t d = 0; d < devices; ++d)
      sub.cluster.devices[d].memory_bytes = detail::free_bytes(t, st, d);
    std::vector<std::size_t> index;        // sub-task table -> table of t
    std::vector<std::int32_t> offset;      // ... and its first column there
    std::vector<std::int64_t> row_offset;  // ... and its first row
    std::string cut_names;
    for (const std::size_t i : rest) {
      if (const std::uint32_t pieces = row_cut_of(i); pieces > 1) {
        const auto ranges = range_partition::even(t.tables[i].rows, pieces);
        for (std::uint32_t k = 0; k < ranges.shards(); ++k) {
          const std::int64_t begin = ranges.row_begin(k);
          const std::int64_t end = ranges.row_end(k);
          table_spec piece = piece_table(
              t, shard{static_cast<std::uint32_t>(i), 0, 0, t.tables[i].dim, begin, end, false});
          piece.name += " rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
          sub.tables.push_back(std::move(piece));
          index.push_back(i);
          offset.push_back(0);
          row_offset.push_back(begin);
        }
        cut_names += (cut_names.empty() ? "'" : ", '") + t.tables[i].name + "'";
        continue;
      }
      if (cut[i] <= 1) {
        sub.tables.push_back(t.tables[i]);
        index.push_back(i);
        offset.push_back(0);
        row_offset.push_back(0);
        continue;
      }
      for (const auto& [begin, end] : detail::column_blocks(t.tables[i].dim, cut[i])) {
        table_spec block = t.tables[i];
        block.dim = end - begin;
        block.name += " columns [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
        sub.tables.push_back(std::move(block));
        index.push_back(i);
        offset.push_back(begin);
        row_offset.push_back(0);
      }
    }
    const detail::in_full_task<Constraint> sub_rule(rule, t, index, offset, row_offset, st);
    search_result r = inner.search(sub, model, sub_rule, score, seed);
    out.evaluations = r.evaluations;
    out.cache_lookups = r.cache_lookups;
    out.cache_hits = r.cache_hits;
    out.made_by = std::move(r.made_by);
    if (!r.ok) {
      const auto copies = static_cast<std::size_t>(
          std::count(replicated.begin(), replicated.end(), std::uint8_t{1}));
      std::string done;
      if (copies > 0) done = "replicating " + std::to_string(copies) + " tables data-parallel";
      if (!split_names.empty()) {
        done += (done.empty() ? "splitting " : " and splitting ") + split_names + " by rows";
      }
      if (cutting)
        done += (done.empty() ? "" : " and ") + std::string(
                                                    "cutting tables with "
                                                    "min_shards into column blocks");
      if (!cut_names.empty())
        done += (done.empty() ? "cutting " : " and cutting ") + cut_names + " by rows (by cost)";
      out.failure =
          "after " + done +
          ", the other tables do not fit (table indices below count only those): " + r.failure;
      return out;
    }
    for (auto s : r.placement.shards) {
      const std::int32_t shift = offset[s.table];
      const std::int64_t row_shift = row_offset[s.table];
      s.table = static_cast<std::uint32_t>(index[s.table]);
      s.col_begin += shift;
      s.col_end += shift;
      s.row_begin += row_shift;
      s.row_end += row_shift;
      out.placement.shards.push_back(s);
    }
    if (cut_any) {
      out.evaluations +=
          detail::merge_abutting_rows_if_no_costlier(t, model, rule, score, row_cut, out.placement);
    }
    out.ok = true;
    return out;
  }
};

// split_oversized's settings without its inner searcher (behind_stage).
struct stage_settings {
  std::int64_t hot_rows = 0;
  bool split_rows = true;
  data_parallel_options data_parallel{};
  row_layout layout = row_layout::by_cost;
  bool rows_by_cost = false;
};

// The searcher behind_stage makes of `Inner`: split_oversized<Inner>, and for
// a portfolio (best_of) the portfolio of its members, each behind its own
// stage.
template <class Inner>
struct staged_searcher {
  using type = split_oversized<Inner>;
};
template <class... Members>
struct staged_searcher<best_of<Members...>> {
  using type = best_of<typename staged_searcher<Members>::type...>;
};
template <class Inner>
using staged_searcher_t = typename staged_searcher<Inner>::type;

// `s` behind the row-split stage with `settings`. A best_of's members each go
// behind their own, so that the portfolio compares whole plans of the
// caller's task (best_of.hpp): behind one stage it would compare the plans of
// the stage's sub-task, whose costs leave the row pieces out.
template <class Inner>
staged_searcher_t<Inner> behind_stage(const Inner& s, const stage_settings& settings) {
  if constexpr (is_best_of<Inner>) {
    return std::apply(
        [&](const auto&... m) { return staged_searcher_t<Inner>{{behind_stage(m, settings)...}}; },
        s.searchers);
  } else {
    return {.inner = s,
            .hot_rows = settings.hot_rows,
            .split_rows = settings.split_rows,
            .data_parallel = settings.data_parallel,
            .layout = settings.layout,
            .rows_by_cost = settings.rows_by_cost};
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
