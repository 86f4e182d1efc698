#pragma once
// The measured meter of a whole plan with real communication (docs/measuring.md,
// "Meters"; target embplan::mpi): one MPI rank per device. Each
// rank measures its own device's shard on the CPU meter (meter/cpu_meter.hpp),
// the ranks taking turns so that every device is timed by itself; the compute
// costs are gathered on every rank; then the all-to-alls are measured for real
// with MPI_Alltoallv (meter/mpi/alltoall.hpp) with the plan's per-device byte
// counts and, for the forward pass, NeuroShard's start skews (§3.3: each
// device's compute + backward comm minus the minimum over devices). The plan's
// cost is assembled by evaluate() (cost/evaluate.hpp), so the arithmetic is
// exactly the simulated meter's; only where the four numbers come from differs.
//
// Batch: like the compute (cpu_meter_cost), the all-to-all runs at the meter's
// batch (at most comm_batch_size samples) and its times are scaled by task
// batch / measured batch; the start skews are scaled down by the same factor
// before they are waited, so skew and transfer stay in proportion.
//
// Collective: every rank of `comm` calls measure_plan with the same task and
// plan, and every rank gets the same plan_cost.
#include "embplan/detail/mpi.hpp"  // first: it picks MPI's C API
#include "embplan/meter/mpi/alltoall.hpp"
#include "embplan/version.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/meter/cpu_meter.hpp"

namespace embplan::inline EMBPLAN_ABI::meter::mpi {

struct plan_meter_options {
  cpu_meter_cost compute{};             // the CPU meter of each device's shard
  std::int64_t comm_batch_size = 4096;  // samples of the measured all-to-all (<= task batch)
  protocol_options comm_protocol{.warmup = 2, .runs = 9, .drop = 2, .flush = false};
};

inline void validate(const plan_meter_options& o) {
  validate(o.compute.options);
  if (o.comm_batch_size < 1) {
    embplan::detail::fail("plan_meter.comm_batch_size", o.comm_batch_size, "a count >= 1");
  }
  validate(o.comm_protocol);
}

namespace detail {

// evaluate()'s view of a plan already measured: the gathered compute costs by
// device, and communication measured collectively on every call (evaluate
// calls it twice, in the same order on every rank: first for the backward
// all-to-all with no skew, then for the forward one with the start skews).
struct measured_plan_model {
  std::vector<compute_cost> compute_by_device;
  MPI_Comm comm = MPI_COMM_WORLD;
  plan_meter_options options{};

  std::string_view name() const noexcept { return "cpu-meter+mpi-alltoall"; }

  compute_cost compute(const task&, std::span<const shard>, std::size_t device) const {
    return compute_by_device[device];
  }
  // Not used by evaluate(); a local measurement of one piece.
  double shard_cost(const task& t, const shard& s) const {
    return options.compute.shard_cost(t, s);
  }

  void communication(const task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<comm_cost> out) const {
    const std::int64_t batch = std::min(t.batch_size, options.comm_batch_size);
    const double scale = static_cast<double>(t.batch_size) / static_cast<double>(batch);
    std::vector<double> skew(start_ms.begin(), start_ms.end());
    for (auto& s : skew)
      s /= scale;
    const auto measured =
        measure_alltoall(comm, dim_sum, skew,
                         alltoall_options{.batch_size = batch, .protocol = options.comm_protocol});
    for (std::size_t d = 0; d < out.size(); ++d)
      out[d] =
          comm_cost{.fwd_ms = measured[d].fwd_ms * scale, .bwd_ms = measured[d].bwd_ms * scale};
  }
};
static_assert(cost_model<measured_plan_model>);

}  // namespace detail

// Measures plan `p` of task `t` with one rank of `comm` per device (see the top
// of this file). Throws embplan::error when the number of ranks is not the
// number of devices.
inline plan_cost measure_plan(MPI_Comm comm, const task& t, const plan& p,
                              const plan_meter_options& o = {}) {
  validate(o);
  int rank = 0;
  int size = 0;
  embplan::detail::mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  embplan::detail::mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const std::size_t devices = t.cluster.size();
  if (static_cast<std::size_t>(size) != devices) {
    embplan::detail::fail("measure_plan.ranks", size,
                          "one MPI rank per device of the task (" + std::to_string(devices) + ")");
  }
  const auto groups = shards_by_device(t, p);
  // Rank d measures device d, one rank at a time: a device is timed by itself,
  // as on the papers' GPUs, not sharing this machine's memory bandwidth.
  double mine[2] = {0.0, 0.0};
  for (int turn = 0; turn < size; ++turn) {
    if (turn == rank) {
      const auto d = static_cast<std::size_t>(rank);
      const compute_cost c = o.compute.compute(t, std::span<const shard>(groups[d]), d);
      mine[0] = c.fwd_ms;
      mine[1] = c.bwd_ms;
    }
    embplan::detail::mpi_check(MPI_Barrier(comm), "MPI_Barrier");
  }
  std::vector<double> all(2 * devices);
  embplan::detail::mpi_check(MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, comm),
                             "MPI_Allgather");
  detail::measured_plan_model model{.compute_by_device = {}, .comm = comm, .options = o};
  for (std::size_t d = 0; d < devices; ++d)
    model.compute_by_device.push_back({.fwd_ms = all[2 * d], .bwd_ms = all[2 * d + 1]});
  return evaluate(t, p, model);
}

}  // namespace embplan::inline EMBPLAN_ABI::meter::mpi
