#pragma once
// plan <-> JSON, against the task it places:
//   {"task": "dlrm-50",
//    "shards": [{"table": 3, "table_name": "t3", "device": 1, "columns": [0, 16],
//                "rows": [0, 1000], "replica": false}, ...]}
// Ranges are half-open [begin, end). A shard may name its table by "table"
// (index), "table_name" or both (then they must agree), and its device by
// index or by the device's name ("cuda:1"). "columns" / "rows" default to the
// whole table, "replica" to false. Any other key is an error naming it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

inline constexpr std::string_view plan_keys[] = {"task", "shards"};
inline constexpr std::string_view shard_keys[] = {"table",   "table_name", "device",
                                                  "columns", "rows",       "replica"};

inline std::uint32_t table_ref_from_json(const json& shard_json, std::string_view where,
                                         const task& t) {
  const std::size_t tables = t.tables.size();
  const json* index = find(shard_json, "table");
  const json* name = find(shard_json, "table_name");
  if (index == nullptr && name == nullptr) {
    embplan::detail::fail_missing(path(where, "table"),
                                  "a table index (or \"table_name\") of the task");
  }
  std::size_t ti = tables;
  if (index != nullptr) {
    const auto field = path(where, "table");
    const std::int64_t v = as_int64(*index, field);
    if (v < 0 || static_cast<std::uint64_t>(v) >= tables) {
      fail_value(field, *index, "a table index below " + std::to_string(tables));
    }
    ti = static_cast<std::size_t>(v);
  }
  if (name != nullptr) {
    const auto field = path(where, "table_name");
    const std::string n = as_string(*name, field);
    if (index != nullptr) {
      if (t.tables[ti].name != n) {
        fail_value(field, *name,
                   "the name of table " + std::to_string(ti) + " (\"" + t.tables[ti].name + "\")");
      }
    } else {
      for (std::size_t i = 0; i < tables && ti == tables; ++i)
        if (t.tables[i].name == n) ti = i;
      if (ti == tables) fail_value(field, *name, "the name of a table of the task");
    }
  }
  return static_cast<std::uint32_t>(ti);
}

inline std::uint32_t device_ref_from_json(const json& shard_json, std::string_view where,
                                          const task& t) {
  const std::size_t devices = t.cluster.size();
  const auto field = path(where, "device");
  const json& v = require(shard_json, "device", where, "a device index (or name) of the task");
  if (v.is_string()) {
    const std::string name = v.get<std::string>();
    for (std::size_t d = 0; d < devices; ++d)
      if (t.cluster.devices[d].name == name) return static_cast<std::uint32_t>(d);
    fail_value(field, v, "the name of a device of the task");
  }
  const std::int64_t d = as_int64(v, field);
  if (d < 0 || static_cast<std::uint64_t>(d) >= devices) {
    fail_value(field, v, "a device index below " + std::to_string(devices));
  }
  return static_cast<std::uint32_t>(d);
}

// [begin, end) from a two-element array.
inline std::pair<std::int64_t, std::int64_t> range_from_json(const json& j,
                                                             std::string_view field) {
  if (!j.is_array() || j.size() != 2) fail_value(field, j, "a range [begin, end)");
  return {as_int64(j[0], path(field, std::size_t{0})), as_int64(j[1], path(field, std::size_t{1}))};
}

}  // namespace detail

inline nlohmann::json to_json(const task& t, const plan& p) {
  nlohmann::json shards = nlohmann::json::array();
  for (std::size_t i = 0; i < p.shards.size(); ++i) {
    const auto& s = p.shards[i];
    if (s.table >= t.tables.size()) {
      embplan::detail::fail(embplan::detail::path(embplan::detail::path("shards", i), "table"),
                            s.table, "a table index below " + std::to_string(t.tables.size()));
    }
    nlohmann::json sj = nlohmann::json::object();
    sj["table"] = s.table;
    if (!t.tables[s.table].name.empty()) sj["table_name"] = t.tables[s.table].name;
    sj["device"] = s.device;
    sj["columns"] = {s.col_begin, s.col_end};
    sj["rows"] = {s.row_begin, s.row_end};
    sj["replica"] = s.replica;
    shards.push_back(std::move(sj));
  }
  nlohmann::json j = nlohmann::json::object();
  j["task"] = t.name;
  j["shards"] = std::move(shards);
  return j;
}

// Reads a plan for `t` ({"shards": [...]} or a bare array of shards), checks
// every reference, then that each table is covered exactly once (memory is
// not checked: a plan may be read to be judged).
inline plan plan_from_json(const nlohmann::json& j, const task& t) {
  using namespace detail;
  return guarded("plan", [&] {
    const json* shards = &j;
    if (j.is_object()) {
      check_keys(j, plan_keys, "plan");
      if (const json* name = find(j, "task")) {
        const std::string n = as_string(*name, "plan.task");
        if (!n.empty() && !t.name.empty() && n != t.name) {
          fail_value("plan.task", *name, "the task's name \"" + t.name + "\"");
        }
      }
      shards = &require(j, "shards", "", "an array of shards");
    }
    require_array(*shards, "shards");
    plan p;
    p.shards.reserve(shards->size());
    for (std::size_t i = 0; i < shards->size(); ++i) {
      const json& sj = (*shards)[i];
      const auto where = path("shards", i);
      require_object(sj, where);
      check_keys(sj, shard_keys, where);
      shard s;
      s.table = table_ref_from_json(sj, where, t);
      s.device = device_ref_from_json(sj, where, t);
      const auto& spec = t.tables[s.table];
      s.col_end = spec.dim;
      s.row_end = spec.rows;
      if (const json* cols = find(sj, "columns")) {
        const auto field = path(where, "columns");
        const auto [b, e] = range_from_json(*cols, field);
        if (b < 0 || e > spec.dim || b >= e) {
          fail_value(field, *cols,
                     "a non-empty range inside [0, " + std::to_string(spec.dim) + ")");
        }
        s.col_begin = static_cast<std::int32_t>(b);
        s.col_end = static_cast<std::int32_t>(e);
      }
      if (const json* rows = find(sj, "rows")) {
        const auto [b, e] = range_from_json(*rows, path(where, "rows"));
        s.row_begin = b;
        s.row_end = e;
      }
      if (const json* r = find(sj, "replica")) s.replica = as_bool(*r, path(where, "replica"));
      p.shards.push_back(s);
    }
    validate(t, p, plan_check{.memory = false});
    return p;
  });
}

}  // namespace embplan::inline EMBPLAN_ABI::io
