#pragma once
// evaluate()'s arithmetic (cost/evaluate.hpp; NeuroShard's simulator, §3.3) on
// per-device compute costs a search already holds: backward all-to-all from
// the column sums, forward all-to-all with each device's start skew, plan cost
// = max over devices. The same operations in the same order, so a searcher's
// figure equals evaluate(task, plan, model).max_ms() to the last bit (tested);
// the buffers are kept between calls, so pricing allocates nothing. A search
// under a reward that needs more than the max cost gets the whole plan_cost
// (plan_cost_of), the figures evaluate() would give.
//
// A model with the split_communication methods (concepts/cost_model.hpp) is
// asked for the backward half first and the forward half once the skews are
// known, one network each for a learned model, where communication() would
// run both networks twice per plan; each half is bitwise communication()'s,
// so the figures are the same either way. set_clamp_communication(false)
// asks such a model for its raw predictions (NeuroShard's simulator); a model
// without the split methods is priced through communication(), which clamps
// a learned model's predictions at 0 whatever this says.

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
      out.devices[d].fwd_comm_ms = fwd_comm_[d];
      out.devices[d].bwd_comm_ms = bwd_comm_[d];
    }
    out.memory_bytes.assign(memory_bytes.begin(), memory_bytes.end());
    out.dim_sum.assign(dim_sum.begin(), dim_sum.end());
  }

  std::span<const double> totals() const noexcept { return totals_; }
  std::span<const double> starts() const noexcept { return starts_; }
  // The pricer's communication calls to the model: one per backward and one
  // per forward all-to-all priced (2 per plan max_ms() prices, 1 for a plan
  // max_ms_below() gives up after the backward), whether a call is a split
  // method (one network of a learned model) or communication() (both): the
  // count of the searches' `evaluations`, the same with either model.
  std::uint64_t calls() const noexcept { return calls_; }

  // Communication predictions clamped at 0 (true, the default), or raw
  // (false: NeuroShard's authors' simulator) where the model has the split
  // methods; without them communication() answers, clamped. Raw predictions
  // can be negative: a searcher must then not rely on max_ms_below()'s bound
  // (it is only for models whose communication_nonnegative() holds, which a
  // learned communication model's does not).
  void set_clamp_communication(bool clamp) noexcept { clamp_ = clamp; }
  bool clamp_communication() const noexcept { return clamp_; }

 private:
  // The backward all-to-all (no start skew): bwd_comm_, and start_ =
  // compute + backward comm.
  template <cost_model CostModel>
  void backward(const task& t, const CostModel& model, std::span<const compute_cost> compute,
                std::span<const std::int64_t> dim_sum) {
    const std::size_t devices = compute.size();
    start_.assign(devices, 0.0);
    bwd_comm_.resize(devices);
    fwd_comm_.resize(devices);
    totals_.resize(devices);
    if constexpr (split_communication<CostModel>) {
      // The backward all-to-all depends on the dim sums alone, and a search
      // prices the same dim sums again and again (half of its plans on 4
      // devices): one network evaluation per distinct dim-sum vector.
      if (!memo_.find(dim_sum, clamp_, bwd_comm_)) {
        model.backward_communication(t, dim_sum, std::span<double>(bwd_comm_), clamp_);
        memo_.insert(dim_sum, clamp_, bwd_comm_);
      }
    } else {
      comm_.resize(devices);
      model.communication(t, dim_sum, std::span<const double>(start_), std::span<comm_cost>(comm_));
      for (std::size_t d = 0; d < devices; ++d)
        bwd_comm_[d] = comm_[d].bwd_ms;
    }
    ++calls_;
    for (std::size_t d = 0; d < devices; ++d)
      start_[d] = compute[d].fwd_ms + compute[d].bwd_ms + bwd_comm_[d];
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
    if constexpr (split_communication<CostModel>) {
      model.forward_communication(t, dim_sum, std::span<const double>(start_),
                                  std::span<double>(fwd_comm_), clamp_);
    } else {
      model.communication(t, dim_sum, std::span<const double>(start_), std::span<comm_cost>(comm_));
      for (std::size_t d = 0; d < devices; ++d)
        fwd_comm_[d] = comm_[d].fwd_ms;
    }
    ++calls_;
    double worst = 0.0;
    for (std::size_t d = 0; d < devices; ++d) {
      // device_cost::total_ms()'s order of additions.
      totals_[d] = compute[d].fwd_ms + compute[d].bwd_ms + fwd_comm_[d] + bwd_comm_[d];
      worst = std::max(worst, totals_[d]);
    }
    return worst;
  }

  // The backward figures of the dim-sum vectors priced so far (exact: a
  // model's communication is a function of its inputs), in an open-addressing
  // table emptied when it reaches max_slots / 2 entries or the clamp changes.
  class backward_memo {
   public:
    bool find(std::span<const std::int64_t> dims, bool clamp, std::vector<double>& out) const {
      if (count_ == 0 || clamp != clamp_ || dims.size() != width_) return false;
      for (std::size_t slot = hash(dims) & mask_;; slot = (slot + 1) & mask_) {
        if (!used_[slot]) return false;
        if (std::equal(dims.begin(), dims.end(), keys_.begin() + offset(slot))) {
          std::copy_n(values_.begin() + offset(slot), width_, out.begin());
          return true;
        }
      }
    }

    void insert(std::span<const std::int64_t> dims, bool clamp, std::span<const double> values) {
      if (used_.empty() || dims.size() != width_ || clamp != clamp_) {
        rehash(1024, dims.size(), clamp, false);  // a new width or clamp: start afresh
      } else if (2 * (count_ + 1) > used_.size()) {
        if (2 * used_.size() <= max_slots) {
          rehash(2 * used_.size(), width_, clamp_, true);
        } else {
          std::fill(used_.begin(), used_.end(), 0);  // full at the cap: start again
          count_ = 0;
        }
      }
      put(dims, values);
    }

   private:
    static constexpr std::size_t max_slots = std::size_t{1} << 16;

    std::size_t offset(std::size_t slot) const noexcept { return slot * width_; }

    static std::size_t hash(std::span<const std::int64_t> dims) noexcept {
      std::uint64_t h = 0x9e3779b97f4a7c15ULL;
      for (const std::int64_t d : dims) {
        h ^= static_cast<std::uint64_t>(d) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdULL;
      }
      return static_cast<std::size_t>(h ^ (h >> 33));
    }

    void put(std::span<const std::int64_t> dims, std::span<const double> values) {
      std::size_t slot = hash(dims) & mask_;
      while (used_[slot])
        slot = (slot + 1) & mask_;
      used_[slot] = 1;
      std::copy(dims.begin(), dims.end(), keys_.begin() + offset(slot));
      std::copy_n(values.begin(), width_, values_.begin() + offset(slot));
      ++count_;
    }

    // `slots` (a power of two) for vectors of `width`, keeping the entries
    // held or not.
    void rehash(std::size_t slots, std::size_t width, bool clamp, bool keep) {
      std::vector<std::int64_t> keys = std::move(keys_);
      std::vector<double> values = std::move(values_);
      std::vector<unsigned char> used = std::move(used_);
      width_ = width;
      clamp_ = clamp;
      mask_ = slots - 1;
      keys_.assign(slots * width, 0);
      values_.assign(slots * width, 0.0);
      used_.assign(slots, 0);
      count_ = 0;
      if (!keep) return;
      for (std::size_t s = 0; s < used.size(); ++s) {
        if (!used[s]) continue;
        put(std::span<const std::int64_t>(keys.data() + s * width, width),
            std::span<const double>(values.data() + s * width, width));
      }
    }

    std::vector<std::int64_t> keys_;
    std::vector<double> values_;
    std::vector<unsigned char> used_;
    std::size_t width_ = 0;
    std::size_t mask_ = 0;
    std::size_t count_ = 0;
    bool clamp_ = true;
  };

  backward_memo memo_;
  std::vector<double> start_;
  std::vector<double> starts_;
  std::vector<double> bwd_comm_;
  std::vector<double> fwd_comm_;
  std::vector<comm_cost> comm_;  // communication()'s figures, for a model without the split methods
  std::vector<double> totals_;
  std::uint64_t calls_ = 0;
  bool clamp_ = true;
};

}  // namespace embplan::inline EMBPLAN_ABI::search::detail
