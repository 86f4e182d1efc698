#pragma once
// plan_report: what a user acts on after planning, in the spirit of TorchRec's
// planner stats: per device its memory used and free and its cost as the
// cost model prices the plan; the critical path; how unbalanced cost and
// memory are; the pieces that drive the bottleneck device; and per table its
// sharding, devices and cost.
// Figures, and where they come from:
//  - memory: the storage accounting of validate() and memory_capacity
//    (placement_state, shard_bytes by memory tier, core/plan.hpp); host DRAM
//    from shard_dram_bytes, its capacity device_spec::dram_bytes where set.
//  - device cost: a plan_cost (evaluate(), or a meter's own); its max is the
//    plan's cost.
//  - the critical path, as evaluate() prices a step (NeuroShard §3.3): the
//    step runs through the bottleneck, the device that starts its forward
//    all-to-all last (the largest compute + backward comm), since the
//    collective ends for no device before the last has started it, and ends
//    on the device that finishes last (the largest total, the plan's cost).
//  - imbalance of values over the devices, mean m, max M: max_over_mean =
//    M / m (1: balanced; n: one device carries everything) and cv =
//    population standard deviation / m (0: balanced; sqrt(n - 1): one device
//    carries everything). Both are 1 and 0 where every value is 0.
// Design notes: docs/design/plan-report.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/checked.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/host_dram.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/collectives.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct imbalance {
  double max = 0.0;
  double mean = 0.0;
  double max_over_mean = 1.0;
  double cv = 0.0;  // coefficient of variation: population std / mean

  friend bool operator==(const imbalance&, const imbalance&) = default;
};

// The imbalance of `values` (one per device; docs/design/plan-report.md).
inline imbalance imbalance_of(std::span<const double> values) noexcept {
  imbalance out;
  if (values.empty()) return out;
  double sum = 0.0;
  for (const double v : values) {
    sum += v;
    out.max = std::max(out.max, v);
  }
  const auto n = static_cast<double>(values.size());
  out.mean = sum / n;
  if (out.mean <= 0.0) return out;
  double squares = 0.0;
  for (const double v : values)
    squares += (v - out.mean) * (v - out.mean);
  out.max_over_mean = out.max / out.mean;
  out.cv = std::sqrt(squares / n) / out.mean;
  return out;
}

struct device_report {
  std::size_t shards = 0;
  std::int64_t dim_sum = 0;               // columns held, every piece at its full width
  std::int64_t sent_dim = 0;              // columns it sends in the all-to-all: dim_sum, less
                                          // what its table_row_wise ranges reduce inside the
                                          // host first (table_row_wise_traffic; plan_cost::dim_sum)
  std::uint64_t hbm_capacity_bytes = 0;   // device_spec::memory_bytes
  std::uint64_t hbm_used_bytes = 0;       // its shards' shard_bytes
  std::uint64_t hbm_free_bytes = 0;       // capacity - used; 0 where used exceeds it
  std::uint64_t dram_used_bytes = 0;      // host memory: its shards' shard_dram_bytes
  std::uint64_t dram_capacity_bytes = 0;  // device_spec::dram_bytes; 0: not limited
  std::uint64_t dram_free_bytes = 0;      // capacity - used where limited; 0 where used exceeds it
                                          // or where not limited (see dram_limited)
  bool dram_limited() const noexcept { return dram_capacity_bytes != 0; }
  device_cost cost{};
  double compute_ms() const noexcept { return cost.fwd_compute_ms + cost.bwd_compute_ms; }
  double comm_ms() const noexcept { return cost.fwd_comm_ms + cost.bwd_comm_ms; }

  friend bool operator==(const device_report&, const device_report&) = default;
};

// One shard of the plan, priced alone.
struct piece_report {
  std::size_t shard = 0;  // index in plan::shards
  std::uint32_t table = 0;
  std::uint32_t device = 0;
  double cost_ms = 0.0;           // CostModel::shard_cost
  double share_of_compute = 0.0;  // cost_ms / its device's compute (0 where that is 0)
  std::uint64_t hbm_bytes = 0;    // shard_bytes

  friend bool operator==(const piece_report&, const piece_report&) = default;
};

struct table_report {
  std::string_view sharding{};  // sharding_type_of: "table_wise", "column_wise", ...
  std::vector<std::uint32_t>
      devices{};           // where its pieces (replicas too) are, ascending, once each
  std::size_t pieces = 0;  // non-replica shards
  std::size_t replicas = 0;
  double cost_ms = 0.0;          // sum of its shards' cost_ms
  std::uint64_t hbm_bytes = 0;   // sum of its shards' shard_bytes
  std::uint64_t dram_bytes = 0;  // sum of its shards' shard_dram_bytes

  friend bool operator==(const table_report&, const table_report&) = default;
};

struct plan_report {
  std::vector<device_report> devices{};  // by device index
  std::vector<piece_report> pieces{};    // by shard index (plan order)
  std::vector<table_report> tables{};    // by table index
  // The critical path (docs/design/plan-report.md), the lowest index among
  // equals: the device that starts its forward all-to-all last, at
  // bottleneck_start_ms (its compute + backward comm), and the device that
  // finishes last, at cost_ms (its total, the plan's cost).
  std::size_t bottleneck = 0;
  double bottleneck_start_ms = 0.0;
  std::size_t last_to_finish = 0;
  double cost_ms = 0.0;
  // The pieces on the bottleneck device by cost_ms, largest first (the lower
  // shard index first among equals), at most plan_report_options::top_pieces.
  std::vector<piece_report> bottleneck_pieces{};
  imbalance total{};    // of the devices' total cost
  imbalance compute{};  // of their forward + backward compute (AutoShard's balance looks here)
  imbalance hbm{};      // of their HBM used

  friend bool operator==(const plan_report&, const plan_report&) = default;
};

struct plan_report_options {
  std::size_t top_pieces = 5;
};

// The report of plan `p` for task `t` with per-device costs `cost` (a meter's
// pricing of p; evaluate(t, p, model) for a simulated one), each piece priced
// by `model`. Throws embplan::error when p does not match t (validate(),
// memory aside: a device over its capacity is reported, with no HBM free), or
// cost has not one entry per device, or a cost is not a finite number.
template <cost_model CostModel>
plan_report plan_report_of(const task& t, const plan& p, const plan_cost& cost,
                           const CostModel& model, plan_report_options options = {}) {
  validate(t, p, plan_check{.memory = false});
  const std::size_t devices = t.cluster.size();
  if (cost.devices.size() != devices) {
    detail::fail("cost.devices.size", cost.devices.size(),
                 "one entry per device of the task (" + std::to_string(devices) + ")");
  }
  plan_report out;
  const auto state = state_of(t, p);
  std::vector<std::int64_t> sent = state.dim_sum;
  std::vector<double> reduce_ms(devices, 0.0);  // not reported: in the cost's comm already
  table_row_wise_traffic(t, p, std::span<std::int64_t>(sent), std::span<double>(reduce_ms));
  out.devices.resize(devices);
  std::vector<double> totals(devices);
  std::vector<double> computes(devices);
  std::vector<double> starts(devices);
  std::vector<double> used(devices);
  for (std::size_t d = 0; d < devices; ++d) {
    if (!std::isfinite(cost.devices[d].total_ms())) {
      detail::fail(detail::path("cost.devices", d) + ".total_ms", cost.devices[d].total_ms(),
                   "a finite cost");
    }
  }
  for (std::size_t d = 0; d < devices; ++d) {
    auto& r = out.devices[d];
    r.shards = state.shard_count[d];
    r.dim_sum = state.dim_sum[d];
    r.sent_dim = sent[d];
    r.hbm_capacity_bytes = t.cluster.devices[d].memory_bytes;
    r.hbm_used_bytes = state.memory_bytes[d];
    r.hbm_free_bytes =
        r.hbm_used_bytes < r.hbm_capacity_bytes ? r.hbm_capacity_bytes - r.hbm_used_bytes : 0;
    r.dram_used_bytes = state.dram_bytes[d];
    r.dram_capacity_bytes = t.cluster.devices[d].dram_bytes;
    r.dram_free_bytes = embplan::dram_free_bytes(r.dram_capacity_bytes, r.dram_used_bytes);
    r.cost = cost.devices[d];
    totals[d] = r.cost.total_ms();
    computes[d] = r.compute_ms();
    starts[d] = computes[d] + r.cost.bwd_comm_ms;
    used[d] = static_cast<double>(r.hbm_used_bytes);
    if (starts[d] > starts[out.bottleneck]) out.bottleneck = d;
    if (totals[d] > totals[out.last_to_finish]) out.last_to_finish = d;
  }
  if (devices > 0) {
    out.bottleneck_start_ms = starts[out.bottleneck];
    out.cost_ms = totals[out.last_to_finish];
  }
  out.total = imbalance_of(totals);
  out.compute = imbalance_of(computes);
  out.hbm = imbalance_of(used);

  out.pieces.reserve(p.shards.size());
  out.tables.resize(t.tables.size());
  std::vector<std::vector<const shard*>> non_replica(t.tables.size());
  for (std::size_t i = 0; i < p.shards.size(); ++i) {
    const shard& s = p.shards[i];
    const double ms = static_cast<double>(model.shard_cost(t, s));
    if (!std::isfinite(ms)) {
      detail::fail(detail::path("shards", i) + ".cost_ms", ms,
                   "a finite cost from the " + std::string(model.name()) + " model");
    }
    const double device_compute = computes[s.device];
    piece_report piece{.shard = i,
                       .table = s.table,
                       .device = s.device,
                       .cost_ms = ms,
                       .share_of_compute = device_compute > 0.0 ? ms / device_compute : 0.0,
                       .hbm_bytes = shard_bytes(t, s)};
    auto& table = out.tables[s.table];
    table.cost_ms += ms;
    table.hbm_bytes = checked_add(table.hbm_bytes, piece.hbm_bytes, "table memory");
    table.dram_bytes = checked_add(table.dram_bytes, shard_dram_bytes(t, s), "table host memory");
    table.devices.push_back(s.device);
    if (s.replica) {
      ++table.replicas;
    } else {
      ++table.pieces;
      non_replica[s.table].push_back(&s);
    }
    if (s.device == out.bottleneck) out.bottleneck_pieces.push_back(piece);
    out.pieces.push_back(piece);
  }
  for (std::size_t ti = 0; ti < t.tables.size(); ++ti) {
    auto& table = out.tables[ti];
    table.sharding = sharding_type_of(t.cluster, t.tables[ti], non_replica[ti]);
    std::sort(table.devices.begin(), table.devices.end());
    table.devices.erase(std::unique(table.devices.begin(), table.devices.end()),
                        table.devices.end());
  }
  auto& top = out.bottleneck_pieces;
  std::stable_sort(top.begin(), top.end(), [](const piece_report& a, const piece_report& b) {
    return a.cost_ms > b.cost_ms;
  });
  if (top.size() > options.top_pieces) top.resize(options.top_pieces);
  return out;
}

// The report of `p` priced by `model` alone: evaluate(t, p, model) for the
// devices' costs.
template <cost_model CostModel>
plan_report plan_report_of(const task& t, const plan& p, const CostModel& model,
                           plan_report_options options = {}) {
  validate(t, p, plan_check{.memory = false});  // evaluate() needs the indices in range
  return plan_report_of(t, p, evaluate(t, p, model), model, options);
}

}  // namespace embplan::inline EMBPLAN_ABI
