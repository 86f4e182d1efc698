#pragma once
// plan: a list of shards, each a (column range x row range) block of one table
// on one device. Table-wise is one shard per table; column-wise splits the
// columns; row-wise splits the rows; a replica is a declared extra copy;
// data-parallel is a whole copy of the table on every device, each serving
// its device's share of the batch (TorchRec's DATA_PARALLEL: no all-to-all of
// the pooled outputs, an all-reduce of the table's gradient instead).

#include <algorithm>
#include <compare>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/storage.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct shard {
  std::uint32_t table = 0;
  std::uint32_t device = 0;
  std::int32_t col_begin = 0;  // columns [col_begin, col_end)
  std::int32_t col_end = 0;
  std::int64_t row_begin = 0;  // rows [row_begin, row_end)
  std::int64_t row_end = 0;
  bool replica = false;
  // A whole-table copy of a data-parallel table (one on every device; see the
  // header comment). Its lookups are the table's over batch_size / devices.
  bool data_parallel = false;

  constexpr std::int32_t cols() const noexcept { return col_end - col_begin; }
  constexpr std::int64_t rows() const noexcept { return row_end - row_begin; }

  friend bool operator==(const shard&, const shard&) = default;
};

// The whole of table `index` on `device`.
inline shard whole_table(const task& t, std::size_t index, std::size_t device) {
  const auto& spec = t.tables[index];
  return shard{static_cast<std::uint32_t>(index),
               static_cast<std::uint32_t>(device),
               0,
               spec.dim,
               0,
               spec.rows,
               false};
}

// The table a piece runs as: a column piece is the table with fewer columns
// (NeuroShard's table augmentation makes that valid), a row piece holds its
// share of the rows and, under uniform hashing, of the lookups. A
// data-parallel copy runs its device's 1/D of the batch: as a table of the
// task's batch it is one with 1/D of the pooling factor (the same lookups; the
// pooled output written for all bags, not 1/D of them: the learned models and
// the meters see one batch size per task). The meters and the learned cost
// models price a piece through it.
inline table_spec piece_table(const task& t, const shard& s) {
  table_spec spec = t.tables[s.table];
  const auto all_rows = spec.rows;
  spec.dim = static_cast<std::int32_t>(s.cols());
  spec.rows = s.rows();
  spec.pooling_factor *= static_cast<double>(s.rows()) / static_cast<double>(all_rows);
  if (s.data_parallel) spec.pooling_factor /= static_cast<double>(t.cluster.size());
  return spec;
}

// The bytes of a data-parallel table's gradient all-reduced per step: the
// dense gradient of its weights, in their dtype (as DDP reduces a parameter's
// gradient).
inline std::uint64_t data_parallel_gradient_bytes(const table_spec& spec) {
  return checked_mul(checked_mul(static_cast<std::uint64_t>(spec.rows),
                                 static_cast<std::uint64_t>(spec.dim), "gradient bytes"),
                     dtype_bytes(spec.weight_dtype), "gradient bytes");
}

// HBM bytes of a shard, by its table's tier (core/storage.hpp itemises them):
// hbm, its weights and optimizer state; uvm_caching, its cache's slots for
// its rows (each a row copy plus the slot's state) and the per-row cache
// state, at the default (LRU) policy; host, none. Every memory check counts
// these. The batch's buffers are not charged here, in any tier.
inline std::uint64_t shard_bytes(const task& t, const shard& s) {
  const table_spec& spec = t.tables[s.table];
  if (spec.placement.tier == memory_tier::hbm) [[likely]] {
    return block_bytes(static_cast<std::uint64_t>(s.rows()), static_cast<std::uint64_t>(s.cols()),
                       spec.weight_dtype, t.optimizer_state);
  }
  if (spec.placement.tier == memory_tier::host) return 0;
  constexpr auto policy = storage_options{}.policy;
  const std::uint64_t slots = device_rows(spec.placement, s.rows());
  return checked_add(
      checked_mul(slots,
                  cache_slot_bytes(static_cast<std::int32_t>(s.cols()), spec.weight_dtype, policy),
                  "cache bytes"),
      cache_row_state_bytes(s.rows(), policy), "cache bytes");
}

// Host DRAM bytes of a shard: none in hbm; its weights and optimizer state in
// uvm_caching (the cache copies rows, it does not move them) and host.
inline std::uint64_t shard_dram_bytes(const task& t, const shard& s) {
  const table_spec& spec = t.tables[s.table];
  if (spec.placement.tier == memory_tier::hbm) return 0;
  return block_bytes(static_cast<std::uint64_t>(s.rows()), static_cast<std::uint64_t>(s.cols()),
                     spec.weight_dtype, t.optimizer_state);
}

struct plan {
  std::vector<shard> shards{};

  friend bool operator==(const plan&, const plan&) = default;
};

// One shard per table, table i on device assignment[i].
inline plan table_wise_plan(const task& t, std::span<const std::size_t> assignment) {
  if (assignment.size() != t.tables.size()) {
    detail::fail("assignment.size", assignment.size(),
                 "one device per table (" + std::to_string(t.tables.size()) + ")");
  }
  plan p;
  p.shards.reserve(assignment.size());
  for (std::size_t i = 0; i < assignment.size(); ++i)
    p.shards.push_back(whole_table(t, i, assignment[i]));
  return p;
}

// Where a table's placed pieces are, as far as a constraint needs it (user
// rules: co-location, anti-affinity, max shards): how many
// pieces, and the device of the first one with how many of them are there.
// All pieces are on `home` iff on_home == pieces; after pieces left `home`
// (placement_state::unplace) the record may no longer know where the others
// are, and then says "spread" — a rule reading it refuses rather than guesses.
// `seen`: the devices below 64 that received a piece since the record was
// last empty (bit d: device d), a superset of where the pieces are, so that a
// table spread over some devices is known to be absent from the others.
struct table_placement {
  static constexpr std::uint32_t none = 0xFFFFFFFFu;
  std::uint32_t home = none;
  std::uint32_t pieces = 0;
  std::uint32_t on_home = 0;
  std::uint64_t seen = 0;

  // No piece placed, or every piece on device d.
  constexpr bool only_on(std::uint32_t d) const noexcept {
    return pieces == 0 || (on_home == pieces && home == d);
  }
  // A piece may be on device d: exact unless the record says "spread", where
  // it answers by `seen` (true for a device it does not track: the safe
  // answer for a rule that keeps tables apart).
  constexpr bool maybe_on(std::uint32_t d) const noexcept {
    if (pieces == 0) return false;
    if (on_home == pieces) return home == d;
    return d >= 64 || ((seen >> d) & 1u) != 0;
  }

  friend bool operator==(const table_placement&, const table_placement&) = default;
};

// Per-device running totals while a searcher places shards, and per table
// where its pieces went (table_placement). A state made for a task
// (placement_state(t)) holds a record for each of its tables from the start,
// so a rule may read st.tables[i] before anything is placed; one made for a
// device count sizes it on the first placement (of_table() reads either).
// keep_table_record(false, ...) stops the record (tables stays empty): for a
// searcher whose constraint promises not to read it (reads_table_record,
// concepts/constraint.hpp), to which the record is only cost.
struct placement_state {
  std::vector<std::uint64_t> memory_bytes;
  std::vector<std::int64_t> dim_sum;  // sum of the columns held (drives all-to-all volume;
                                      // data-parallel copies send none)
  std::vector<std::uint32_t> shard_count;
  std::vector<std::uint64_t> dram_bytes;  // host DRAM: shard_dram_bytes of the tables off hbm
  std::vector<table_placement> tables;    // by table index; empty until a piece is placed
  bool records_tables = true;

  placement_state() = default;
  explicit placement_state(std::size_t devices)
      : memory_bytes(devices, 0)
      , dim_sum(devices, 0)
      , shard_count(devices, 0)
      , dram_bytes(devices, 0) {}
  // Every device of t empty, and an empty record for each of t's tables.
  explicit placement_state(const task& t) : placement_state(t.cluster.size()) {
    tables.resize(t.tables.size());
  }

  // Starts (sized to the task's `task_tables`, every record empty) or stops
  // (empty) the per-table record of a state with nothing placed yet.
  void keep_table_record(bool on, std::size_t task_tables) {
    records_tables = on;
    tables.assign(on ? task_tables : 0, table_placement{});
  }

  void place(const task& t, const shard& s) {
    memory_bytes[s.device] =
        checked_add(memory_bytes[s.device], shard_bytes(t, s), "device memory");
    dim_sum[s.device] += s.data_parallel ? 0 : s.cols();
    ++shard_count[s.device];
    if (t.tables[s.table].placement.tier != memory_tier::hbm) [[unlikely]] {
      dram_bytes[s.device] =
          checked_add(dram_bytes[s.device], shard_dram_bytes(t, s), "device host memory");
    }
    if (records_tables) note_placed(t.tables.size(), s.table, s.device);
  }

  // The inverse of place(t, s) on the per-device sums (exactly: integers),
  // `bytes` = shard_bytes(t, s); the table's record as table_placement says.
  // It leaves dram_bytes as they are: a shard of a table off hbm takes unplace(t, s).
  void unplace(const shard& s, std::uint64_t bytes) {
    memory_bytes[s.device] -= bytes;
    dim_sum[s.device] -= s.data_parallel ? 0 : s.cols();
    --shard_count[s.device];
    if (records_tables) note_removed(s.table, s.device);
  }
  void unplace(const task& t, const shard& s) {
    unplace(s, shard_bytes(t, s));
    if (t.tables[s.table].placement.tier != memory_tier::hbm) [[unlikely]]
      dram_bytes[s.device] -= shard_dram_bytes(t, s);
  }

  // The per-table record alone, for searchers that keep the per-device sums
  // themselves (the grid search adds bytes it computed once per piece).
  void note_placed(std::size_t task_tables, std::uint32_t table, std::uint32_t device) {
    if (tables.size() < task_tables) tables.resize(task_tables);
    auto& r = tables[table];
    if (r.pieces == 0) {
      r.home = device;
      r.on_home = 0;
    }
    ++r.pieces;
    if (r.home == device) ++r.on_home;
    if (device < 64) r.seen |= std::uint64_t{1} << device;
  }
  void note_removed(std::uint32_t table, std::uint32_t device) {
    auto& r = tables[table];
    --r.pieces;
    if (r.home == device && r.on_home > 0) --r.on_home;
    if (r.pieces == 0) r = table_placement{};
  }

  // The record of `table` (an empty one before any placement).
  table_placement of_table(std::size_t table) const noexcept {
    return table < tables.size() ? tables[table] : table_placement{};
  }
};

inline placement_state state_of(const task& t, const plan& p) {
  placement_state st(t);
  for (const auto& s : p.shards)
    st.place(t, s);
  return st;
}

struct plan_check {
  std::int32_t dim_multiple = 0;  // column pieces must be multiples of this (0: no rule)
  bool memory = true;             // every device within its memory_bytes (and dram_bytes, if set)
};

namespace detail {

// A shard entering (at its col_begin) or leaving (at its col_end) the sweep.
struct column_event {
  std::int32_t col = 0;
  bool enters = false;  // leaving sorts first: ranges are half-open
  std::size_t shard = 0;

  friend auto operator<=>(const column_event&, const column_event&) = default;
};

// Two of the shards `ids` (valid ranges) whose blocks share a cell, as
// (lower index, higher index), or none; O(n log n). A sweep over the columns
// keeps the row ranges of the shards that span the current column, disjoint
// while no overlap has been found, ordered by row_begin; a shard entering
// overlaps one of them iff it overlaps a neighbour of its row_begin there.
inline std::optional<std::pair<std::size_t, std::size_t>> overlapping_pair(
    std::span<const shard> shards, std::span<const std::size_t> ids,
    std::vector<column_event>& events) {
  events.clear();
  events.reserve(2 * ids.size());
  for (const auto id : ids) {
    events.push_back({shards[id].col_begin, true, id});
    events.push_back({shards[id].col_end, false, id});
  }
  std::sort(events.begin(), events.end());
  std::map<std::int64_t, std::size_t> active;  // row_begin -> shard
  const auto found = [](std::size_t a, std::size_t b) {
    return std::optional{std::pair{std::min(a, b), std::max(a, b)}};
  };
  for (const auto& e : events) {
    const auto& s = shards[e.shard];
    if (!e.enters) {
      active.erase(s.row_begin);
      continue;
    }
    const auto next = active.lower_bound(s.row_begin);
    if (next != active.end() && shards[next->second].row_begin < s.row_end)
      return found(e.shard, next->second);
    if (next != active.begin()) {
      const auto prev = std::prev(next);
      if (shards[prev->second].row_end > s.row_begin) return found(e.shard, prev->second);
    }
    active.emplace_hint(next, s.row_begin, e.shard);
  }
  return std::nullopt;
}

}  // namespace detail

// One thing wrong with a plan: its kind, whom it concerns ("table 1 't1'",
// "device 2 'cuda:2'", "shard 4" where the shard names no table of the task)
// and what is wrong, as the embplan::error of validate() says it ("field
// 'shards[4].device' = 9: expected a device index below 4").
enum class plan_problem_kind : std::uint8_t {
  table_index,   // a shard names no table of the task
  device_index,  // a shard names no device of the task
  shape,         // an empty range, or one beyond the table
  dim_multiple,  // a column piece that is not a multiple of plan_check::dim_multiple
  uncovered,     // a table no (non-replica) shard covers
  overlap,       // a table's cells covered twice
  partial,       // a table's cells not all covered
  memory,        // a device holding more than its memory_bytes
  constraint,    // a shard the Constraint refuses (check_plan.hpp)
  data_parallel  // a data-parallel table not exactly one whole copy per device
};

struct plan_problem {
  plan_problem_kind kind = plan_problem_kind::table_index;
  std::string subject{};
  std::string message{};

  friend bool operator==(const plan_problem&, const plan_problem&) = default;
};

// "table 1 't1': field 'shards[4].device' = 9: expected a device index below 4"
inline std::string to_string(const plan_problem& p) {
  return p.subject + ": " + p.message;
}

// "table 1 't1'" ("table 1" for an unnamed table).
inline std::string table_subject(const task& t, std::size_t table) {
  std::string out = "table " + std::to_string(table);
  if (table < t.tables.size() && !t.tables[table].name.empty()) {
    out += " '" + t.tables[table].name + "'";
  }
  return out;
}

// "device 2 'cuda:2'" ("device 2" for an unnamed device).
inline std::string device_subject(const task& t, std::size_t device) {
  std::string out = "device " + std::to_string(device);
  if (device < t.cluster.size() && !t.cluster.devices[device].name.empty()) {
    out += " '" + t.cluster.devices[device].name + "'";
  }
  return out;
}

// "table 2 't2' columns [0, 16) rows [0, 1000) (replica) on device 1": a
// shard in a message.
inline std::string describe_shard(const task& t, const shard& s) {
  const auto range = [](auto a, auto b) {
    return "[" + std::to_string(a) + ", " + std::to_string(b) + ")";
  };
  return table_subject(t, s.table) + " columns " + range(s.col_begin, s.col_end) + " rows " +
         range(s.row_begin, s.row_end) + (s.replica ? " (replica)" : "") +
         (s.data_parallel ? " (data-parallel copy)" : "") + " on device " +
         std::to_string(s.device);
}

// How a table is split, by TorchRec's ShardingType names, from its non-replica
// pieces in a valid plan: "table_wise" (one piece), "column_wise" (every piece
// holds all rows), "row_wise" (every piece holds all columns), else
// "grid_shard"; "data_parallel" for a data-parallel table's copies. The
// TorchRec export and the plan report both name it so.
inline std::string_view sharding_type_of(const table_spec& spec,
                                         std::span<const shard* const> pieces) noexcept {
  if (!pieces.empty() && pieces.front()->data_parallel) return "data_parallel";
  if (pieces.size() == 1) return "table_wise";
  bool all_rows = true;
  bool all_cols = true;
  for (const shard* s : pieces) {
    all_rows = all_rows && s->row_begin == 0 && s->row_end == spec.rows;
    all_cols = all_cols && s->col_begin == 0 && s->col_end == spec.dim;
  }
  if (all_rows) return "column_wise";
  if (all_cols) return "row_wise";
  return "grid_shard";
}

// The same, knowing the hosts (sharding types, docs/sharding.md): on a cluster of
// several hosts, a table cut by columns whose pieces all sit in one host is
// "table_column_wise", one cut by rows in one host "table_row_wise" (its
// partial sums are reduced inside the host before they cross the network:
// table_row_wise_traffic, cost/collectives.hpp); a table cut both ways is
// "grid_shard" (column blocks, each cut by rows inside a host, are what
// TorchRec's grid sharding places). On one host the names are those of the
// overload above.
inline std::string_view sharding_type_of(const topology& topo, const table_spec& spec,
                                         std::span<const shard* const> pieces) noexcept {
  const std::string_view type = sharding_type_of(spec, pieces);
  if (!spans_hosts(topo) || pieces.size() < 2 || (type != "column_wise" && type != "row_wise"))
    return type;
  for (const shard* s : pieces)
    if (topo.host_of(s->device) != topo.host_of(pieces.front()->device)) return type;
  return type == "column_wise" ? "table_column_wise" : "table_row_wise";
}

// A shard's columns and rows: non-empty ranges inside its table.
inline bool legal_shape(const table_spec& spec, const shard& s) noexcept {
  return s.col_begin >= 0 && s.col_end <= spec.dim && s.col_begin < s.col_end && s.row_begin >= 0 &&
         s.row_end <= spec.rows && s.row_begin < s.row_end;
}

// A shard that names a table and a device of `t` and has a legal shape: one
// that can be placed and priced.
inline bool well_formed(const task& t, const shard& s) noexcept {
  return s.table < t.tables.size() && s.device < t.cluster.size() &&
         legal_shape(t.tables[s.table], s);
}

namespace detail {

inline std::string to_decimal(uint128 v) {
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return out;
}

// The problems of data-parallel table `ti`, whose copies are shards `copies`
// and whose other (non-replica) pieces are `pieces`: a copy that is not the
// whole table, a device with no copy or with two, any other piece.
template <class Report>
void data_parallel_problems(const task& t, const plan& p, std::size_t ti,
                            std::span<const std::size_t> pieces,
                            std::span<const std::size_t> copies, Report& report) {
  using kind = plan_problem_kind;
  const auto& spec = t.tables[ti];
  const auto subject = table_subject(t, ti);
  const auto where = path("tables", ti);
  if (!pieces.empty()) {
    report(kind::data_parallel, subject, where, to_display(spec.name),
           "a data-parallel table held by its copies alone, but shard " +
               std::to_string(pieces.front()) + " is a piece of it");
  }
  if (spec.placement.tier != memory_tier::hbm) {
    report(kind::data_parallel, subject, path(where, "tier"),
           to_display(to_string(spec.placement.tier)),
           "hbm for a data-parallel table (TorchRec runs one with a dense kernel)");
  }
  std::vector<std::size_t> copy_on(t.cluster.size(), 0);
  for (const auto id : copies) {
    const auto& s = p.shards[id];
    if (s.col_begin != 0 || s.col_end != spec.dim || s.row_begin != 0 || s.row_end != spec.rows) {
      report(kind::data_parallel, subject, path(path("shards", id), "data_parallel"), "true",
             "a data-parallel copy of the whole table (columns [0, " + std::to_string(spec.dim) +
                 "), rows [0, " + std::to_string(spec.rows) + "))");
    }
    if (s.device < copy_on.size()) ++copy_on[s.device];
  }
  for (std::size_t d = 0; d < copy_on.size(); ++d) {
    if (copy_on[d] == 1) continue;
    report(kind::data_parallel, subject, where, to_display(spec.name),
           "one data-parallel copy on every device, but " + device_subject(t, d) + " holds " +
               std::to_string(copy_on[d]));
    break;
  }
}

// Every problem of plan `p` for task `t` under `check`, each passed to
// found(plan_problem&&) as it is seen: per shard its references, ranges and
// column multiple; then per table its coverage (each cell exactly once by the
// non-replica shards; skipped for a table with a shard of illegal shape, which
// is reported already); then per device its memory (shards that name a table
// and a device of the task and have a legal shape). validate() throws the
// first; plan_problems() collects them all.
template <class Found>
void for_each_plan_problem(const task& t, const plan& p, plan_check check, Found&& found) {
  using kind = plan_problem_kind;
  const std::size_t tables = t.tables.size();
  const std::size_t devices = t.cluster.size();
  const auto report = [&](kind k, std::string subject, std::string_view field,
                          std::string_view shown, std::string_view expected) {
    found(plan_problem{k, std::move(subject), field_message(field, shown, expected)});
  };
  std::vector<std::vector<std::size_t>> by_table(tables);
  std::vector<std::uint8_t> misshapen(tables, 0);  // tables with a shard of illegal shape
  std::vector<std::vector<std::size_t>> dp_by_table(tables);  // data-parallel copies
  for (std::size_t i = 0; i < p.shards.size(); ++i) {
    const auto& s = p.shards[i];
    const auto at = path("shards", i);
    if (s.table >= tables) {
      report(kind::table_index, "shard " + std::to_string(i), path(at, "table"),
             to_display(s.table), "a table index below " + std::to_string(tables));
      continue;
    }
    const auto subject = table_subject(t, s.table);
    if (s.device >= devices) {
      report(kind::device_index, subject, path(at, "device"), to_display(s.device),
             "a device index below " + std::to_string(devices));
    }
    const auto& spec = t.tables[s.table];
    if (s.col_begin < 0 || s.col_end > spec.dim || s.col_begin >= s.col_end) {
      report(kind::shape, subject, path(at, "columns"),
             to_display("[" + std::to_string(s.col_begin) + ", " + std::to_string(s.col_end) + ")"),
             "a non-empty range inside [0, " + std::to_string(spec.dim) + ")");
      misshapen[s.table] = 1;
    }
    if (s.row_begin < 0 || s.row_end > spec.rows || s.row_begin >= s.row_end) {
      report(kind::shape, subject, path(at, "rows"),
             to_display("[" + std::to_string(s.row_begin) + ", " + std::to_string(s.row_end) + ")"),
             "a non-empty range inside [0, " + std::to_string(spec.rows) + ")");
      misshapen[s.table] = 1;
    }
    if (check.dim_multiple > 0 && s.cols() % check.dim_multiple != 0) {
      report(kind::dim_multiple, subject, path(at, "columns"), to_display(s.cols()),
             "a multiple of " + std::to_string(check.dim_multiple));
    }
    if (s.data_parallel) {
      if (s.replica) {
        report(kind::data_parallel, subject, path(at, "replica"), "true",
               "false for a data-parallel copy (each copy is a whole table)");
      }
      dp_by_table[s.table].push_back(i);
    } else if (!s.replica) {
      by_table[s.table].push_back(i);
    }
  }
  std::vector<column_event> events;
  for (std::size_t ti = 0; ti < tables; ++ti) {
    if (misshapen[ti] != 0) continue;
    const auto& spec = t.tables[ti];
    const auto& ids = by_table[ti];
    const auto where = path("tables", ti);
    const auto name = to_display(spec.name);
    if (!dp_by_table[ti].empty()) {
      data_parallel_problems(t, p, ti, ids, dp_by_table[ti], report);
      continue;
    }
    if (ids.empty()) {
      report(kind::uncovered, table_subject(t, ti), where, name,
             "a table covered by at least one shard");
      continue;
    }
    uint128 area = 0;
    for (const auto id : ids) {
      const auto& x = p.shards[id];
      area += static_cast<uint128>(x.rows()) * static_cast<uint128>(x.cols());
    }
    if (const auto pair = overlapping_pair(p.shards, ids, events)) {
      report(kind::overlap, table_subject(t, ti), where, name,
             "each cell covered once, but shards " + std::to_string(pair->first) + " and " +
                 std::to_string(pair->second) + " overlap");
      continue;
    }
    const auto full = static_cast<uint128>(spec.rows) * static_cast<uint128>(spec.dim);
    if (area != full) {
      report(kind::partial, table_subject(t, ti), where, name,
             "shards that cover all rows x columns (some are missing: " + to_decimal(area) +
                 " of " + std::to_string(spec.rows) + " x " + std::to_string(spec.dim) +
                 " cells covered)");
    }
  }
  if (!check.memory) return;
  placement_state st(devices);
  st.records_tables = false;
  for (const auto& s : p.shards)
    if (well_formed(t, s)) st.place(t, s);
  for (std::size_t d = 0; d < devices; ++d) {
    if (st.memory_bytes[d] > t.cluster.devices[d].memory_bytes) {
      report(kind::memory, device_subject(t, d), path("devices", d) + ".memory_bytes",
             to_display(st.memory_bytes[d]),
             "at most the capacity " + std::to_string(t.cluster.devices[d].memory_bytes));
    }
    // Host DRAM, where the device's is limited (dram_bytes 0: not limited).
    const std::uint64_t dram = t.cluster.devices[d].dram_bytes;
    if (dram != 0 && st.dram_bytes[d] > dram) {
      report(kind::memory, device_subject(t, d), path("devices", d) + ".dram_bytes",
             to_display(st.dram_bytes[d]), "at most the capacity " + std::to_string(dram));
    }
  }
}

}  // namespace detail

// Validates a plan against its task: references in range, each table's rows x
// columns covered exactly once by non-replica shards (replicas must lie inside
// the table), column pieces multiples of check.dim_multiple, memory within
// caps. Throws the first problem (detail::for_each_plan_problem's order).
inline void validate(const task& t, const plan& p, plan_check check = {}) {
  detail::for_each_plan_problem(t, p, check,
                                [](plan_problem&& x) { throw error(std::move(x.message)); });
}

// Every problem validate() would throw the first of; empty: the plan is valid.
inline std::vector<plan_problem> plan_problems(const task& t, const plan& p,
                                               plan_check check = {}) {
  std::vector<plan_problem> out;
  detail::for_each_plan_problem(t, p, check,
                                [&](plan_problem&& x) { out.push_back(std::move(x)); });
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI
