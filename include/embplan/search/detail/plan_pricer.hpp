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
#include <bit>
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

  // max_ms() of `rows` complete plans at once, for a model that prices the
  // communication of several plans in one call (batched_communication):
  // compute and dim_sums hold rows x devices, plan after plan; out[r] is, bit
  // for bit, what max_ms() returns for plan r (the same operations per row,
  // and each row's communication is the one-plan call's). The backward halves
  // of dim-sum vectors the memo lacks go to the model in one call, then the
  // forward halves of every row in another. Counts 2 calls() per plan, as
  // max_ms() does; totals() and starts() are not set.
  template <cost_model CostModel>
  requires batched_communication<CostModel>
  void max_ms_rows(const task& t, const CostModel& model, std::span<const compute_cost> compute,
                   std::span<const std::int64_t> dim_sums, std::span<double> out) {
    const std::size_t rows = out.size();
    const std::size_t devices = t.cluster.size();
    rows_bwd_.resize(rows * devices);
    misses_.clear();
    miss_dims_.clear();
    for (std::size_t r = 0; r < rows; ++r) {
      const auto dims = dim_sums.subspan(r * devices, devices);
      if (memo_.find(dims, clamp_, rows_bwd_.data() + r * devices)) continue;
      misses_.push_back(r);
      miss_dims_.insert(miss_dims_.end(), dims.begin(), dims.end());
    }
    if (!misses_.empty()) {
      // A vector missed by several rows goes to the model once.
      const std::size_t missed = misses_.size();
      distinct_rows(
          missed, devices,
          [&](std::size_t a, std::size_t b) {
            return std::equal(miss_dims_.begin() + static_cast<std::ptrdiff_t>(a * devices),
                              miss_dims_.begin() + static_cast<std::ptrdiff_t>((a + 1) * devices),
                              miss_dims_.begin() + static_cast<std::ptrdiff_t>(b * devices));
          },
          [&](std::size_t r, std::size_t d) {
            return static_cast<std::uint64_t>(miss_dims_[r * devices + d]);
          },
          [](std::size_t, std::size_t) { return std::uint64_t{0}; });
      const std::size_t unique = unique_rows_.size();
      uniq_dims_.resize(unique * devices);
      for (std::size_t u = 0; u < unique; ++u) {
        std::copy_n(miss_dims_.data() + unique_rows_[u] * devices, devices,
                    uniq_dims_.data() + u * devices);
      }
      miss_bwd_.resize(unique * devices);
      model.backward_communication_rows(t, std::span<const std::int64_t>(uniq_dims_),
                                        std::span<double>(miss_bwd_), clamp_);
      for (std::size_t u = 0; u < unique; ++u) {
        memo_.insert(std::span<const std::int64_t>(uniq_dims_).subspan(u * devices, devices),
                     clamp_, std::span<const double>(miss_bwd_).subspan(u * devices, devices));
      }
      for (std::size_t i = 0; i < missed; ++i) {
        std::copy_n(miss_bwd_.data() + row_of_[i] * devices, devices,
                    rows_bwd_.data() + misses_[i] * devices);
      }
    }
    // backward()'s and forward()'s arithmetic, row by row.
    rows_start_.resize(rows * devices);
    for (std::size_t r = 0; r < rows; ++r) {
      const compute_cost* c = compute.data() + r * devices;
      const double* bwd = rows_bwd_.data() + r * devices;
      double* start = rows_start_.data() + r * devices;
      for (std::size_t d = 0; d < devices; ++d)
        start[d] = c[d].fwd_ms + c[d].bwd_ms + bwd[d];
      const double earliest = devices ? *std::min_element(start, start + devices) : 0.0;
      for (std::size_t d = 0; d < devices; ++d)
        start[d] -= earliest;
    }
    // Rows with the same dim sums and start skews (bit for bit) get the same
    // forward figures: each distinct row goes to the model once (a beam
    // step's plans often repeat one, e.g. two bounds' trajectories that end
    // in the same plan; docs/design/search-internals.md).
    distinct_rows(
        rows, devices,
        [&](std::size_t a, std::size_t b) {
          for (std::size_t d = 0; d < devices; ++d) {
            if (dim_sums[a * devices + d] != dim_sums[b * devices + d] ||
                std::bit_cast<std::uint64_t>(rows_start_[a * devices + d]) !=
                    std::bit_cast<std::uint64_t>(rows_start_[b * devices + d]))
              return false;
          }
          return true;
        },
        [&](std::size_t r, std::size_t d) {
          return static_cast<std::uint64_t>(dim_sums[r * devices + d]);
        },
        [&](std::size_t r, std::size_t d) {
          return std::bit_cast<std::uint64_t>(rows_start_[r * devices + d]);
        });
    const std::size_t unique = unique_rows_.size();
    uniq_dims_.resize(unique * devices);
    uniq_start_.resize(unique * devices);
    for (std::size_t u = 0; u < unique; ++u) {
      const std::size_t r = unique_rows_[u];
      std::copy_n(dim_sums.data() + r * devices, devices, uniq_dims_.data() + u * devices);
      std::copy_n(rows_start_.data() + r * devices, devices, uniq_start_.data() + u * devices);
    }
    rows_fwd_.resize(unique * devices);
    model.forward_communication_rows(t, std::span<const std::int64_t>(uniq_dims_),
                                     std::span<const double>(uniq_start_),
                                     std::span<double>(rows_fwd_), clamp_);
    calls_ += 2 * rows;
    for (std::size_t r = 0; r < rows; ++r) {
      const compute_cost* c = compute.data() + r * devices;
      const double* bwd = rows_bwd_.data() + r * devices;
      const double* fwd = rows_fwd_.data() + row_of_[r] * devices;
      double worst = 0.0;
      for (std::size_t d = 0; d < devices; ++d)
        worst = std::max(worst, c[d].fwd_ms + c[d].bwd_ms + fwd[d] + bwd[d]);
      out[r] = worst;
    }
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
  // Each device's backward communication in the plan last priced.
  std::span<const double> backward_comm() const noexcept { return bwd_comm_; }
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
      if (!memo_.find(dim_sum, clamp_, bwd_comm_.data())) {
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
    if (forward_is_skew_plus_backward(model, t)) {
      // The model's own arithmetic on its own backward figures, so bit for
      // bit what it would answer (concepts/cost_model.hpp).
      const double last = devices ? *std::max_element(start_.begin(), start_.end()) : 0.0;
      for (std::size_t d = 0; d < devices; ++d)
        fwd_comm_[d] = (last - start_[d]) + bwd_comm_[d];
    } else if constexpr (split_communication<CostModel>) {
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
  // model's communication is a function of its inputs), emptied when it
  // reaches max_entries(width) or the clamp changes. The entries lie in
  // insertion order in flat arrays (a dim sum and a figure per device, and the
  // key's hash); an open-addressing index over them holds entry + 1 per slot
  // (0: empty), and the arrays have room for the cap from the first entry on
  // (virtual memory: pages are touched as entries fill them). Growing
  // rebuilds only the index, from the stored hashes: the keys and figures are
  // never moved, and the pages touched are those the entries fill. (A table
  // of whole slots, grown by copying, would spread a search's few thousand
  // entries over megabytes of fresh pages; docs/design/search-internals.md.)
  class backward_memo {
   public:
    // Copies the figures of `dims` to out[0 .. dims.size()) where held.
    bool find(std::span<const std::int64_t> dims, bool clamp, double* out) const {
      if (count_ == 0 || clamp != clamp_ || dims.size() != width_) return false;
      const std::uint64_t h = hash(dims);
      for (std::size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
        const std::uint32_t e = index_[slot];
        if (e == 0) return false;
        const std::size_t at = std::size_t{e} - 1;
        if (hashes_[at] == h && std::equal(dims.begin(), dims.end(), keys_.data() + at * width_)) {
          std::copy_n(values_.data() + at * width_, width_, out);
          return true;
        }
      }
    }

    void insert(std::span<const std::int64_t> dims, bool clamp, std::span<const double> values) {
      if (index_.empty() || dims.size() != width_ || clamp != clamp_) {
        // A new width or clamp: start afresh.
        width_ = dims.size();
        clamp_ = clamp;
        clear(std::min<std::size_t>(1024, 2 * max_entries(width_)));
        // Room for the cap at once: entries are then never moved, and the
        // pages touched are only those the entries fill (a vector grown by
        // doubling copies its entries into fresh pages each time, a page
        // fault per fresh page).
        keys_.reserve(max_entries(width_) * width_);
        values_.reserve(max_entries(width_) * width_);
        hashes_.reserve(max_entries(width_));
      } else if (count_ + 1 > max_entries(width_)) {
        clear(index_.size());  // full at the cap: start again
      } else if (2 * (count_ + 1) > index_.size()) {
        grow(2 * index_.size());
      }
      const std::uint64_t h = hash(dims);
      keys_.insert(keys_.end(), dims.begin(), dims.end());
      values_.insert(values_.end(), values.begin(),
                     values.begin() + static_cast<std::ptrdiff_t>(width_));
      hashes_.push_back(h);
      ++count_;
      link(h, static_cast<std::uint32_t>(count_));
    }

   private:
    // At most 2^15 entries, and at most max_bytes of keys and figures: an
    // entry holds a dim sum and a figure per device, 16 KiB on 1,024 devices,
    // where 2^15 entries would be 512 MiB, and a large task can fill that
    // many (docs/design/search-internals.md).
    static constexpr std::size_t max_bytes = std::size_t{16} << 20;
    static std::size_t max_entries(std::size_t width) noexcept {
      const std::size_t per_entry = width * (sizeof(std::int64_t) + sizeof(double));
      const std::size_t fit = per_entry == 0 ? std::size_t{1} << 15 : max_bytes / per_entry;
      return std::clamp<std::size_t>(std::bit_floor(std::max<std::size_t>(fit, 1)), 8,
                                     std::size_t{1} << 15);
    }

    static std::uint64_t hash(std::span<const std::int64_t> dims) noexcept {
      std::uint64_t h = 0x9e3779b97f4a7c15ULL;
      for (const std::int64_t d : dims) {
        h ^= static_cast<std::uint64_t>(d) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdULL;
      }
      return h ^ (h >> 33);
    }

    // Entry `e` - 1 into the index at the first free slot from its hash's.
    void link(std::uint64_t h, std::uint32_t e) noexcept {
      std::size_t slot = h & mask_;
      while (index_[slot] != 0)
        slot = (slot + 1) & mask_;
      index_[slot] = e;
    }

    // No entries, an index of `slots` (a power of two).
    void clear(std::size_t slots) {
      keys_.clear();
      values_.clear();
      hashes_.clear();
      count_ = 0;
      index_.assign(slots, 0);
      mask_ = slots - 1;
    }

    // The index at `slots`, every entry linked again from its stored hash.
    void grow(std::size_t slots) {
      index_.assign(slots, 0);
      mask_ = slots - 1;
      for (std::size_t e = 0; e < count_; ++e)
        link(hashes_[e], static_cast<std::uint32_t>(e + 1));
    }

    std::vector<std::int64_t> keys_;     // count_ x width_
    std::vector<double> values_;         // count_ x width_
    std::vector<std::uint64_t> hashes_;  // count_
    std::vector<std::uint32_t> index_;   // entry + 1, or 0
    std::size_t width_ = 0;
    std::size_t mask_ = 0;
    std::size_t count_ = 0;
    bool clamp_ = true;
  };

  // unique_rows_: the first of each distinct row among `rows`, in row
  // order (rows a and b alike where same(a, b)); row_of_[r]: the index there
  // of row r's. An open-addressing table over a hash of key(r, d) and
  // key2(r, d) for d < devices (rows alike must hash alike).
  template <class Same, class Key, class Key2>
  void distinct_rows(std::size_t rows, std::size_t devices, Same same, Key key, Key2 key2) {
    constexpr std::size_t empty = std::numeric_limits<std::size_t>::max();
    const std::size_t mask = std::bit_ceil(2 * rows + 1) - 1;
    slots_.assign(mask + 1, empty);
    unique_rows_.clear();
    row_of_.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      std::uint64_t h = 0x9e3779b97f4a7c15ULL;
      for (std::size_t d = 0; d < devices; ++d) {
        h = (h ^ key(r, d)) * 0xff51afd7ed558ccdULL;
        h = (h ^ key2(r, d)) * 0xc4ceb9fe1a85ec53ULL;
      }
      for (std::size_t i = static_cast<std::size_t>(h ^ (h >> 32)) & mask;; i = (i + 1) & mask) {
        if (slots_[i] == empty) {
          slots_[i] = unique_rows_.size();
          row_of_[r] = unique_rows_.size();
          unique_rows_.push_back(r);
          break;
        }
        if (same(unique_rows_[slots_[i]], r)) {
          row_of_[r] = slots_[i];
          break;
        }
      }
    }
  }

  backward_memo memo_;
  // max_ms_rows()'s buffers: the rows missing from the memo (their index and
  // dim sums) and the backward figures of the distinct ones; every row's
  // backward figures and start skews, the distinct forward rows' figures.
  std::vector<std::size_t> misses_;
  std::vector<std::int64_t> miss_dims_;
  std::vector<double> miss_bwd_, rows_bwd_, rows_start_, rows_fwd_;
  // distinct_rows()'s table and answer, and the distinct rows' inputs.
  std::vector<std::size_t> slots_, unique_rows_, row_of_;
  std::vector<std::int64_t> uniq_dims_;
  std::vector<double> uniq_start_;
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
