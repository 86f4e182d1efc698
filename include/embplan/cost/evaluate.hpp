#pragma once
// Simulated cost of a plan under a cost model, the way NeuroShard's simulator
// (eval_simulator.py; §3.3) does it: per device, fused compute of its shards;
// backward all-to-all from the per-device column sums; forward all-to-all with
// each device starting late by its (compute + backward comm) minus the minimum
// over devices; plan cost = max over devices of the four parts. A plan with
// data-parallel tables adds their gradient all-reduce (cost/collectives.hpp)
// to every device's backward communication, priced from the topology whatever
// the model (the same on every device, it moves no start time relative to
// another). Table-row-wise ranges (row pieces in one host of several) enter
// the all-to-all with their reduced columns, and their devices add the
// intra-host reduce-scatter to both directions' communication
// (table_row_wise_traffic, cost/collectives.hpp).

#include <algorithm>
#include <span>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/collectives.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// Shards grouped by device, in plan order within a device.
inline std::vector<std::vector<shard>> shards_by_device(const task& t, const plan& p) {
  std::vector<std::vector<shard>> out(t.cluster.size());
  for (const auto& s : p.shards)
    out[s.device].push_back(s);
  return out;
}

// Precondition: the plan references only the task's tables and devices
// (embplan::validate(task, plan) checks it; planners always do).
template <cost_model CostModel>
plan_cost evaluate(const task& t, const plan& p, const CostModel& model) {
  const std::size_t devices = t.cluster.size();
  const auto groups = shards_by_device(t, p);
  const auto state = state_of(t, p);

  plan_cost out;
  out.devices.resize(devices);
  out.memory_bytes = state.memory_bytes;
  out.dim_sum = state.dim_sum;

  // Table-row-wise ranges send fewer columns, after a reduce-scatter inside
  // their host (cost/collectives.hpp).
  // A model that prices them itself (prices_collectives) gets neither.
  const bool own_collectives = prices_collectives(model, t);
  std::vector<double> reduce_ms(devices, 0.0);
  if (!own_collectives) {
    table_row_wise_traffic(t, p, std::span<std::int64_t>(out.dim_sum),
                           std::span<double>(reduce_ms));
  }

  std::vector<double> start_ms(devices, 0.0);
  std::vector<comm_cost> comm(devices);
  for (std::size_t d = 0; d < devices; ++d) {
    const compute_cost c = model.compute(t, std::span<const shard>(groups[d]), d);
    out.devices[d].fwd_compute_ms = c.fwd_ms;
    out.devices[d].bwd_compute_ms = c.bwd_ms;
  }
  model.communication(t, std::span<const std::int64_t>(out.dim_sum),
                      std::span<const double>(start_ms), std::span<comm_cost>(comm));
  const double all_reduce = own_collectives ? 0.0 : data_parallel_all_reduce_ms(t, p);
  for (std::size_t d = 0; d < devices; ++d) {
    out.devices[d].bwd_comm_ms = comm[d].bwd_ms + reduce_ms[d] + all_reduce;
    start_ms[d] = out.devices[d].fwd_compute_ms + out.devices[d].bwd_compute_ms + comm[d].bwd_ms +
                  reduce_ms[d];
  }
  // NeuroShard §3.3: the forward all-to-all sees each device's start skew.
  const double earliest = devices ? *std::min_element(start_ms.begin(), start_ms.end()) : 0.0;
  for (auto& s : start_ms)
    s -= earliest;
  model.communication(t, std::span<const std::int64_t>(out.dim_sum),
                      std::span<const double>(start_ms), std::span<comm_cost>(comm));
  for (std::size_t d = 0; d < devices; ++d)
    out.devices[d].fwd_comm_ms = comm[d].fwd_ms + reduce_ms[d];
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI
