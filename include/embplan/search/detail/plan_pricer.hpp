#pragma once
// evaluate()'s arithmetic (cost/evaluate.hpp; NeuroShard's simulator, §3.3) on
// per-device compute costs a search already holds: backward all-to-all from
// the column sums, forward all-to-all with each device's start skew, plan cost
// = max over devices. The same operations in the same order, so a searcher's
// figure equals evaluate(task, plan, model).max_ms() to the last bit (tested);
// the buffers are kept between calls, so pricing allocates nothing. A search
// under a reward that needs more than the max cost gets the whole plan_cost
// (plan_cost_of), the figures evaluate() would give.

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::search::detail {

// A cost model's promise that its communication is never negative
// (analytic_cost::communication_nonnegative); a model without it promises nothing.
template <cost_model CostModel>
bool communication_nonnegative(const CostModel& model, const task& t) {
  if constexpr (requires {
                  { model.communication_nonnegative(t) } -> std::convertible_to<bool>;
                }) {
    return static_cast<bool>(model.communication_nonnegative(t));
  } else {
    return false;
  }
}

// Where communication is never negative, a plan costs at least
// max over devices of compute[d].total_ms(): each device's total adds
// non-negative terms to it, and float addition of a non-negative term never
// lowers a sum. A plan whose bound is not below the best cost so far cannot
// replace it (the searchers keep a plan only when strictly cheaper), so it
// need not be priced.
inline double compute_bound_ms(std::span<const compute_cost> compute) noexcept {
  double out = 0.0;
  for (const auto& c : compute)
    out = std::max(out, c.total_ms());
  return out;
}

class plan_pricer {
 public:
  // The plan's cost; totals()[d] and starts()[d] (compute + backward comm) are
  // then each device's figures.
  template <cost_model CostModel>
  double max_ms(const task& t, const CostModel& model, std::span<const compute_cost> compute,
                std::span<const std::int64_t> dim_sum) {
    backward(t, model, compute, dim_sum);
    return forward(t, model, compute, dim_sum);
  }

  // The plan's cost where it is below `best_ms`, else a figure not below it
  // (infinity, or the cost). Only for a model whose communication is never
  // negative (communication_nonnegative): a plan whose compute + backward
  // comm on some device already reaches `best_ms` is not given the forward
  // all-to-all. Exact: a device's total is ((fwd + bwd) + fwd comm) + bwd
  // comm, and with fwd comm >= 0 that is, rounding being monotone, at least
  // (fwd + bwd) + bwd comm. totals() and starts() hold the plan's figures
  // only when the cost is returned.
  template <cost_model CostModel>
  double max_ms_below(const task& t, const CostModel& model, std::span<const compute_cost> compute,
                      std::span<const std::int64_t> dim_sum, double best_ms) {
    backward(t, model, compute, dim_sum);
    for (const double s : start_)  // (fwd + bwd) + bwd comm
      if (s >= best_ms) return std::numeric_limits<double>::infinity();
    return forward(t, model, compute, dim_sum);
  }

  // The plan_cost evaluate() returns for the plan last priced by max_ms():
  // `compute` and `dim_sum` as given there, `memory_bytes` the plan's. Fills
  // `out` in place, so a search that scores many plans allocates once.
  void plan_cost_of(std::span<const compute_cost> compute,
                    std::span<const std::uint64_t> memory_bytes,
                    std::span<const std::int64_t> dim_sum, plan_cost& out) const {
    const std::size_t devices = compute.size();
    out.devices.resize(devices);
    for (std::size_t d = 0; d < devices; ++d) {
      out.devices[d].fwd_compute_ms = compute[d].fwd_ms;
      out.devices[d].bwd_compute_ms = compute[d].bwd_ms;
      out.devices[d].fwd_comm_ms = comm_[d].fwd_ms;
      out.devices[d].bwd_comm_ms = bwd_comm_[d];
    }
    out.memory_bytes.assign(memory_bytes.begin(), memory_bytes.end());
    out.dim_sum.assign(dim_sum.begin(), dim_sum.end());
  }

  std::span<const double> totals() const noexcept { return totals_; }
  std::span<const double> starts() const noexcept { return starts_; }
  std::uint64_t calls() const noexcept { return calls_; }

 private:
  // The backward all-to-all (no start skew): bwd_comm_, and start_ =
  // compute + backward comm.
  template <cost_model CostModel>
  void backward(const task& t, const CostModel& model, std::span<const compute_cost> compute,
                std::span<const std::int64_t> dim_sum) {
    const std::size_t devices = compute.size();
    start_.assign(devices, 0.0);
    bwd_comm_.resize(devices);
    comm_.resize(devices);
    totals_.resize(devices);
    model.communication(t, dim_sum, std::span<const double>(start_), std::span<comm_cost>(comm_));
    ++calls_;
    for (std::size_t d = 0; d < devices; ++d) {
      bwd_comm_[d] = comm_[d].bwd_ms;
      start_[d] = compute[d].fwd_ms + compute[d].bwd_ms + comm_[d].bwd_ms;
    }
  }

  // The forward all-to-all with each device's start skew; the plan's cost.
  template <cost_model CostModel>
  double forward(const task& t, const CostModel& model, std::span<const compute_cost> compute,
                 std::span<const std::int64_t> dim_sum) {
    const std::size_t devices = compute.size();
    starts_ = start_;
    const double earliest = devices ? *std::min_element(start_.begin(), start_.end()) : 0.0;
    for (auto& s : start_)
      s -= earliest;
    model.communication(t, dim_sum, std::span<const double>(start_), std::span<comm_cost>(comm_));
    ++calls_;
    double worst = 0.0;
    for (std::size_t d = 0; d < devices; ++d) {
      // device_cost::total_ms()'s order of additions.
      totals_[d] = compute[d].fwd_ms + compute[d].bwd_ms + comm_[d].fwd_ms + bwd_comm_[d];
      worst = std::max(worst, totals_[d]);
    }
    return worst;
  }

  std::vector<double> start_;
  std::vector<double> starts_;
  std::vector<double> bwd_comm_;
  std::vector<comm_cost> comm_;
  std::vector<double> totals_;
  std::uint64_t calls_ = 0;
};

}  // namespace embplan::inline EMBPLAN_ABI::search::detail
