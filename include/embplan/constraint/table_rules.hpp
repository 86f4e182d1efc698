#pragma once
// table_rules: the user's per-table constraints, a run-time value built from
// user_constraints against one task: devices / hosts a table's pieces may go
// to, the sharding kinds a table may be placed as, max_shards and min_shards,
// dtype and tier (applied to the task by apply_table_rules before planning),
// colocate groups (all pieces on one device) and separate groups (no two
// tables of a group on one device).
// Invariants: admits() checks every rule for each piece a searcher proposes,
// from placement_state's per-table record (reads_table_record() says so when
// any rule is given); where the record cannot tell (pieces moved away by a
// local search) it refuses rather than guesses; min_shards is a rule of the
// plan, counted by check_plan and cut for by the stage. Validated at
// construction (unknown tables, devices or hosts, contradictory groups: an
// embplan::error naming field, value and expectation); immutable and shared
// between copies, so planners stay callable from several threads; an empty
// table_rules costs admits() one pointer test.
// Design notes: docs/design/constraints.md.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

enum class sharding_kind : std::uint8_t {
  table_wise = 1,
  column_wise = 2,
  row_wise = 4,
  data_parallel = 8
};

inline constexpr sharding_kind all_sharding_kinds[] = {
    sharding_kind::table_wise, sharding_kind::column_wise, sharding_kind::row_wise,
    sharding_kind::data_parallel};

inline constexpr std::string_view to_string(sharding_kind k) noexcept {
  switch (k) {
    case sharding_kind::table_wise:
      return "table_wise";
    case sharding_kind::column_wise:
      return "column_wise";
    case sharding_kind::row_wise:
      return "row_wise";
    case sharding_kind::data_parallel:
      return "data_parallel";
  }
  return "?";
}

// "table_wise" | "column_wise" | "row_wise" | "data_parallel"; anything else
// names `field`.
inline sharding_kind parse_sharding_kind(std::string_view text, std::string_view field) {
  for (const auto k : all_sharding_kinds)
    if (text == to_string(k)) return k;
  detail::fail(field, text, "one of table_wise, column_wise, row_wise, data_parallel");
}

// The kind of piece `s` is: data_parallel for a data-parallel copy; row_wise
// when it holds some of the rows (or is a replica), else column_wise when it
// holds some of the columns, else table_wise.
inline sharding_kind kind_of(const task& t, const shard& s) noexcept {
  if (s.data_parallel) return sharding_kind::data_parallel;
  const auto& spec = t.tables[s.table];
  if (s.replica || s.row_begin != 0 || s.row_end != spec.rows) return sharding_kind::row_wise;
  if (s.col_begin != 0 || s.col_end != spec.dim) return sharding_kind::column_wise;
  return sharding_kind::table_wise;
}

// The kinds a rule must allow for piece `s`: kind_of(t, s), and for a grid
// piece (some rows and some columns: grid_shard) both row_wise and
// column_wise.
inline std::uint8_t kinds_needed(const task& t, const shard& s) noexcept {
  const auto kind = static_cast<std::uint8_t>(kind_of(t, s));
  const auto& spec = t.tables[s.table];
  if (kind == static_cast<std::uint8_t>(sharding_kind::row_wise) &&
      (s.col_begin != 0 || s.col_end != spec.dim)) {
    return kind | static_cast<std::uint8_t>(sharding_kind::column_wise);
  }
  return kind;
}

// One table's rules; empty lists mean "any".
struct table_rule {
  std::size_t table = 0;                      // index in the task
  std::vector<std::size_t> devices{};         // allowed devices (one: pinned)
  std::vector<std::size_t> hosts{};           // allowed hosts (with devices: both must allow)
  std::vector<sharding_kind> sharding{};      // allowed kinds of piece
  std::uint32_t max_shards = 0;               // at most this many pieces; 0: no bound
  std::uint32_t min_shards = 0;               // at least this many pieces; 0 or 1: no bound
  std::optional<dtype> weight_dtype{};        // stored as this dtype (apply_table_rules)
  std::optional<tier_placement> placement{};  // in this memory tier (apply_table_rules)
  std::string where{};                        // its path in messages; "": <where>.tables[i]
};

struct user_constraints {
  std::vector<table_rule> tables{};
  std::vector<std::vector<std::size_t>> colocate{};  // each: tables on one device
  std::vector<std::vector<std::size_t>> separate{};  // each: tables on distinct devices

  bool empty() const noexcept { return tables.empty() && colocate.empty() && separate.empty(); }
};

// Task `t` with each table a rule of `c` gives a dtype stored as that dtype
// (table_spec::weight_dtype) and a memory tier placed in it
// (table_spec::placement): what the planners then see, in bytes and in cost.
// Rules of tables `t` lacks are left to table_rules to name.
inline void apply_table_rules(task& t, const user_constraints& c) noexcept {
  for (const auto& rule : c.tables) {
    if (rule.table >= t.tables.size()) continue;
    if (rule.weight_dtype) t.tables[rule.table].weight_dtype = *rule.weight_dtype;
    if (rule.placement) t.tables[rule.table].placement = *rule.placement;
  }
}

namespace detail {

inline constexpr std::uint32_t no_index = 0xFFFFFFFFu;

struct table_entry {
  std::uint32_t allowed = no_index;   // offset of its device bits in rules_data::bits; none: any
  std::uint32_t colocate = no_index;  // its co-location group
  std::uint32_t separate_begin = 0;   // its anti-affinity groups: separate_of[begin, end)
  std::uint32_t separate_end = 0;
  std::uint32_t max_shards = 0;
  std::uint32_t min_shards = 0;
  std::uint8_t kinds = 15;  // allowed sharding_kind bits
  bool ruled = false;       // any rule at all (the fast path skips the rest)
};

struct rules_data {
  std::size_t tables = 0;
  std::size_t devices = 0;
  std::size_t words = 0;  // 64-bit words per allowed-device set
  std::vector<table_entry> entry;
  std::vector<std::uint64_t> bits;
  std::vector<std::vector<std::uint32_t>> colocate;
  std::vector<std::vector<std::uint32_t>> separate;
  std::vector<std::uint32_t> separate_of;
  std::size_t table_rules = 0;
  std::size_t min_shards_tables = 0;  // tables with min_shards > 1

  bool allows(const table_entry& e, std::size_t d) const noexcept {
    return e.allowed == no_index || ((bits[e.allowed + d / 64] >> (d % 64)) & 1u) != 0;
  }
};

inline std::string table_text(const task& t, std::size_t i) {
  return "table '" + t.tables[i].name + "' (index " + std::to_string(i) + ")";
}

inline std::string device_list(const rules_data& r, const table_entry& e) {
  std::string out;
  std::size_t listed = 0;
  for (std::size_t d = 0; d < r.devices; ++d) {
    if (!r.allows(e, d)) continue;
    if (++listed > 16) return out + ", ...";
    out += (out.empty() ? "" : ", ") + std::to_string(d);
  }
  return out;
}

// "pinned to device 3" / "allowed on devices 1, 2" / "allowed on any device".
inline std::string allowed_text(const rules_data& r, const table_entry& e) {
  if (e.allowed == no_index) return "allowed on any device";
  const std::string list = device_list(r, e);
  if (list.find(',') == std::string::npos) return "pinned to device " + list;
  return "allowed on devices " + list;
}

}  // namespace detail

class table_rules {
 public:
  table_rules() = default;  // empty: admits everything

  // The rules of `c` for task `t` (its tables and devices), validated; field
  // paths in errors start with `where`.
  table_rules(const task& t, const user_constraints& c, std::string_view where = "constraints") {
    if (c.empty()) return;
    data_ = build(t, c, where);
  }

  bool empty() const noexcept { return data_ == nullptr; }
  // Rules read where a table's pieces are (concepts/constraint.hpp); none
  // when empty.
  bool reads_table_record() const noexcept { return data_ != nullptr; }

  // Empty rules admit at the cost of a pointer test, inlined into a
  // searcher's step (the papers' presets carry empty rules).
  bool admits(const task& t, const placement_state& st, const shard& s) const {
    return data_ == nullptr || admits_ruled(t, st, s);
  }

  // The least number of pieces table `table` must be placed as (min_shards;
  // 0 where none is ruled). A searcher's stage (stage::staged)
  // cuts such a table into that many column blocks before the searcher runs.
  std::uint32_t min_shards(std::size_t table) const noexcept {
    if (data_ == nullptr || table >= data_->tables) return 0;
    return data_->entry[table].min_shards;
  }
  // The kinds of piece table `table` may be placed as (sharding_kind bits;
  // all four where none is ruled).
  std::uint8_t allowed_kinds(std::size_t table) const noexcept {
    if (data_ == nullptr || table >= data_->tables) return 15;
    return data_->entry[table].kinds;
  }
  // The most pieces table `table` may be placed as (max_shards; 0 where none
  // is ruled).
  std::uint32_t max_shards(std::size_t table) const noexcept {
    if (data_ == nullptr || table >= data_->tables) return 0;
    return data_->entry[table].max_shards;
  }
  // Whether a rule names table `table` (its own rule, or a co-location or
  // anti-affinity group). A table no rule names is admitted anywhere
  // without reading the state.
  bool rules_table(std::size_t table) const noexcept {
    return data_ != nullptr && table < data_->tables && data_->entry[table].ruled;
  }
  // Whether any table has a min_shards above 1.
  bool has_min_shards() const noexcept { return data_ != nullptr && data_->min_shards_tables > 0; }

  // "user constraints (2 table rules, 1 co-location group, 1 anti-affinity
  // group)"; "" when empty (all_of leaves it out of its description).
  std::string describe() const {
    if (data_ == nullptr) return {};
    const auto count = [](std::size_t n, const char* what) {
      return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
    };
    return "user constraints (" + count(data_->table_rules, "table rule") + ", " +
           count(data_->colocate.size(), "co-location group") + ", " +
           count(data_->separate.size(), "anti-affinity group") + ")";
  }

  // Why these rules leave table `table`, whole, no device in `st` ("pinned to
  // device 3, but device 3 has N bytes free and the table needs M bytes"), or
  // "" where they leave it a device with room (another rule binds).
  std::string explain(const task& t, const placement_state& st, std::size_t table) const {
    using namespace detail;
    if (data_ == nullptr || table >= data_->tables || t.tables.size() != data_->tables) return {};
    const auto& r = *data_;
    const auto& e = r.entry[table];
    if (!e.ruled) return {};
    if ((e.kinds & static_cast<std::uint8_t>(sharding_kind::table_wise)) == 0) {
      return "sharding limited to " + kinds_text(e.kinds) +
             ", so this searcher cannot place it whole";
    }
    std::string why = allowed_text(r, e);
    const auto tp = st.of_table(table);
    if (e.max_shards != 0 && tp.pieces >= e.max_shards) {
      why += ", and it already has " + std::to_string(tp.pieces) + " of at most " +
             std::to_string(e.max_shards) + " pieces";
    }
    if (e.colocate != no_index) {
      for (const auto m : r.colocate[e.colocate]) {
        const auto mp = st.of_table(m);
        if (m == table || mp.pieces == 0) continue;
        why += ", co-located with " + table_text(t, m) +
               (mp.on_home == mp.pieces ? ", which is on device " + std::to_string(mp.home)
                                        : ", which is spread over several devices");
        break;
      }
    }
    for (std::uint32_t g = e.separate_begin; g < e.separate_end; ++g) {
      for (const auto m : r.separate[r.separate_of[g]]) {
        const auto mp = st.of_table(m);
        if (m == table || mp.pieces == 0) continue;
        why += ", kept apart from " + table_text(t, m) +
               (mp.on_home == mp.pieces ? " on device " + std::to_string(mp.home)
                                        : " (spread over several devices)");
      }
    }
    const std::uint64_t need = table_bytes(t.tables[table], t.optimizer_state);
    std::size_t candidates = 0;
    std::size_t roomiest = 0;
    std::uint64_t most_free = 0;
    for (std::size_t d = 0; d < r.devices; ++d) {
      if (!admits(t, st, whole_table(t, table, d))) continue;
      const std::uint64_t cap = t.cluster.devices[d].memory_bytes;
      const std::uint64_t free = st.memory_bytes[d] < cap ? cap - st.memory_bytes[d] : 0;
      if (free >= need) return {};  // the rules leave it a device with room
      if (candidates++ == 0 || free > most_free) {
        most_free = free;
        roomiest = d;
      }
    }
    if (candidates == 0) return why + ", which leaves it no device";
    const std::string free_text = std::to_string(most_free) + " bytes free and the table needs " +
                                  std::to_string(need) + " bytes";
    if (candidates == 1) {
      return why + ", but device " + std::to_string(roomiest) + " has " + free_text;
    }
    return why + ", but of the " + std::to_string(candidates) +
           " devices these rules leave, the roomiest (device " + std::to_string(roomiest) +
           ") has " + free_text;
  }

  // Which of these rules forbids table `table` to be split by rows over the
  // `devices_needed` devices its bytes need at least ("max_shards 1 allows at
  // most 1 piece, and ..."), or "" where none does (memory binds). The stage
  // names it when a row split fails (stage/staged.hpp).
  std::string explain_split(const task& t, std::size_t table, std::size_t devices_needed) const {
    using namespace detail;
    if (data_ == nullptr || table >= data_->tables || t.tables.size() != data_->tables) return {};
    const auto& r = *data_;
    const auto& e = r.entry[table];
    if (!e.ruled) return {};
    const std::string needs =
        "a row split needs at least " + std::to_string(devices_needed) + " devices for its bytes";
    if ((e.kinds & static_cast<std::uint8_t>(sharding_kind::row_wise)) == 0)
      return "sharding limited to " + kinds_text(e.kinds) + ", which excludes row_wise";
    if (e.max_shards != 0 && e.max_shards < devices_needed) {
      return "max_shards " + std::to_string(e.max_shards) + " allows at most " +
             std::to_string(e.max_shards) + (e.max_shards == 1 ? " piece" : " pieces") + ", but " +
             needs;
    }
    if (e.colocate != no_index)
      return "co-location keeps every piece of it on one device, but " + needs;
    std::size_t allowed = 0;
    for (std::size_t d = 0; d < r.devices; ++d)
      allowed += r.allows(e, d) ? 1 : 0;
    if (allowed < devices_needed) return allowed_text(r, e) + ", but " + needs;
    return {};
  }

 private:
  // admits() with rules: the table's entry, then each kind of rule.
  bool admits_ruled(const task& t, const placement_state& st, const shard& s) const {
    const auto& r = *data_;
    if (t.tables.size() != r.tables || t.cluster.size() != r.devices) [[unlikely]]
      mismatch(t);
    const auto& e = r.entry[s.table];
    if (!e.ruled) return true;
    if (const std::uint8_t need = kinds_needed(t, s); (e.kinds & need) != need) return false;
    if (!r.allows(e, s.device)) return false;
    if (e.max_shards != 0 && st.of_table(s.table).pieces >= e.max_shards) return false;
    if (e.colocate != detail::no_index) {
      for (const auto m : r.colocate[e.colocate])
        if (!st.of_table(m).only_on(s.device)) return false;
    }
    for (std::uint32_t g = e.separate_begin; g < e.separate_end; ++g) {
      for (const auto m : r.separate[r.separate_of[g]])
        if (m != s.table && st.of_table(m).maybe_on(s.device)) return false;
    }
    return true;
  }
  using rules_data = detail::rules_data;

  static std::string kinds_text(std::uint8_t kinds) {
    std::string out;
    for (const auto k : all_sharding_kinds)
      if ((kinds & static_cast<std::uint8_t>(k)) != 0)
        out += (out.empty() ? "" : ", ") + std::string(to_string(k));
    return out;
  }

  [[noreturn]] void mismatch(const task& t) const {
    detail::fail("table_rules.task",
                 std::to_string(t.tables.size()) + " tables on " +
                     std::to_string(t.cluster.size()) + " devices",
                 "the task the rules were built for (" + std::to_string(data_->tables) +
                     " tables on " + std::to_string(data_->devices) + " devices)");
  }

  // Group g of `groups` (path `field`) as table indices, each in range and once.
  static std::vector<std::uint32_t> group_of(const task& t, const std::vector<std::size_t>& group,
                                             const std::string& field) {
    if (group.size() < 2) detail::fail(field, group.size(), "a group of at least two tables");
    std::vector<std::uint32_t> out;
    for (std::size_t k = 0; k < group.size(); ++k) {
      const std::size_t i = group[k];
      const auto at = detail::path(field, k);
      if (i >= t.tables.size()) {
        detail::fail(at, i, "a table index below " + std::to_string(t.tables.size()));
      }
      if (std::find(out.begin(), out.end(), i) != out.end()) {
        detail::fail(at, t.tables[i].name, "each table once in the group");
      }
      out.push_back(static_cast<std::uint32_t>(i));
    }
    return out;
  }

  static std::shared_ptr<const rules_data> build(const task& t, const user_constraints& c,
                                                 std::string_view where) {
    using namespace detail;
    auto r = std::make_shared<rules_data>();
    const std::size_t devices = t.cluster.size();
    r->tables = t.tables.size();
    r->devices = devices;
    r->words = (devices + 63) / 64;
    r->entry.resize(r->tables);
    r->table_rules = c.tables.size();
    const auto restrict_to = [&](table_entry& e, const std::vector<std::uint64_t>& set) {
      if (e.allowed == no_index) {
        e.allowed = static_cast<std::uint32_t>(r->bits.size());
        r->bits.insert(r->bits.end(), set.begin(), set.end());
      } else {
        for (std::size_t w = 0; w < r->words; ++w)
          r->bits[e.allowed + w] &= set[w];
      }
    };
    const auto set_of = [&](auto&& allowed) {
      std::vector<std::uint64_t> set(r->words, 0);
      for (std::size_t d = 0; d < devices; ++d)
        if (allowed(d)) set[d / 64] |= std::uint64_t{1} << (d % 64);
      return set;
    };
    const auto none_allowed = [&](const table_entry& e) {
      for (std::size_t d = 0; d < devices; ++d)
        if (r->allows(e, d)) return false;
      return true;
    };
    std::vector<std::string> rule_at(r->tables);
    for (std::size_t i = 0; i < c.tables.size(); ++i) {
      const auto& rule = c.tables[i];
      const std::string at =
          rule.where.empty() ? detail::path(detail::path(where, "tables"), i) : rule.where;
      if (rule.table >= r->tables) {
        detail::fail(detail::path(at, "table"), rule.table,
                     "a table index below " + std::to_string(r->tables));
      }
      if (!rule_at[rule.table].empty()) {
        detail::fail(detail::path(at, "table"), t.tables[rule.table].name,
                     "each table ruled once (it is also ruled at " + rule_at[rule.table] + ")");
      }
      rule_at[rule.table] = at;
      auto& e = r->entry[rule.table];
      e.ruled = true;
      for (std::size_t k = 0; k < rule.devices.size(); ++k) {
        if (rule.devices[k] >= devices) {
          detail::fail(detail::path(detail::path(at, "devices"), k), rule.devices[k],
                       "a device index below " + std::to_string(devices));
        }
      }
      const auto per_host = static_cast<std::size_t>(t.cluster.devices_per_host);
      const std::size_t hosts = (devices + per_host - 1) / per_host;
      for (std::size_t k = 0; k < rule.hosts.size(); ++k) {
        if (rule.hosts[k] >= hosts) {
          detail::fail(detail::path(detail::path(at, "hosts"), k), rule.hosts[k],
                       "a host index below " + std::to_string(hosts) + " (" +
                           std::to_string(devices) + " devices, " + std::to_string(per_host) +
                           " per host)");
        }
      }
      if (!rule.devices.empty()) {
        restrict_to(e, set_of([&](std::size_t d) {
                      return std::find(rule.devices.begin(), rule.devices.end(), d) !=
                             rule.devices.end();
                    }));
      }
      if (!rule.hosts.empty()) {
        restrict_to(e, set_of([&](std::size_t d) {
                      return std::find(rule.hosts.begin(), rule.hosts.end(), d / per_host) !=
                             rule.hosts.end();
                    }));
        if (none_allowed(e)) {
          detail::fail(detail::path(at, "hosts"), rule.hosts.front(),
                       "hosts that hold at least one of the table's allowed devices");
        }
      }
      if (!rule.sharding.empty()) {
        e.kinds = 0;
        for (const auto k : rule.sharding)
          e.kinds |= static_cast<std::uint8_t>(k);
      }
      e.max_shards = rule.max_shards;
      if (rule.min_shards > 1) {
        const auto field = detail::path(at, "min_shards");
        const std::int32_t blocks = t.tables[rule.table].dim / 4;
        if (rule.max_shards != 0 && rule.min_shards > rule.max_shards) {
          detail::fail(field, rule.min_shards,
                       "at most max_shards (" + std::to_string(rule.max_shards) + ")");
        }
        if (static_cast<std::int64_t>(rule.min_shards) > blocks) {
          detail::fail(field, rule.min_shards,
                       "at most " + std::to_string(blocks) + " for table '" +
                           t.tables[rule.table].name + "' (its " +
                           std::to_string(t.tables[rule.table].dim) +
                           " columns cut into blocks of a multiple of 4)");
        }
        if ((e.kinds & static_cast<std::uint8_t>(sharding_kind::column_wise)) == 0) {
          detail::fail(field, rule.min_shards,
                       "no minimum where sharding excludes column_wise (the pieces are column "
                       "blocks)");
        }
        e.min_shards = rule.min_shards;
        ++r->min_shards_tables;
      }
      // A rule the task does not carry: apply_table_rules was not called.
      const auto not_applied = [&](const char* key, std::string_view ruled, std::string_view has) {
        detail::fail(detail::path(at, key), ruled,
                     std::string("the task's ") + key + " of table '" + t.tables[rule.table].name +
                         "' (" + std::string(has) +
                         "): apply_table_rules(task, constraints) before planning");
      };
      const auto& spec = t.tables[rule.table];
      if (rule.weight_dtype && *rule.weight_dtype != spec.weight_dtype)
        not_applied("dtype", to_string(*rule.weight_dtype), to_string(spec.weight_dtype));
      if (rule.placement && *rule.placement != spec.placement)
        not_applied("tier", to_string(rule.placement->tier), to_string(spec.placement.tier));
    }

    const auto colocate_field = detail::path(where, "colocate");
    std::vector<std::string> group_at(r->tables);
    for (std::size_t g = 0; g < c.colocate.size(); ++g) {
      const auto at = detail::path(colocate_field, g);
      auto members = group_of(t, c.colocate[g], at);
      // The tables' allowed devices, intersected: a member pinned elsewhere
      // than another leaves the group none.
      std::vector<std::uint64_t> common(r->words, ~std::uint64_t{0});
      bool restricted = false;
      for (std::size_t k = 0; k < members.size(); ++k) {
        const auto m = members[k];
        if (!group_at[m].empty()) {
          detail::fail(detail::path(at, k), t.tables[m].name,
                       "each table in at most one co-location group (it is also in " + group_at[m] +
                           "; merge the two)");
        }
        group_at[m] = at;
        const auto& e = r->entry[m];
        if (e.allowed != no_index) {
          restricted = true;
          for (std::size_t w = 0; w < r->words; ++w)
            common[w] &= r->bits[e.allowed + w];
        }
      }
      for (const auto m : members) {
        auto& e = r->entry[m];
        e.ruled = true;
        e.colocate = static_cast<std::uint32_t>(g);
        if (restricted) restrict_to(e, common);
      }
      if (none_allowed(r->entry[members.front()])) {
        std::string pins;
        for (const auto m : members) {
          // Each member's own rule, before the group's intersection.
          if (rule_at[m].empty()) continue;
          pins += (pins.empty() ? "" : "; ") + t.tables[m].name + " ";
          pins += allowed_text_of_rule(c, m);
        }
        detail::fail(at, group_names(t, members),
                     "tables that can share a device, but no device is allowed for all of "
                     "them (" +
                         pins + ")");
      }
      r->colocate.push_back(std::move(members));
    }

    const auto separate_field = detail::path(where, "separate");
    std::vector<std::vector<std::uint32_t>> groups_of(r->tables);
    for (std::size_t g = 0; g < c.separate.size(); ++g) {
      const auto at = detail::path(separate_field, g);
      auto members = group_of(t, c.separate[g], at);
      if (members.size() > devices) {
        detail::fail(at, group_names(t, members),
                     "at most " + std::to_string(devices) +
                         " tables (one per device) in an anti-affinity group");
      }
      for (std::size_t a = 0; a < members.size(); ++a) {
        for (std::size_t b = a + 1; b < members.size(); ++b) {
          const auto& ea = r->entry[members[a]];
          const auto& eb = r->entry[members[b]];
          const std::string pair = t.tables[members[a]].name + ", " + t.tables[members[b]].name;
          if (ea.colocate != no_index && ea.colocate == eb.colocate) {
            detail::fail(at, pair,
                         "tables not also co-located (both are in " + group_at[members[a]] + ")");
          }
          const std::string pa = detail::allowed_text(*r, ea);
          if (ea.allowed != no_index && pa.starts_with("pinned") &&
              pa == detail::allowed_text(*r, eb)) {
            detail::fail(at, pair, "tables not pinned to one device (both " + pa + ")");
          }
        }
      }
      for (const auto m : members) {
        r->entry[m].ruled = true;
        groups_of[m].push_back(static_cast<std::uint32_t>(g));
      }
      r->separate.push_back(std::move(members));
    }
    for (std::size_t i = 0; i < r->tables; ++i) {
      auto& e = r->entry[i];
      e.separate_begin = static_cast<std::uint32_t>(r->separate_of.size());
      r->separate_of.insert(r->separate_of.end(), groups_of[i].begin(), groups_of[i].end());
      e.separate_end = static_cast<std::uint32_t>(r->separate_of.size());
    }
    return r;
  }

  static std::string group_names(const task& t, const std::vector<std::uint32_t>& members) {
    std::string out;
    for (const auto m : members)
      out += (out.empty() ? "" : ", ") + t.tables[m].name;
    return out;
  }

  // A table's own device rule as text ("devices [0]", "hosts [1]").
  static std::string allowed_text_of_rule(const user_constraints& c, std::size_t table) {
    const auto list = [](const std::vector<std::size_t>& v) {
      std::string out;
      for (const auto x : v)
        out += (out.empty() ? "" : ", ") + std::to_string(x);
      return "[" + out + "]";
    };
    for (const auto& rule : c.tables) {
      if (rule.table != table) continue;
      std::string out;
      if (!rule.devices.empty()) out += "devices " + list(rule.devices);
      if (!rule.hosts.empty()) out += (out.empty() ? "" : ", ") + ("hosts " + list(rule.hosts));
      return out.empty() ? "any device" : out;
    }
    return "any device";
  }

  std::shared_ptr<const rules_data> data_{};
};
static_assert(explaining_constraint<table_rules>);

}  // namespace embplan::inline EMBPLAN_ABI
