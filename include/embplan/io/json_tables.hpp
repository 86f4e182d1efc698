#pragma once
// table_spec and table pools <-> JSON. embplan's own form is
//   {"name": "t0", "rows": 1000, "dim": 16, "pooling_factor": 3.5,
//    "reuse_hist": [17 fractions], "dtype": "fp32"}
// and NeuroShard / DreamShard table_configs.json entries are read as they are:
//   {"row": 1000, "dim": 16, "pooling_factor": 3.5, "bin_0": ..., "bin_16": ...}
// (NeuroShard §4 / DreamShard §4 datasets; their DLRM entries have no "dim";
// DreamShard's also carry the table's "index", which is accepted and unused).
// Any other key is an error naming it (detail::check_keys): a misspelt or
// C++-named "weight_dtype" must not leave the table at fp32.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/io/detail/json_writer.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

// The keys a table object may have: embplan's, then NeuroShard / DreamShard's.
inline constexpr std::string_view table_keys[] = {
    "name",   "rows",   "dim",    "pooling_factor", "reuse_hist", "dtype",      "row",
    "index",  "bin_0",  "bin_1",  "bin_2",          "bin_3",      "bin_4",      "bin_5",
    "bin_6",  "bin_7",  "bin_8",  "bin_9",          "bin_10",     "bin_11",     "bin_12",
    "bin_13", "bin_14", "bin_15", "bin_16",         "tier",       "load_factor"};
static_assert(std::size(table_keys) == 10 + reuse_bin_count);

inline constexpr std::string_view pool_keys[] = {"tables"};

// The range of a table's "pooling_factor" (mean lookups per bag): beyond it,
// costs of lookups x batch x bytes leave the doubles' range (1e300 priced a
// device at NaN ms). docs/formats.md documents it.
inline constexpr double max_pooling_factor = 1e6;

// A number in [lo, hi] (`text` says the range, with its unit, for the
// message); anything else, non-finite included, names the field, the value
// and the range.
inline double number_in(const json& j, std::string_view field, double lo, double hi,
                        std::string_view text) {
  const double v = as_double(j, field);
  if (!std::isfinite(v) || v < lo || v > hi) fail_value(field, j, std::string(text));
  return v;
}

// A table's "tier" and "load_factor" keys at `where` (a task's table, or a
// constraints file's rule): none when neither is there; a load factor
// without "tier": "uvm_caching" named. Not validated beyond that (the caller
// validates the placement with what else it checks).
inline std::optional<tier_placement> placement_from_json(const nlohmann::json& j,
                                                         const std::string& where) {
  const json* tier = find(j, "tier");
  const json* load_factor = find(j, "load_factor");
  if (tier == nullptr && load_factor == nullptr) return std::nullopt;
  tier_placement out;
  if (tier != nullptr) {
    const auto field = path(where, "tier");
    out.tier = parse_memory_tier(as_string(*tier, field), field);
  }
  if (load_factor != nullptr) {
    const auto field = path(where, "load_factor");
    if (out.tier != memory_tier::uvm_caching) {
      fail_value(field, *load_factor, "a load factor only with \"tier\": \"uvm_caching\"");
    }
    out.load_factor = as_double(*load_factor, field);
  }
  return out;
}

inline std::string bin_key(std::size_t k) {
  return "bin_" + std::to_string(k);
}

// Without a histogram a table is taken to have no reuse (every index seen once,
// the costliest case), or none at all when its pooling factor is 0.
inline reuse_histogram reuse_hist_from_json(const json& j, std::string_view where,
                                            double pooling_factor) {
  reuse_histogram h{};
  const json* array = find(j, "reuse_hist");
  bool any_bin = false;
  for (std::size_t k = 0; k < reuse_bin_count && !any_bin; ++k)
    any_bin = find(j, bin_key(k)) != nullptr;
  if (array != nullptr && any_bin) {
    fail_value(path(where, "reuse_hist"), *array,
               "either \"reuse_hist\" or \"bin_0\"..\"bin_16\", not both");
  }
  if (array != nullptr) {
    const auto field = path(where, "reuse_hist");
    if (!array->is_array() || array->size() != reuse_bin_count) {
      fail_value(field, *array, "an array of 17 fractions");
    }
    for (std::size_t k = 0; k < reuse_bin_count; ++k)
      h[k] = as_double((*array)[k], path(field, k));
    return h;
  }
  if (!any_bin) {
    if (pooling_factor > 0.0) h[0] = 1.0;
    return h;
  }
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    const auto key = bin_key(k);
    h[k] = as_double(require(j, key, where, "a fraction (all of bin_0..bin_16 are needed)"),
                     path(where, key));
  }
  return h;
}

}  // namespace detail

// Reads one table. `where` prefixes field paths ("tables[3]" gives
// "tables[3].rows"). `default_dim` > 0 fills a missing "dim" (DLRM
// table_configs carry none); 0 makes "dim" required. Validates the result.
inline table_spec table_from_json(const nlohmann::json& j, std::string_view where = "table",
                                  std::int32_t default_dim = 0) {
  using namespace detail;
  return guarded(where, [&] {
    require_object(j, where);
    check_keys(j, table_keys, where);
    table_spec t;
    if (const json* name = find(j, "name")) t.name = as_string(*name, path(where, "name"));

    const json* rows = find(j, "rows");
    const json* row = find(j, "row");
    if (rows != nullptr && row != nullptr) {
      fail_value(path(where, "row"), *row, "either \"rows\" or \"row\" (NeuroShard), not both");
    }
    if (rows == nullptr && row == nullptr) {
      embplan::detail::fail_missing(path(where, "rows"), "a positive integer (or \"row\")");
    }
    t.rows =
        rows != nullptr ? as_int64(*rows, path(where, "rows")) : as_int64(*row, path(where, "row"));

    if (const json* dim = find(j, "dim")) {
      t.dim = as_int32(*dim, path(where, "dim"));
    } else if (default_dim > 0) {
      t.dim = default_dim;
    } else {
      embplan::detail::fail_missing(path(where, "dim"), "a positive integer");
    }

    t.pooling_factor = number_in(require(j, "pooling_factor", where, "a number >= 0"),
                                 path(where, "pooling_factor"), 0.0, max_pooling_factor,
                                 "a finite number >= 0 and at most 1e6 (mean lookups per bag)");
    t.reuse_hist = reuse_hist_from_json(j, where, t.pooling_factor);
    if (const json* dt = find(j, "dtype")) {
      const auto field = path(where, "dtype");
      t.weight_dtype = parse_dtype(as_string(*dt, field), field);
    }
    if (const auto placement = placement_from_json(j, std::string(where))) t.placement = *placement;
    validate(t, where);
    return t;
  });
}

inline nlohmann::json to_json(const table_spec& t) {
  nlohmann::json j = nlohmann::json::object();
  if (!t.name.empty()) j["name"] = t.name;
  j["rows"] = t.rows;
  j["dim"] = t.dim;
  j["pooling_factor"] = t.pooling_factor;
  j["reuse_hist"] = t.reuse_hist;
  j["dtype"] = std::string(to_string(t.weight_dtype));
  // Written only off hbm, so that files from before tiers read back unchanged.
  if (t.placement.tier != memory_tier::hbm) {
    j["tier"] = std::string(to_string(t.placement.tier));
    if (t.placement.tier == memory_tier::uvm_caching) j["load_factor"] = t.placement.load_factor;
  }
  return j;
}

// Reads tables at `where` (an array) into specs named "<where>[i]".
inline std::vector<table_spec> tables_from_json(const nlohmann::json& array, std::string_view where,
                                                std::int32_t default_dim = 0) {
  using namespace detail;
  require_array(array, where);
  if (array.empty()) embplan::detail::fail(where, 0, "at least one table");
  std::vector<table_spec> out;
  out.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i)
    out.push_back(table_from_json(array[i], path(where, i), default_dim));
  return out;
}

// A pool: a bare array (NeuroShard's table_configs.json) or {"tables": [...]}
// (embplan's form, and DreamShard's). Tables without "dim" get `default_dim`.
namespace detail {

// pool_from_json, with the tables already read where `tables_read` is given
// (read_pool_file: the array then holds nulls in their place).
inline std::vector<table_spec> pool_from_json(const nlohmann::json& j, std::int32_t default_dim,
                                              std::vector<table_spec>* tables_read) {
  const auto read = [&](const json& array) {
    if (tables_read == nullptr || !array.is_array())
      return tables_from_json(array, "tables", default_dim);
    if (array.empty()) embplan::detail::fail("tables", 0, "at least one table");
    return std::move(*tables_read);
  };
  return guarded("tables", [&] {
    if (j.is_array()) return read(j);
    if (!j.is_object()) fail_value("tables", j, "an array of tables or {\"tables\": [...]}");
    check_keys(j, pool_keys, "");
    return read(require(j, "tables", "", "an array of tables"));
  });
}

}  // namespace detail

inline std::vector<table_spec> pool_from_json(const nlohmann::json& j,
                                              std::int32_t default_dim = 16) {
  return detail::pool_from_json(j, default_dim, nullptr);
}

namespace detail {

// read_pool_file's sink: the tables of a pool file, each read as the parser
// completes it.
struct pool_sink {
  static constexpr bool streams_any = true;
  std::int32_t default_dim;
  std::vector<table_spec> tables;

  // The root array (NeuroShard's form) or the root object's "tables".
  std::optional<std::size_t> streams(std::span<const json_step> path) const {
    if (path.empty() || (path.size() == 1 && path[0].key == "tables")) {
      return std::size_t{0};
    }
    return std::nullopt;
  }
  void take(std::size_t /*id*/, std::size_t i, nlohmann::json&& element) {
    tables.push_back(guarded("tables", [&] {
      return io::table_from_json(element, embplan::detail::path("tables", i), default_dim);
    }));
  }
};

}  // namespace detail

// Reads a pool file as read_json_file and pool_from_json would, but converts
// each table as the parser reaches it (read_json_file_streamed), so a pool of
// a million tables costs the memory of its table_specs, not of its text and a
// JSON value per table.
inline std::vector<table_spec> read_pool_file(const std::filesystem::path& file,
                                              std::int32_t default_dim = 16) {
  detail::pool_sink s{.default_dim = default_dim, .tables = {}};
  const auto j = read_json_file_streamed(file, s);
  return detail::pool_from_json(j, default_dim, &s.tables);
}

// read_pool_file of `text` (parse_json_streamed), `source` naming it in
// messages.
inline std::vector<table_spec> parse_pool_file(std::string_view text,
                                               std::string_view source = "<input>",
                                               std::int32_t default_dim = 16) {
  detail::pool_sink s{.default_dim = default_dim, .tables = {}};
  const auto j = parse_json_streamed(text, source, s);
  return detail::pool_from_json(j, default_dim, &s.tables);
}

inline nlohmann::json pool_to_json(std::span<const table_spec> tables) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& t : tables)
    array.push_back(to_json(t));
  nlohmann::json out = nlohmann::json::object();
  out["tables"] = std::move(array);
  return out;
}

// pool_to_json(tables).dump(2) written into `w` one table at a time.
inline void write_pool_json(detail::json_writer& w, std::span<const table_spec> tables) {
  w.begin_object();
  w.key("tables");
  w.begin_array();
  for (const auto& t : tables)
    w.value(to_json(t));
  w.end_array();
  w.end_object();
}

// write_pool_json into `file`, atomically (write_json_file's contract).
inline void write_pool_file(const std::filesystem::path& file, std::span<const table_spec> tables) {
  write_json_file_streamed(file, [&](detail::json_writer& w) { write_pool_json(w, tables); });
}

}  // namespace embplan::inline EMBPLAN_ABI::io
