#pragma once
// plan <-> JSON, against the task it places:
//   {"task": "dlrm-50",
//    "shards": [{"table": 3, "table_name": "t3", "device": 1, "columns": [0, 16],
//                "rows": [0, 1000], "replica": false}, ...]}
// Ranges are half-open [begin, end). A shard may name its table by "table"
// (index), "table_name" or both (then they must agree), and its device by
// index or by the device's name ("cuda:1"). "columns" / "rows" default to the
// whole table, "replica" to false. A data-parallel copy (a whole table on
// every device) has "data_parallel": true, written only when true (a plan
// without one reads and writes as before). Any other key is an error naming it.
// A plan a planner made also records how (core/content_hash.hpp):
//   "planner": "lookup_greedy", "seed": 0, "content_hash": "b986ebf52b58ca3f",
//   "embplan_version": "0.1.0"
// all four or none; the hash covers the task, planner, seed and the shards, so
// a plan edited after planning no longer matches it.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "embplan/core/content_hash.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/io/detail/json_writer.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

inline constexpr std::string_view plan_keys[] = {"task", "shards",       "planner",
                                                 "seed", "content_hash", "embplan_version"};
inline constexpr std::string_view provenance_keys[] = {"planner", "seed", "content_hash",
                                                       "embplan_version"};
inline constexpr std::string_view shard_keys[] = {"table", "table_name", "device",       "columns",
                                                  "rows",  "replica",    "data_parallel"};

// An index as a shard holds it: below `count` where `checked`, else any
// 32-bit index (plan_from_json_unchecked keeps one out of range for
// check_plan to name).
inline std::uint32_t index_from_json(const json& v, std::string_view field, std::size_t count,
                                     std::string_view what, bool checked) {
  const std::int64_t i = as_int64(v, field);
  if (checked && (i < 0 || static_cast<std::uint64_t>(i) >= count)) {
    fail_value(field, v, "a " + std::string(what) + " index below " + std::to_string(count));
  }
  if (i < 0 || i > std::numeric_limits<std::uint32_t>::max()) {
    fail_value(field, v, "a " + std::string(what) + " index (0 .. 2^32 - 1)");
  }
  return static_cast<std::uint32_t>(i);
}

inline std::uint32_t table_ref_from_json(const json& shard_json, std::string_view where,
                                         const task& t, bool checked) {
  const std::size_t tables = t.tables.size();
  const json* index = find(shard_json, "table");
  const json* name = find(shard_json, "table_name");
  if (index == nullptr && name == nullptr) {
    embplan::detail::fail_missing(path(where, "table"),
                                  "a table index (or \"table_name\") of the task");
  }
  std::size_t ti = tables;
  if (index != nullptr) {
    ti = index_from_json(*index, path(where, "table"), tables, "table", checked);
    if (ti >= tables) return static_cast<std::uint32_t>(ti);  // unchecked: check_plan names it
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
                                          const task& t, bool checked) {
  const std::size_t devices = t.cluster.size();
  const auto field = path(where, "device");
  const json& v = require(shard_json, "device", where, "a device index (or name) of the task");
  if (v.is_string()) {
    const std::string name = v.get<std::string>();
    for (std::size_t d = 0; d < devices; ++d)
      if (t.cluster.devices[d].name == name) return static_cast<std::uint32_t>(d);
    fail_value(field, v, "the name of a device of the task");
  }
  return index_from_json(v, field, devices, "device", checked);
}

// [begin, end) from a two-element array.
inline std::pair<std::int64_t, std::int64_t> range_from_json(const json& j,
                                                             std::string_view field) {
  if (!j.is_array() || j.size() != 2) fail_value(field, j, "a range [begin, end)");
  return {as_int64(j[0], path(field, std::size_t{0})), as_int64(j[1], path(field, std::size_t{1}))};
}

}  // namespace detail

namespace detail {

// Shard i of `p` as the plan file holds it.
inline nlohmann::json shard_to_json(const task& t, const plan& p, std::size_t i) {
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
  if (s.data_parallel) sj["data_parallel"] = true;
  return sj;
}

}  // namespace detail

inline nlohmann::json to_json(const task& t, const plan& p) {
  nlohmann::json shards = nlohmann::json::array();
  for (std::size_t i = 0; i < p.shards.size(); ++i)
    shards.push_back(detail::shard_to_json(t, p, i));
  nlohmann::json j = nlohmann::json::object();
  j["task"] = t.name;
  j["shards"] = std::move(shards);
  return j;
}

namespace detail {

// The plan of j ({"shards": [...]} or a bare array of shards) for `t`. Checked:
// every reference and range as plan_from_json says. Unchecked: the syntax,
// names that must name a table or device of `t`, and integers that fit a
// shard's fields; indices and ranges as they are, for check_plan to judge.
inline plan read_plan(const json& j, const task& t, bool checked) {
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
    s.table = table_ref_from_json(sj, where, t, checked);
    s.device = device_ref_from_json(sj, where, t, checked);
    if (s.table < t.tables.size()) {
      s.col_end = t.tables[s.table].dim;
      s.row_end = t.tables[s.table].rows;
    }
    if (const json* cols = find(sj, "columns")) {
      const auto field = path(where, "columns");
      const auto [b, e] = range_from_json(*cols, field);
      const std::int32_t dim = s.table < t.tables.size() ? t.tables[s.table].dim : 0;
      if (checked && (b < 0 || e > dim || b >= e)) {
        fail_value(field, *cols, "a non-empty range inside [0, " + std::to_string(dim) + ")");
      }
      s.col_begin = as_int32(cols->at(0), path(field, std::size_t{0}));
      s.col_end = as_int32(cols->at(1), path(field, std::size_t{1}));
    }
    if (const json* rows = find(sj, "rows")) {
      const auto [b, e] = range_from_json(*rows, path(where, "rows"));
      s.row_begin = b;
      s.row_end = e;
    }
    if (const json* r = find(sj, "replica")) s.replica = as_bool(*r, path(where, "replica"));
    if (const json* dp = find(sj, "data_parallel"))
      s.data_parallel = as_bool(*dp, path(where, "data_parallel"));
    p.shards.push_back(s);
  }
  return p;
}

}  // namespace detail

// Reads a plan for `t` ({"shards": [...]} or a bare array of shards), checks
// every reference, then that each table is covered exactly once (memory is
// not checked: a plan may be read to be judged).
inline plan plan_from_json(const nlohmann::json& j, const task& t) {
  return detail::guarded("plan", [&] {
    auto p = detail::read_plan(j, t, true);
    validate(t, p, plan_check{.memory = false});
    return p;
  });
}

// Reads a plan for `t` as it is: a table or device index out of range, an
// empty range, a range beyond its table, a table lost or covered twice are
// kept for check_plan to report (check_plan.hpp); the syntax, and names of
// tables and devices, are checked as plan_from_json checks them.
inline plan plan_from_json_unchecked(const nlohmann::json& j, const task& t) {
  return detail::guarded("plan", [&] { return detail::read_plan(j, t, false); });
}

// A plan's JSON with how it was made (the header's "planner", "seed",
// "content_hash", "embplan_version").
inline nlohmann::json to_json(const task& t, const plan& p, const plan_provenance& made) {
  auto j = to_json(t, p);
  j["planner"] = made.planner;
  j["seed"] = made.seed;
  j["content_hash"] = hash_hex(made.content_hash);
  j["embplan_version"] = made.version;
  return j;
}

// The plan's JSON (with how it was made, where `made` is given) written into
// `w`: the bytes of to_json(...).dump(2), but one shard at a time, so that a
// plan of a million shards is never a document in memory.
inline void write_plan_json(detail::json_writer& w, const task& t, const plan& p,
                            const plan_provenance* made = nullptr) {
  // The keys in nlohmann::json's (sorted) order.
  w.begin_object();
  if (made != nullptr) {
    w.key("content_hash");
    w.value(hash_hex(made->content_hash));
    w.key("embplan_version");
    w.value(made->version);
    w.key("planner");
    w.value(made->planner);
    w.key("seed");
    w.value(made->seed);
  }
  w.key("shards");
  w.begin_array();
  for (std::size_t i = 0; i < p.shards.size(); ++i)
    w.value(detail::shard_to_json(t, p, i));
  w.end_array();
  w.key("task");
  w.value(t.name);
  w.end_object();
}

// write_plan_json into `file`, atomically (write_json_file's contract).
inline void write_plan_file(const std::filesystem::path& file, const task& t, const plan& p,
                            const plan_provenance* made = nullptr) {
  write_json_file_streamed(file, [&](detail::json_writer& w) { write_plan_json(w, t, p, made); });
}

// How the plan of j was made, or none where it records nothing (a plan written
// by hand, or before embplan recorded it); a part of it alone is an error
// naming the missing key.
inline std::optional<plan_provenance> provenance_from_json(const nlohmann::json& j) {
  using namespace detail;
  return guarded("plan", [&]() -> std::optional<plan_provenance> {
    if (!j.is_object()) return std::nullopt;
    bool any = false;
    for (const auto key : provenance_keys)
      any = any || find(j, key) != nullptr;
    if (!any) return std::nullopt;
    constexpr std::string_view all =
        " (a plan records planner, seed, content_hash and "
        "embplan_version together)";
    plan_provenance out;
    out.planner = as_string(require(j, "planner", "plan", "the planner's name" + std::string(all)),
                            "plan.planner");
    out.seed = as_uint64(require(j, "seed", "plan", "the seed" + std::string(all)), "plan.seed");
    const json& hash = require(j, "content_hash", "plan", "16 hex digits" + std::string(all));
    const auto parsed = parse_hash_hex(as_string(hash, "plan.content_hash"));
    if (!parsed) fail_value("plan.content_hash", hash, "16 hex digits");
    out.content_hash = *parsed;
    out.version = as_string(
        require(j, "embplan_version", "plan", "a version such as \"0.1.0\"" + std::string(all)),
        "plan.embplan_version");
    return out;
  });
}

}  // namespace embplan::inline EMBPLAN_ABI::io
