#pragma once
// The user's per-table constraints as JSON (docs/constraints.md; the file
// `embplan plan --constraints c.json` reads), for one task:
//   {"tables": {"t17": {"devices": [3]},                  pinned to device 3
//               "t4":  {"hosts": [0, 1], "sharding": ["table_wise", "column_wise"],
//                       "max_shards": 2, "dtype": "fp16"},  stored as fp16
//               "t9":  {"min_shards": 3},                 in at least 3 pieces
//               "#12": {"devices": [0, 1]}},              table 12 by index
//    "colocate": [["t1", "t2", "t3"]],                    on one device together
//    "separate": [["t5", "t6"]]}                          never on one device
// Tables are named as in the task, or "#<index>". Every key is optional;
// lists may not be empty (leave a key out to allow anything). Unknown keys,
// wrong types, unknown table names, names two tables share, and everything
// table_rules refuses (devices or hosts out of range, contradictions) are an
// embplan::error naming the JSON path, the value and what was expected.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/io/json_tables.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

inline constexpr std::string_view constraints_keys[] = {"tables", "colocate", "separate"};
inline constexpr std::string_view table_rule_keys[] = {
    "devices", "hosts", "sharding", "max_shards", "min_shards", "dtype", "tier", "load_factor"};

// The index of the table `name` ("#<index>" or a table's name) names in `t`.
inline std::size_t table_index(const task& t, const json& value, const std::string& name,
                               std::string_view field) {
  if (name.size() > 1 && name[0] == '#' &&
      name.find_first_not_of("0123456789", 1) == std::string::npos && name.size() < 12) {
    const auto i = std::stoull(name.substr(1));
    if (i >= t.tables.size()) {
      fail_value(field, value, "a table index below " + std::to_string(t.tables.size()));
    }
    return static_cast<std::size_t>(i);
  }
  std::size_t found = t.tables.size();
  std::vector<std::string_view> names;
  names.reserve(t.tables.size());
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    names.push_back(t.tables[i].name);
    if (t.tables[i].name != name) continue;
    if (found != t.tables.size()) {
      fail_value(field, value,
                 "a name of one table, but tables " + std::to_string(found) + " and " +
                     std::to_string(i) + " share it (name the table \"#<index>\")");
    }
    found = i;
  }
  if (found == t.tables.size()) {
    const auto near = closest_key(name, names);
    fail_value(
        field, value,
        "the name of a table of task '" + t.name + "' or \"#<index>\"" +
            (near.empty() ? std::string() : " (did you mean \"" + std::string(near) + "\"?)"));
  }
  return found;
}

// A non-empty array at `field`, each element read by `read(element, path)`.
template <class Read>
auto non_empty_list(const json& j, std::string_view field, std::string_view what, Read read) {
  require_array(j, field);
  if (j.empty()) fail_value(field, j, std::string(what) + " (leave the key out to allow any)");
  std::vector<decltype(read(j[0], std::string()))> out;
  for (std::size_t k = 0; k < j.size(); ++k)
    out.push_back(read(j[k], path(field, k)));
  return out;
}

inline std::size_t index_value(const json& j, const std::string& field) {
  const std::int64_t v = as_int64(j, field);
  if (v < 0) fail_value(field, j, "a non-negative index");
  return static_cast<std::size_t>(v);
}

inline table_rule table_rule_from_json(const task& t, const std::string& key, const json& j,
                                       const std::string& where) {
  require_object(j, where);
  check_keys(j, table_rule_keys, where);
  table_rule rule;
  rule.table = table_index(t, json(key), key, where);
  rule.where = where;
  if (const json* v = find(j, "devices")) {
    rule.devices = non_empty_list(*v, path(where, "devices"), "at least one device", index_value);
  }
  if (const json* v = find(j, "hosts")) {
    rule.hosts = non_empty_list(*v, path(where, "hosts"), "at least one host", index_value);
  }
  if (const json* v = find(j, "sharding")) {
    rule.sharding = non_empty_list(*v, path(where, "sharding"), "at least one sharding kind",
                                   [](const json& e, const std::string& field) {
                                     return parse_sharding_kind(as_string(e, field), field);
                                   });
  }
  const auto shard_count = [&](const char* name) -> std::uint32_t {
    const json* v = find(j, name);
    if (v == nullptr) return 0;
    const auto field = path(where, name);
    const std::int64_t n = as_int64(*v, field);
    if (n < 1 || n > std::int64_t{0xFFFFFFFF}) fail_value(field, *v, "a positive shard count");
    return static_cast<std::uint32_t>(n);
  };
  rule.max_shards = shard_count("max_shards");
  rule.min_shards = shard_count("min_shards");
  if (const json* v = find(j, "dtype")) {
    const auto field = path(where, "dtype");
    rule.weight_dtype = parse_dtype(as_string(*v, field), field);
  }
  if (const auto placement = placement_from_json(j, where)) {
    validate(*placement, where);
    rule.placement = *placement;
  }
  return rule;
}

inline std::vector<std::vector<std::size_t>> groups_from_json(const task& t, const json& j,
                                                              const std::string& field) {
  return non_empty_list(j, field, "at least one group", [&](const json& g, const std::string& at) {
    return non_empty_list(g, at, "a group of tables", [&](const json& e, const std::string& f) {
      return table_index(t, e, as_string(e, f), f);
    });
  });
}

}  // namespace detail

// The constraints of `j` for task `t`, as table_rules' input; `where`
// prefixes field paths ("constraints.tables.t17.devices[0]").
inline user_constraints user_constraints_from_json(const nlohmann::json& j, const task& t,
                                                   std::string_view where = "constraints") {
  using namespace detail;
  return guarded(where, [&] {
    require_object(j, where);
    check_keys(j, constraints_keys, where);
    user_constraints c;
    if (const json* tables = find(j, "tables")) {
      const auto field = path(where, "tables");
      require_object(*tables, field);
      for (const auto& [key, rule] : tables->items())
        c.tables.push_back(table_rule_from_json(t, key, rule, path(field, key)));
    }
    if (const json* g = find(j, "colocate"))
      c.colocate = groups_from_json(t, *g, path(where, "colocate"));
    if (const json* g = find(j, "separate"))
      c.separate = groups_from_json(t, *g, path(where, "separate"));
    return c;
  });
}

// The table_rules of `j` for task `t`, validated (table_rules' checks name the
// same JSON paths). A "dtype" other than the task's is refused: read the
// constraints, apply_table_rules() to the task, then build table_rules from both.
inline table_rules table_rules_from_json(const nlohmann::json& j, const task& t,
                                         std::string_view where = "constraints") {
  return table_rules(t, user_constraints_from_json(j, t, where), where);
}

}  // namespace embplan::inline EMBPLAN_ABI::io
