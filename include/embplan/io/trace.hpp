#pragma once
// A priced plan as a Chrome trace-event file (opens in Perfetto or
// chrome://tracing): one process "embplan plan", one thread per device, and per
// device four complete events laid end to end from t = 0 in the order of
// DreamShard Fig. 1 / NeuroShard Fig. 1: forward compute, forward comm,
// backward comm, backward compute. "ts" / "dur" are microseconds, as the
// format requires; each event's args carry the milliseconds.

#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

inline nlohmann::json chrome_trace(const task& t, const plan_cost& cost) {
  using embplan::detail::fail;
  using embplan::detail::path;
  const std::size_t devices = t.cluster.size();
  if (cost.devices.size() != devices) {
    fail("plan_cost.devices", cost.devices.size(),
         "one cost per device of the task (" + std::to_string(devices) + ")");
  }
  constexpr int pid = 1;
  nlohmann::json events = nlohmann::json::array();

  nlohmann::json process = {
      {"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", "embplan plan"}}}};
  events.push_back(std::move(process));
  for (std::size_t d = 0; d < devices; ++d) {
    const auto& name = t.cluster.devices[d].name;
    nlohmann::json thread = {
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", pid},
        {"tid", d},
        {"args", {{"name", name.empty() ? "cuda:" + std::to_string(d) : name}}}};
    events.push_back(std::move(thread));
    // Keeps devices in index order whatever their names.
    nlohmann::json order = {{"name", "thread_sort_index"},
                            {"ph", "M"},
                            {"pid", pid},
                            {"tid", d},
                            {"args", {{"sort_index", d}}}};
    events.push_back(std::move(order));
  }

  struct stage {
    std::string_view name;
    std::string_view category;
    std::string_view field;
    double device_cost::*ms;
  };
  static constexpr std::array<stage, 4> stages{{
      {"forward compute", "compute", "fwd_compute_ms", &device_cost::fwd_compute_ms},
      {"forward comm", "comm", "fwd_comm_ms", &device_cost::fwd_comm_ms},
      {"backward comm", "comm", "bwd_comm_ms", &device_cost::bwd_comm_ms},
      {"backward compute", "compute", "bwd_compute_ms", &device_cost::bwd_compute_ms},
  }};
  constexpr double us_per_ms = 1000.0;
  for (std::size_t d = 0; d < devices; ++d) {
    const auto& c = cost.devices[d];
    double start_ms = 0.0;
    for (const auto& st : stages) {
      const double ms = c.*st.ms;
      if (!std::isfinite(ms) || ms < 0.0) {
        fail(path(path("plan_cost.devices", d), st.field), ms, "a finite time >= 0");
      }
      nlohmann::json e = nlohmann::json::object();
      e["name"] = st.name;
      e["cat"] = st.category;
      e["ph"] = "X";
      e["pid"] = pid;
      e["tid"] = d;
      e["ts"] = start_ms * us_per_ms;
      e["dur"] = ms * us_per_ms;
      e["args"] = {{"cost_ms", ms}, {"device_total_ms", c.total_ms()}};
      events.push_back(std::move(e));
      start_ms += ms;
    }
  }

  nlohmann::json out = nlohmann::json::object();
  out["traceEvents"] = std::move(events);
  out["displayTimeUnit"] = "ms";
  out["otherData"] = {{"task", t.name}, {"cost_ms", cost.max_ms()}, {"balance", cost.balance()}};
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::io
