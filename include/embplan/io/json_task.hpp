#pragma once
// task <-> JSON:
//   {"name": "dlrm-50", "batch_size": 65536, "optimizer": "none",
//    "tables": [...],
//    "cluster": {"devices": [{"name": "cuda:0", "memory_bytes": ...,
//                             "memory_bandwidth_gbps": ..., "cache_bandwidth_gbps": ...,
//                             "cache_bytes": ..., "dram_bytes": ...}, ...],
//                "devices_per_host": 8, "intra_host_bandwidth_gbps": ...,
//                "inter_host_bandwidth_gbps": ..., "collective_latency_ms": ...}}
// A uniform cluster may be written {"count": 4, "device": {...}}; a device may
// give "memory_gib" instead of "memory_bytes", and "dram_gib" instead of
// "dram_bytes" (host DRAM for its tables off hbm; absent: not limited, and not
// written). Every object rejects keys it does not know (detail::check_keys),
// naming the key and the near miss: most fields have defaults
// (core/topology.hpp), so a misspelt "memory_byte" would otherwise silently
// become 4 GiB.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/io/detail/json_writer.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/io/json_tables.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

// Upper bound on a cluster's devices ("count", or "devices" listed), so a typo
// cannot ask for 10^12 devices; the CLI's --devices maximum too.
inline constexpr std::int64_t max_device_count = std::int64_t{1} << 16;

// The ranges of a task's numbers (docs/formats.md), so that no later
// arithmetic leaves the doubles' range: a bandwidth of 1e-320 GB/s priced a
// device at NaN ms.
inline constexpr double min_bandwidth_gbps = 1e-3;  // 1 MB/s
inline constexpr double max_bandwidth_gbps = 1e6;   // 1 PB/s
inline constexpr double max_collective_latency_ms = 1e6;
inline constexpr std::string_view bandwidth_range = "a bandwidth from 0.001 to 1e6 GB/s";

inline constexpr std::string_view task_keys[] = {"name", "batch_size", "optimizer", "tables",
                                                 "cluster"};
inline constexpr std::string_view tasks_keys[] = {"tasks"};
inline constexpr std::string_view cluster_keys[] = {"devices",
                                                    "count",
                                                    "device",
                                                    "devices_per_host",
                                                    "intra_host_bandwidth_gbps",
                                                    "inter_host_bandwidth_gbps",
                                                    "collective_latency_ms"};
inline constexpr std::string_view device_keys[] = {
    "name",        "memory_bytes", "memory_gib", "memory_bandwidth_gbps", "cache_bandwidth_gbps",
    "cache_bytes", "dram_bytes",   "dram_gib"};

inline double positive_number(const json& j, std::string_view field) {
  const double v = as_double(j, field);
  if (!std::isfinite(v) || v <= 0.0) fail_value(field, j, "a positive number");
  return v;
}

inline double bandwidth_from_json(const json& j, std::string_view field) {
  return number_in(j, field, min_bandwidth_gbps, max_bandwidth_gbps, bandwidth_range);
}

// A capacity given as `bytes_key` (a positive integer) or `gib_key` (a
// positive number of GiB), not both, into `out`; `out` unchanged where neither
// is given.
inline void capacity_from_json(const json& j, std::string_view where, std::string_view bytes_key,
                               std::string_view gib_key, std::uint64_t& out) {
  const json* bytes = find(j, bytes_key);
  const json* gibs = find(j, gib_key);
  if (bytes != nullptr && gibs != nullptr) {
    fail_value(
        path(where, gib_key), *gibs,
        "either \"" + std::string(bytes_key) + "\" or \"" + std::string(gib_key) + "\", not both");
  }
  if (bytes != nullptr) {
    const auto field = path(where, bytes_key);
    out = as_uint64(*bytes, field);
    if (out == 0) fail_value(field, *bytes, "a positive size in bytes");
  }
  if (gibs != nullptr) {
    const auto field = path(where, gib_key);
    const double g = positive_number(*gibs, field);
    // 2^34 GiB = 2^64 bytes.
    if (g >= 17179869184.0) fail_value(field, *gibs, "a capacity below 2^34 GiB");
    out = static_cast<std::uint64_t>(std::round(g * static_cast<double>(gib)));
    if (out == 0) fail_value(field, *gibs, "a capacity of at least one byte");
  }
}

// Fills the fields present in `j` into `d`, leaving the defaults elsewhere.
inline void device_fields_from_json(const json& j, std::string_view where, bool allow_name,
                                    device_spec& d) {
  require_object(j, where);
  // A uniform cluster's one "device" has no name: its devices are cuda:0, cuda:1, ...
  const std::span<const std::string_view> known(device_keys);
  check_keys(j, allow_name ? known : known.subspan(1), where);
  if (const json* name = find(j, "name")) d.name = as_string(*name, path(where, "name"));
  capacity_from_json(j, where, "memory_bytes", "memory_gib", d.memory_bytes);
  // Host DRAM: 0 (not limited) is its absence, so a given one is positive too.
  capacity_from_json(j, where, "dram_bytes", "dram_gib", d.dram_bytes);
  if (const json* bw = find(j, "memory_bandwidth_gbps")) {
    d.memory_bandwidth_gbps = bandwidth_from_json(*bw, path(where, "memory_bandwidth_gbps"));
  }
  if (const json* bw = find(j, "cache_bandwidth_gbps")) {
    d.cache_bandwidth_gbps = bandwidth_from_json(*bw, path(where, "cache_bandwidth_gbps"));
  }
  if (const json* c = find(j, "cache_bytes")) {
    d.cache_bytes = as_uint64(*c, path(where, "cache_bytes"));  // 0: no cache
  }
}

inline topology topology_from_json(const json& j, std::string_view where) {
  require_object(j, where);
  check_keys(j, cluster_keys, where);
  topology t;
  const json* devices = find(j, "devices");
  const json* count = find(j, "count");
  if (devices != nullptr && (count != nullptr || find(j, "device") != nullptr)) {
    fail_value(path(where, "devices"), *devices,
               "either \"devices\" or \"count\" + \"device\", not both");
  }
  if (devices != nullptr) {
    const auto field = path(where, "devices");
    require_array(*devices, field);
    if (devices->size() > static_cast<std::size_t>(max_device_count)) {
      embplan::detail::fail(field, devices->size(), "at most 65536 devices");
    }
    t.devices.resize(devices->size());
    for (std::size_t i = 0; i < devices->size(); ++i) {
      t.devices[i].name = "cuda:" + std::to_string(i);
      device_fields_from_json((*devices)[i], path(field, i), true, t.devices[i]);
    }
    // A plan names devices by name: two with one name would be one device to it.
    std::map<std::string, std::size_t, std::less<>> seen;
    for (std::size_t i = 0; i < t.devices.size(); ++i) {
      const auto [at, fresh] = seen.emplace(t.devices[i].name, i);
      if (!fresh) {
        embplan::detail::fail(path(path(field, i), "name"), t.devices[i].name,
                              "a name no other device has (device " + std::to_string(at->second) +
                                  " is named so too)");
      }
    }
  } else if (count != nullptr) {
    const auto field = path(where, "count");
    const std::int64_t n = as_int64(*count, field);
    if (n <= 0 || n > max_device_count) {
      fail_value(field, *count, "a positive device count up to 65536");
    }
    device_spec d;
    if (const json* device = find(j, "device")) {
      device_fields_from_json(*device, path(where, "device"), false, d);
    }
    // Hosts of 8, topology's default, as for listed devices (not uniform_topology's
    // choice): "devices_per_host", if given, is read below.
    t = uniform_topology(static_cast<std::size_t>(n), d, topology{}.devices_per_host);
  } else {
    embplan::detail::fail_missing(path(where, "devices"),
                                  "an array of devices, or \"count\" and \"device\"");
  }
  if (const json* v = find(j, "devices_per_host")) {
    t.devices_per_host = as_int32(*v, path(where, "devices_per_host"));
  }
  if (const json* v = find(j, "intra_host_bandwidth_gbps")) {
    t.intra_host_bandwidth_gbps = bandwidth_from_json(*v, path(where, "intra_host_bandwidth_gbps"));
  }
  if (const json* v = find(j, "inter_host_bandwidth_gbps")) {
    t.inter_host_bandwidth_gbps = bandwidth_from_json(*v, path(where, "inter_host_bandwidth_gbps"));
  }
  if (const json* v = find(j, "collective_latency_ms")) {
    t.collective_latency_ms = number_in(*v, path(where, "collective_latency_ms"), 0.0,
                                        max_collective_latency_ms, "a latency from 0 to 1e6 ms");
  }
  return t;
}

inline json to_json(const topology& t) {
  json devices = json::array();
  for (const auto& d : t.devices) {
    json dj = json::object();
    dj["name"] = d.name;
    dj["memory_bytes"] = d.memory_bytes;
    dj["memory_bandwidth_gbps"] = d.memory_bandwidth_gbps;
    dj["cache_bandwidth_gbps"] = d.cache_bandwidth_gbps;
    dj["cache_bytes"] = d.cache_bytes;
    if (d.dram_bytes != 0) dj["dram_bytes"] = d.dram_bytes;
    devices.push_back(std::move(dj));
  }
  json j = json::object();
  j["devices"] = std::move(devices);
  j["devices_per_host"] = t.devices_per_host;
  j["intra_host_bandwidth_gbps"] = t.intra_host_bandwidth_gbps;
  j["inter_host_bandwidth_gbps"] = t.inter_host_bandwidth_gbps;
  j["collective_latency_ms"] = t.collective_latency_ms;
  return j;
}

}  // namespace detail

namespace detail {

// task_from_json, with the task's tables already read where `tables` is given
// (read_task_file: "tables" then holds nulls in their place).
inline task task_from_json(const nlohmann::json& j, std::string_view where,
                           std::vector<table_spec>* tables_read) {
  return guarded(where, [&] {
    require_object(j, where);
    check_keys(j, task_keys, where);
    task t;
    if (const json* name = find(j, "name")) t.name = as_string(*name, path(where, "name"));
    if (const json* b = find(j, "batch_size")) {
      t.batch_size = as_int64(*b, path(where, "batch_size"));
    }
    if (const json* o = find(j, "optimizer")) {
      const auto field = path(where, "optimizer");
      t.optimizer_state = parse_optimizer(as_string(*o, field), field);
    }
    const auto tables = path(where, "tables");
    const json& listed = require(j, "tables", where, "an array of tables");
    if (tables_read != nullptr && listed.is_array()) {
      if (listed.empty()) embplan::detail::fail(tables, 0, "at least one table");
      t.tables = std::move(*tables_read);
    } else {
      t.tables = tables_from_json(listed, tables);
    }
    t.cluster = topology_from_json(
        require(j, "cluster", where, "an object with \"devices\" (or \"count\" and \"device\")"),
        path(where, "cluster"));
    validate(t, where);
    return t;
  });
}

}  // namespace detail

// Reads a task and validates it. `where` prefixes field paths ("task.tables[3].rows").
// A key outside the task's own is an error naming it.
inline task task_from_json(const nlohmann::json& j, std::string_view where = "task") {
  return detail::task_from_json(j, where, nullptr);
}

inline nlohmann::json to_json(const task& t) {
  nlohmann::json j = nlohmann::json::object();
  j["name"] = t.name;
  j["batch_size"] = t.batch_size;
  j["optimizer"] = std::string(to_string(t.optimizer_state));
  nlohmann::json tables = nlohmann::json::array();
  for (const auto& spec : t.tables)
    tables.push_back(to_json(spec));
  j["tables"] = std::move(tables);
  j["cluster"] = detail::to_json(t.cluster);
  return j;
}

// {"tasks": [...]} or a single task object.
inline std::vector<task> tasks_from_json(const nlohmann::json& j) {
  using namespace detail;
  return guarded("tasks", [&] {
    std::vector<task> out;
    if (j.is_object() && find(j, "tasks") == nullptr) {
      out.push_back(task_from_json(j, "task"));
      return out;
    }
    if (!j.is_object()) fail_value("tasks", j, "{\"tasks\": [...]} or a task object");
    check_keys(j, tasks_keys, "");
    const json& array = *find(j, "tasks");
    require_array(array, "tasks");
    if (array.empty()) embplan::detail::fail("tasks", 0, "at least one task");
    out.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i)
      out.push_back(task_from_json(array[i], path("tasks", i)));
    return out;
  });
}

// A task file (one task, or {"tasks": [...]}) read by read_task_file: the
// file's JSON, with each task's "tables" holding nulls, and the tables read.
class task_file {
 public:
  using json = nlohmann::json;

  // Whether the file is one task object rather than {"tasks": [...]}.
  bool lone() const { return json_.is_object() && detail::find(json_, "tasks") == nullptr; }

  // The number of tasks the file holds (1 for a lone task; 0 where it is
  // neither form, which take() then explains).
  std::size_t size() const {
    if (lone()) return 1;
    const json* tasks = json_.is_object() ? detail::find(json_, "tasks") : nullptr;
    return tasks != nullptr && tasks->is_array() ? tasks->size() : 0;
  }

  // The JSON of task `index` (its tables as nulls), or none.
  const json* task_json(std::size_t index) const {
    if (lone()) return index == 0 ? &json_ : nullptr;
    return index < size() ? &(*detail::find(json_, "tasks"))[index] : nullptr;
  }

  // Task `index`, validated as tasks_from_json validates it; each task once.
  task take(std::size_t index) {
    using namespace detail;
    return guarded("tasks", [&] {
      if (lone()) {
        if (index != 0) embplan::detail::fail("index", index, "0 (the file holds one task)");
        return detail::task_from_json(json_, "task", tables_of(0));
      }
      if (!json_.is_object()) fail_value("tasks", json_, "{\"tasks\": [...]} or a task object");
      check_keys(json_, tasks_keys, "");
      const json& array = *find(json_, "tasks");
      require_array(array, "tasks");
      if (array.empty()) embplan::detail::fail("tasks", 0, "at least one task");
      if (index >= array.size()) {
        embplan::detail::fail("index", index,
                              "an index below the " + std::to_string(array.size()) + " tasks");
      }
      return detail::task_from_json(array[index], path("tasks", index), tables_of(index));
    });
  }

 private:
  friend task_file read_task_file(const std::filesystem::path&, std::optional<std::size_t>);
  friend task_file parse_task_file(std::string_view, std::string_view, std::optional<std::size_t>);

  // Hands each table of the tasks read to table_from_json as the parser
  // completes it: {"tables": [...]} at the root (a lone task) or
  // {"tasks": [{"tables": [...]}, ...]}. Tables of the tasks not read are
  // dropped unread.
  struct sink {
    static constexpr bool streams_any = true;
    task_file& file;
    std::optional<std::size_t> only;

    std::optional<std::size_t> streams(std::span<const detail::json_step> path) const {
      if (path.size() == 1 && path[0].key == "tables") return lone_id;
      if (path.size() == 3 && path[0].key == "tasks" && path[1].is_index() &&
          path[2].key == "tables") {
        return path[1].index;
      }
      return std::nullopt;
    }
    void take(std::size_t id, std::size_t i, json&& element) {
      const std::size_t index = id == lone_id ? 0 : id;
      if (only && index != *only) return;
      const std::string where = id == lone_id ? "task" : embplan::detail::path("tasks", index);
      const std::string field = embplan::detail::path(embplan::detail::path(where, "tables"), i);
      auto& tables = file.tables_[index];
      tables.push_back(detail::guarded(where, [&] { return table_from_json(element, field); }));
    }
  };
  static constexpr std::size_t lone_id = static_cast<std::size_t>(-1);

  std::vector<table_spec>* tables_of(std::size_t index) {
    const auto at = tables_.find(index);
    return at == tables_.end() ? nullptr : &at->second;
  }

  json json_;
  std::map<std::size_t, std::vector<table_spec>> tables_;
};

// Reads a task file as read_json_file and tasks_from_json would, but converts
// each table as the parser reaches it (read_json_file_streamed), so a task of
// a million tables costs the memory of its table_specs, not of its text and a
// JSON value per table. With `only`, only that task's tables are read.
inline task_file read_task_file(const std::filesystem::path& file,
                                std::optional<std::size_t> only = std::nullopt) {
  task_file out;
  task_file::sink sink{.file = out, .only = only};
  out.json_ = read_json_file_streamed(file, sink);
  return out;
}

// read_task_file of `text` (parse_json_streamed), `source` naming it in
// messages.
inline task_file parse_task_file(std::string_view text, std::string_view source = "<input>",
                                 std::optional<std::size_t> only = std::nullopt) {
  task_file out;
  task_file::sink sink{.file = out, .only = only};
  out.json_ = parse_json_streamed(text, source, sink);
  return out;
}

// Every task of a task file (read_task_file).
inline std::vector<task> read_tasks_file(const std::filesystem::path& file) {
  auto f = read_task_file(file);
  std::vector<task> out;
  const std::size_t n = std::max<std::size_t>(f.size(), 1);  // 0: take() explains
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(f.take(i));
  return out;
}

inline nlohmann::json tasks_to_json(std::span<const task> tasks) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& t : tasks)
    array.push_back(to_json(t));
  nlohmann::json out = nlohmann::json::object();
  out["tasks"] = std::move(array);
  return out;
}

// tasks_to_json of the `count` tasks next() returns, in turn, as dump(2)
// writes it, written into `w` one table at a time: no more than one task is
// in memory (`embplan tasks --count 1000000`).
template <class Next>
void write_tasks_json(detail::json_writer& w, std::size_t count, Next&& next) {
  w.begin_object();
  w.key("tasks");
  w.begin_array();
  for (std::size_t i = 0; i < count; ++i) {
    const task& t = next();
    // to_json(t)'s keys, in nlohmann::json's (sorted) order.
    w.begin_object();
    w.key("batch_size");
    w.value(t.batch_size);
    w.key("cluster");
    w.value(detail::to_json(t.cluster));
    w.key("name");
    w.value(t.name);
    w.key("optimizer");
    w.value(std::string(to_string(t.optimizer_state)));
    w.key("tables");
    w.begin_array();
    for (const auto& spec : t.tables)
      w.value(to_json(spec));
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

// tasks_to_json(tasks).dump(2) written into `w` one table at a time.
inline void write_tasks_json(detail::json_writer& w, std::span<const task> tasks) {
  std::size_t i = 0;
  write_tasks_json(w, tasks.size(), [&]() -> const task& { return tasks[i++]; });
}

// write_tasks_json into `file`, atomically (write_json_file's contract).
inline void write_tasks_file(const std::filesystem::path& file, std::span<const task> tasks) {
  write_json_file_streamed(file, [&](detail::json_writer& w) { write_tasks_json(w, tasks); });
}

// write_tasks_json of `count` tasks from next() into `file`, atomically: a
// next() that throws part-way leaves the previous file as it was.
template <class Next>
void write_tasks_file(const std::filesystem::path& file, std::size_t count, Next&& next) {
  write_json_file_streamed(
      file, [&](detail::json_writer& w) { write_tasks_json(w, count, std::forward<Next>(next)); });
}

}  // namespace embplan::inline EMBPLAN_ABI::io
