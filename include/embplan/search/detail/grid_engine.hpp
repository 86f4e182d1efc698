#pragma once
// The work of NeuroShard's greedy grid search (Alg. 2), over any list of
// pieces (whole tables, or the column pieces of a beam-search state):
//  - pieces sorted by their predicted single-piece compute cost, descending
//    (Alg. 2 line 3); ties: larger bytes, then the higher (table, first
//    column) first;
//  - for each max-device-dim bound of the grid (§3.3: from the mean device dim
//    to 1.5 x it, in M steps; Alg. 2 line 7), each piece in turn to the device
//    with the lowest predicted compute cost of what it holds so far, among
//    those the constraint admits and whose device dim stays within the bound
//    (lines 9-17); ties: less memory taken, then the lower index;
//  - each complete plan priced as evaluate() prices it, and the one the Reward
//    scores highest kept (lines 18-19, with §3.3 step 4's cost; on a tie the
//    earlier bound's): under neg_max_cost_reward the paper's cheapest plan.
// Where no bound yields a plan, one more pass runs with no dim bound
// (grid_rules::unbounded_fallback). Device costs come from the per-search
// cache (cost_cache.hpp, Alg. 2 lines 12-16), or from folds the engine keeps
// for piecewise models (piecewise.hpp).
// Invariant: the shortcuts (integer bounds run once, passes resumed at the
// first step a looser bound changes, pricing cut at a bound under a reward
// decreasing in max cost, devices kept in the greedy's order, full devices
// left out of the walk) change no result: the plan is that of the plain
// grid search of Alg. 2.
// Design notes: docs/design/grid-engine.md.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/core/checked.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/piecewise.hpp"
#include "embplan/search/detail/plan_pricer.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::search::detail {

// NeuroShard §3.3: the grid of max-device-dim bounds spans [M_s, 1.5 M_s],
// M_s = the mean device dim.
inline constexpr double grid_from = 1.0;
inline constexpr double grid_to = 1.5;
inline constexpr std::int64_t no_dim_bound = std::numeric_limits<std::int64_t>::max();

// One piece of a table to place: its shard (device ignored), cache key and,
// where its owner has priced it already, its predicted single-piece compute
// cost (grid_engine::single_ms; NaN: not known, the engine prices it).
struct piece {
  shard s;
  multiset_key key;
  std::uint64_t bytes = 0;  // shard_bytes(task, s)
  double single_ms = std::numeric_limits<double>::quiet_NaN();
};

inline piece make_piece(const task& t, const shard& s) {
  return piece{s, piece_key(s), shard_bytes(t, s)};
}

// Alg. 2 line 3's order: whether a piece of single-piece cost `ca`, `ba`
// bytes and shard `a` goes before one of (cb, bb, b): descending by cost,
// then bytes, then (table, first column, first row) — a total order on the
// pieces of one state, so a list already in this order needs no sort.
inline bool greedy_first(double ca, std::uint64_t ba, const shard& a, double cb, std::uint64_t bb,
                         const shard& b) noexcept {
  return std::tie(cb, bb, b.table, b.col_begin, b.row_begin) <
         std::tie(ca, ba, a.table, a.col_begin, a.row_begin);
}

// How a grid run decides where NeuroShard's paper leaves room and its
// authors' code (daochenzha/neuroshard, NeurSharder._table_wise_shard) chose
// otherwise. The defaults are embplan's; column_beam's faithful mode sets
// all three false to make the authors' decisions.
struct grid_rules {
  // Bounds as exact integers (floor(total x (1 + k / (2 (M - 1))) / D), so
  // 1.05 x 100 is 105); false: as the authors' floats, (1.0 + 0.05 k) x
  // (total / D) in double, whose product can fall just below an integer.
  bool exact_bounds = true;
  // One more pass with no dim bound where no bound of the grid gave a plan;
  // false: no plan (the authors' (None, inf)).
  bool unbounded_fallback = true;
  // Communication predictions below zero clamped at 0; false: raw, as the
  // authors' simulator uses them (plan_pricer::set_clamp_communication).
  bool clamp_communication = true;
};

// The integer bounds of an M-point grid over [from, to] x mean device dim,
// ascending, without repeats, computed as NeuroShard's authors' code does:
// step = (1.5 - 1.0) / (M - 1), bound = (1.0 + step x k) x (total / D), a
// device dim d admitted while d <= bound, i.e. d <= floor(bound). Each
// operation rounded on its own (std::fma(x, y, 0) is the rounded product, so
// no contraction can fuse it with the addition).
inline std::vector<std::int64_t> python_dim_bounds(std::int64_t total_cols, std::size_t devices,
                                                   std::int32_t grid) {
  std::vector<std::int64_t> out;
  const double mean = static_cast<double>(total_cols) / static_cast<double>(devices);
  const double step = grid > 1 ? (1.5 - 1.0) / static_cast<double>(grid - 1) : 0.0;
  for (std::int32_t k = 0; k < grid; ++k) {
    const double scale = 1.0 + std::fma(step, static_cast<double>(k), 0.0);
    const auto b = static_cast<std::int64_t>(std::floor(std::fma(scale, mean, 0.0)));
    if (out.empty() || b != out.back()) out.push_back(b);
  }
  return out;
}

// The integer bounds of an M-point grid over [from, to] x mean device dim,
// ascending, without repeats.
inline std::vector<std::int64_t> dim_bounds(std::int64_t total_cols, std::size_t devices,
                                            std::int32_t grid) {
  // floor(total / D x (1 + k / (2 (M - 1)))) in integers, so that grid points
  // fall exactly where they should (1.05 x 100 is 105, not 104.99...).
  static_assert(grid_from == 1.0 && grid_to == 1.5, "the integer form below assumes [1, 1.5]");
  std::vector<std::int64_t> out;
  const auto d = static_cast<std::int64_t>(devices);
  const std::int64_t steps = grid > 1 ? grid - 1 : 1;
  for (std::int64_t k = 0; k < grid; ++k) {
    const std::int64_t b = total_cols * (2 * steps + k) / (2 * steps * d);
    if (out.empty() || b != out.back()) out.push_back(b);
  }
  return out;
}

// The message for a piece that fits nowhere: whole tables get the searchers'
// common message; a column piece names its table and columns.
template <constraint Constraint>
std::string no_device_for_piece(const task& t, const placement_state& st, const shard& s,
                                const Constraint& rule, std::int64_t bound) {
  const auto& spec = t.tables[s.table];
  std::string rule_text = std::string(rule.describe());
  if (bound != no_dim_bound) rule_text += " and device dim at most " + std::to_string(bound);
  if (s.cols() == spec.dim && s.rows() == spec.rows && bound == no_dim_bound)
    return no_device_for(t, st, s.table, rule);
  // A rule that explains itself (host DRAM, pinning) names what binds first.
  const std::string why = explain_of(rule, t, st, s.table);
  std::string out = "table '" + spec.name + "' (index " +
                    std::to_string(table_index_in_messages(rule, s.table)) + "), columns [" +
                    std::to_string(s.col_begin) + ", " + std::to_string(s.col_end) + ") of " +
                    std::to_string(spec.dim) + " (" + std::to_string(shard_bytes(t, s)) + " bytes";
  // A piece off HBM: what it needs of a device's host DRAM too.
  if (const std::uint64_t dram = shard_dram_bytes(t, s); dram > 0)
    out += " of HBM, " + std::to_string(dram) + " bytes of host DRAM";
  out += "), fits on no device under " + rule_text;
  if (!why.empty()) return out + "; the table: " + why;
  out += "; free memory per device:";
  const std::size_t devices = t.cluster.size();
  for (std::size_t d = 0; d < devices && d < listed_devices; ++d) {
    const std::uint64_t cap = t.cluster.devices[d].memory_bytes;
    const std::uint64_t used = st.memory_bytes[d];
    out += (d == 0 ? " " : ", ") + std::to_string(d) + ": " +
           std::to_string(used < cap ? cap - used : 0) + " bytes";
  }
  if (devices > listed_devices) out += ", ...";
  return out;
}

struct grid_outcome {
  bool ok = false;
  double cost_ms = std::numeric_limits<double>::infinity();  // the best plan's max cost
  // The best plan's place in the Reward's order, higher is better: its
  // reward.score(), or -cost_ms under a reward decreasing in max cost (the
  // same order).
  double score = -std::numeric_limits<double>::infinity();
  std::int64_t bound = 0;             // the max device dim of the best plan
  std::vector<std::uint32_t> device;  // per input piece: its device in the best plan
  std::string failure;                // when !ok and a message was asked for

  // As *this = grid_outcome{}, keeping the room of `device` (a beam search
  // reuses its states' outcomes run after run).
  void reset() noexcept {
    ok = false;
    cost_ms = std::numeric_limits<double>::infinity();
    score = -std::numeric_limits<double>::infinity();
    bound = 0;
    device.clear();
    failure.clear();
  }
};

// Whether `a` holds a plan the Reward ranks above `b`'s (or `b` has none).
inline bool better(const grid_outcome& a, const grid_outcome& b) noexcept {
  return a.ok && (!b.ok || a.score > b.score);
}

// The devices in the greedy's order, held in a buffer with room on both
// sides. The usual move of the grid search is that of a longest-processing-
// time greedy: the chosen device is among the first (the cheapest) and, once
// it holds one more piece, goes to the back half, often hundreds of places
// from where it was. In a plain array that shifts every entry in between (on
// large clusters a large part of the search's time; docs/design/grid-engine.md
// has the figures); here the move shifts whichever is shorter: the
// entries in between, or those before the device plus those after its new
// place (then the live range slides one place to the back).
class device_order {
 public:
  // Devices 0 .. n-1, sorted by `less`.
  template <class Less>
  void sort(std::size_t n, Less less) {
    buf_.resize(3 * n + 2);
    first_ = n + 1;
    last_ = first_ + n;
    std::uint32_t* r = data();
    for (std::size_t d = 0; d < n; ++d)
      r[d] = static_cast<std::uint32_t>(d);
    std::sort(r, r + n, less);
  }

  std::uint32_t* data() noexcept { return buf_.data() + first_; }
  const std::uint32_t* data() const noexcept { return buf_.data() + first_; }
  std::size_t size() const noexcept { return last_ - first_; }

  // o's order, in the middle of a buffer of o's size.
  void assign(const device_order& o) {
    const std::size_t n = o.size();
    buf_.resize(o.buf_.size());
    first_ = (buf_.size() - n) / 2;
    last_ = first_ + n;
    std::copy(o.data(), o.data() + n, data());
  }

  // Keeps the first n entries (n <= size()).
  void truncate(std::size_t n) noexcept { last_ = first_ + n; }

  // Removes the entry at `pos`.
  void erase(std::size_t pos) noexcept {
    std::uint32_t* r = data();
    const std::size_t n = size();
    if (pos < n - 1 - pos) {
      std::copy_backward(r, r + pos, r + pos + 1);
      ++first_;
    } else {
      std::copy(r + pos + 1, r + n, r + pos);
      --last_;
    }
  }

  // The entry at `pos` goes to place `to` (> pos); those in (pos, to] move
  // one place to the front.
  void move_back(std::size_t pos, std::size_t to) noexcept {
    const std::size_t n = size();
    std::uint32_t* r = data();
    const std::uint32_t d = r[pos];
    if (to - pos <= pos + (n - 1 - to)) {
      std::copy(r + pos + 1, r + to + 1, r + pos);
      r[to] = d;
      return;
    }
    if (last_ == buf_.size()) {
      recenter();
      r = data();
    }
    // [0, pos) and (to, n) one place to the back, d between them: the live
    // range then starts one place later.
    std::copy_backward(r, r + pos, r + pos + 1);
    std::copy_backward(r + to + 1, r + n, r + n + 1);
    r[to + 1] = d;
    ++first_;
    ++last_;
  }

  // The entry at `pos` goes to place `to` (< pos); those in [to, pos) move
  // one place to the back.
  void move_front(std::size_t pos, std::size_t to) noexcept {
    std::uint32_t* r = data();
    const std::uint32_t d = r[pos];
    std::copy_backward(r + to, r + pos, r + pos + 1);
    r[to] = d;
  }

 private:
  // The live range moved to the middle of the buffer (amortised: a move that
  // slides it needs this once per about D slides).
  void recenter() noexcept {
    const std::size_t n = size();
    const std::size_t at = (buf_.size() - n) / 2;
    std::copy(buf_.begin() + static_cast<std::ptrdiff_t>(first_),
              buf_.begin() + static_cast<std::ptrdiff_t>(last_),
              buf_.begin() + static_cast<std::ptrdiff_t>(at));
    first_ = at;
    last_ = at + n;
  }

  std::vector<std::uint32_t> buf_;
  std::size_t first_ = 0;
  std::size_t last_ = 0;
};

// The first size of the cost cache a grid engine on `model` is given. Where
// the engine folds device costs itself (group_pricer::folds(): the analytic
// and the neural model) the cache holds only single-piece costs and empty
// devices, a few hundred entries, so it starts at 256 slots instead of
// zero-filling 16,384 (768 KiB) per search; it grows as it fills.
template <cost_model CostModel>
std::size_t engine_cache_slots(const CostModel& model) {
  if constexpr (piecewise_compute<CostModel>::enabled) {
    if (!piecewise_compute<CostModel>::cache_groups && piecewise_compute<CostModel>::usable(model))
      return std::size_t{1} << 8;
  }
  return std::size_t{1} << 14;
}

template <cost_model CostModel, constraint Constraint, reward Reward = neg_max_cost_reward>
class grid_engine {
 public:
  grid_engine(const task& t, const CostModel& model, const Constraint& rule, cost_cache& cache,
              Reward score = {})
      : t_(t)
      , model_(model)
      , rule_(rule)
      , reward_(std::move(score))
      , cache_(cache)
      , devices_(t.cluster.size())
      , comm_nonnegative_(communication_nonnegative(model, t))
      , kinds_(t)
      , price_(t, model, kinds_)
      , start_sum_(price_.start()) {}

  const device_kinds& kinds() const noexcept { return kinds_; }
  std::uint64_t comm_calls() const noexcept { return pricer_.calls(); }

  // Predicted compute cost of `p` alone on device 0 (NeuroShard's single-table
  // cost, the sort key of Alg. 2 line 3 and the beam's "costly" ranking).
  double single_ms(const piece& p) {
    shard s = p.s;
    s.device = 0;
    return cache_
        .get(kinds_.empty(0) + p.key,
             [&] {
               return price_(std::span<const shard>(&s, 1),
                             std::span<const multiset_key>(&p.key, 1), 0);
             })
        .total_ms();
  }

  // Alg. 2 on `pieces`: the best plan (the Reward's order) over the grid of
  // `grid` bounds.
  grid_outcome run(std::span<const piece> pieces, std::int32_t grid, bool want_message,
                   const grid_rules& rules = {}) {
    grid_outcome out;
    run_into(out, pieces, grid, want_message, rules);
    flush();
    return out;
  }

  // run(), its outcome written to `out` by the next flush() at the latest: a
  // run whose complete plans are all priced in full (defers()) leaves them
  // pending, so that the plans of several runs are priced together (the
  // model's communication of many plans in one call; column_beam's children
  // of a step). `out` must stay where it is until then. Each outcome is the
  // one run() gives: the same plans priced the same, weighed in the order
  // found. All runs between two flush() calls use the same grid_rules.
  void run_batched(grid_outcome& out, std::span<const piece> pieces, std::int32_t grid,
                   bool want_message, const grid_rules& rules = {}) {
    run_into(out, pieces, grid, want_message, rules);
  }

  // Prices the pending plans of run_batched() and completes their outcomes.
  void flush() { settle(0); }

 private:
  void run_into(grid_outcome& out, std::span<const piece> pieces, std::int32_t grid,
                bool want_message, const grid_rules& rules) {
    const std::size_t n = pieces.size();
    const std::size_t devices = t_.cluster.size();
    out.reset();
    if (!pending_.empty() && rules.clamp_communication != pricer_.clamp_communication())
      flush();  // pending plans are priced under the rules they were found with
    pricer_.set_clamp_communication(rules.clamp_communication);
    const std::size_t first_pending = pending_.size();  // this run's plans from here
    prepare_order(pieces);
    min_cols_ = std::numeric_limits<std::int64_t>::max();
    for (const auto& p : pieces)
      min_cols_ = std::min<std::int64_t>(min_cols_, p.s.cols());

    std::int64_t total_cols = 0;
    for (const auto& p : pieces)
      total_cols += p.s.cols();
    const std::vector<std::int64_t>& bounds = grid_bounds(total_cols, grid, rules.exact_bounds);

    device_at_.assign(n, 0);
    prev_at_.assign(n, -1);
    snap_compute_.resize(n);
    if (price_.folds()) snap_sum_.resize(n);
    reset(cur_);
    room_.assign(devices, unlimited_room);
    least_room_ = unlimited_room;
    for (std::size_t d = 0; d < devices; ++d)
      update_room(d);
    empty_compute_ = cur_.compute;
    std::size_t from_step = 0;  // cur_ is the state before this step
    binds_.clear();
    std::string failure;
    std::size_t bi = 0;
    for (;;) {
      const std::int64_t bound = bi < bounds.size() ? bounds[bi] : no_dim_bound;
      from_rank_.assign(cur_.rank);
      set_aside_full(bound);
      bool placed_all = true;
      std::size_t end = from_step;  // cur_ holds steps [0, end)
      for (std::size_t step = from_step; step < n; ++step) {
        std::int64_t critical = no_dim_bound;
        std::size_t pos = 0;
        const std::size_t chosen = choose(step, bound, critical, pos);
        if (critical != no_dim_bound) binds_.push_back(bind{step, critical});
        if (chosen == devices) {
          placed_all = false;
          if (want_message) {
            // Name the dim bound only where it refused a device the
            // constraint admits.
            failure = no_device_for_piece(t_, cur_.st, order_shards_[step], rule_,
                                          bound_refused(step, bound) ? bound : no_dim_bound);
          }
          break;
        }
        place(step, chosen, pos);
        end = step + 1;
      }
      if (placed_all) consider(out, bound);
      // A trajectory the bound never changed is that of every looser bound
      // (the unbounded fallback included).
      if (binds_.empty() || bi >= bounds.size()) break;
      std::int64_t least = no_dim_bound;
      for (const auto& b : binds_)
        least = std::min(least, b.critical);
      // Looser bounds below every critical bound repeat this trajectory.
      ++bi;
      while (bi < bounds.size() && bounds[bi] < least)
        ++bi;
      // The fallback only when nothing fit, and only where asked for.
      if (bi == bounds.size()) {
        settle(first_pending);  // this run's plans: is there one?
        if (out.ok || !rules.unbounded_fallback) break;
      }
      const std::int64_t next = bi < bounds.size() ? bounds[bi] : no_dim_bound;
      std::size_t r = 0;
      while (binds_[r].critical > next)
        ++r;
      const std::size_t resume = binds_[r].step;
      binds_.resize(r);
      rewind(end, resume, from_step);
      from_step = resume;
    }
    if (!out.ok) out.failure = std::move(failure);  // settle() clears it if a plan comes
  }

  // dim_bounds or python_dim_bounds of (total_cols, devices_, grid), kept
  // for the next run: a beam search's states split columns and never add
  // any, so every run of a search asks for the same bounds (python_dim_bounds'
  // std::fma is a library call where the target has no FMA instruction).
  const std::vector<std::int64_t>& grid_bounds(std::int64_t total_cols, std::int32_t grid,
                                               bool exact) {
    if (bounds_.empty() || bounds_for_ != std::tuple(total_cols, grid, exact)) {
      bounds_ = exact ? dim_bounds(total_cols, devices_, grid)
                      : python_dim_bounds(total_cols, devices_, grid);
      bounds_for_ = std::tuple(total_cols, grid, exact);
    }
    return bounds_;
  }

  // Whether consider() defers pricing: every complete plan is priced in full
  // (a reward decreasing in max cost, but communication that may be negative,
  // so that no plan can be skipped) and the model prices several plans'
  // communication in one call. The run's plans are then priced together by
  // settle(), in the order they were found, and the best is kept as
  // consider() would have kept it plan by plan: the same costs (max_ms_rows
  // is max_ms bit for bit), the same comparisons in the same order.
  bool defers() const noexcept {
    if constexpr (batched_communication<CostModel> && reward_decreasing_in_max_cost<Reward>) {
      return !comm_nonnegative_;
    } else {
      return false;
    }
  }

  // The deferred plans from pending_[from] on, priced together and weighed,
  // each against its run's outcome, in the order found; then dropped.
  void settle(std::size_t from) {
    if constexpr (batched_communication<CostModel> && reward_decreasing_in_max_cost<Reward>) {
      const std::size_t plans = pending_.size() - from;
      if (plans == 0) return;
      const std::size_t devices = devices_;
      pending_cost_.resize(plans);
      pricer_.max_ms_rows(
          t_, model_,
          std::span<const compute_cost>(pending_compute_).subspan(from * devices, plans * devices),
          std::span<const std::int64_t>(pending_dims_).subspan(from * devices, plans * devices),
          std::span<double>(pending_cost_));
      for (std::size_t i = 0; i < plans; ++i) {
        const pending_plan& p = pending_[from + i];
        grid_outcome& out = *p.out;
        const double cost = pending_cost_[i];
        if (!(cost < out.cost_ms)) continue;
        out.ok = true;
        out.failure.clear();
        out.cost_ms = cost;
        out.score = -cost;
        out.bound = p.bound;
        out.device.assign(
            pending_devices_.begin() + static_cast<std::ptrdiff_t>(p.devices),
            pending_devices_.begin() + static_cast<std::ptrdiff_t>(p.devices + p.pieces));
      }
      const std::size_t devices_from = pending_[from].devices;
      pending_.resize(from);
      pending_compute_.resize(from * devices);
      pending_dims_.resize(from * devices);
      pending_devices_.resize(devices_from);
    } else {
      (void)from;
    }
  }

  // Alg. 2 lines 18-19: the complete plan in cur_ replaces out's if the
  // Reward ranks it higher.
  void consider(grid_outcome& out, std::int64_t bound) {
    double cost = 0.0;
    double score = 0.0;
    if (defers()) {
      const std::size_t n = order_.size();
      pending_.push_back(pending_plan{&out, bound, pending_devices_.size(), n});
      pending_compute_.insert(pending_compute_.end(), cur_.compute.begin(), cur_.compute.end());
      pending_dims_.insert(pending_dims_.end(), cur_.st.dim_sum.begin(), cur_.st.dim_sum.end());
      pending_devices_.resize(pending_devices_.size() + n);  // per input piece, as out.device
      std::uint32_t* device = pending_devices_.data() + pending_.back().devices;
      for (std::size_t k = 0; k < n; ++k)
        device[order_[k]] = device_at_[k];
      return;
    }
    if constexpr (reward_decreasing_in_max_cost<Reward>) {
      // A plan that cannot beat the best so far is not priced (plan_pricer.hpp).
      if (comm_nonnegative_ && out.ok) {
        if (compute_bound_ms(cur_.compute) >= out.cost_ms) return;
        cost = pricer_.max_ms_below(t_, model_, cur_.compute, cur_.st.dim_sum, out.cost_ms);
      } else {
        cost = pricer_.max_ms(t_, model_, cur_.compute, cur_.st.dim_sum);
      }
      if (!(cost < out.cost_ms)) return;
      score = -cost;
    } else {
      cost = pricer_.max_ms(t_, model_, cur_.compute, cur_.st.dim_sum);
      pricer_.plan_cost_of(cur_.compute, cur_.st.memory_bytes, cur_.st.dim_sum, scored_);
      score = static_cast<double>(reward_.score(t_, scored_));
      if (out.ok && !(score > out.score)) return;
    }
    const std::size_t n = order_.size();
    out.ok = true;
    out.cost_ms = cost;
    out.score = score;
    out.bound = bound;
    out.device.resize(n);
    for (std::size_t k = 0; k < n; ++k)
      out.device[order_[k]] = device_at_[k];
  }

  struct order_key {
    double cost;
    std::uint64_t bytes;
    std::uint32_t table;
    std::int32_t col_begin;
    std::int64_t row_begin;
    std::size_t index;
  };

  struct pass_state {
    placement_state st;
    std::vector<multiset_key> key;
    std::vector<compute_cost> compute;
    std::vector<double> load;        // compute[d].total_ms(), the greedy's device cost
    std::vector<std::int64_t> head;  // last step placed on each device, -1 if none
    // The devices in the greedy's order (before()); in a pass, those not full.
    device_order rank;
  };

  // Strict total order of the greedy's device choice: (cost, memory, index).
  static bool before(const pass_state& ps, std::size_t a, std::size_t b) noexcept {
    const double la = ps.load[a];
    const double lb = ps.load[b];
    if (la != lb) return la < lb;
    if (ps.st.memory_bytes[a] != ps.st.memory_bytes[b])
      return ps.st.memory_bytes[a] < ps.st.memory_bytes[b];
    return a < b;
  }
  bool before(std::size_t a, std::size_t b) const noexcept { return before(cur_, a, b); }

  // before(cur_, a, b) without branches: a binary search's comparisons go
  // either way at random, so a branch on them mispredicts half the time.
  bool before_flat(std::size_t a, std::size_t b) const noexcept {
    const double la = cur_.load[a];
    const double lb = cur_.load[b];
    const std::uint64_t ma = cur_.st.memory_bytes[a];
    const std::uint64_t mb = cur_.st.memory_bytes[b];
    return static_cast<bool>(static_cast<unsigned>(la < lb) |
                             (static_cast<unsigned>(la == lb) &
                              (static_cast<unsigned>(ma < mb) |
                               (static_cast<unsigned>(ma == mb) & static_cast<unsigned>(a < b)))));
  }

  // std::partition_point(first, first + n, [&](e) { return before(e, d); })
  // (the range holds the devices ranked before d, then the others) as a
  // quaternary search: three probes per step whose loads (the entry, then its
  // device's key) do not wait on each other, where a binary search waits on
  // two dependent loads per halving. (It beat both the branch-free binary
  // search and a fully branch-free quaternary one, whose table look-ups cost
  // more than the mispredictions they save; docs/design/grid-engine.md.)
  std::uint32_t* first_not_before(std::uint32_t* first, std::size_t n,
                                  std::size_t d) const noexcept {
    while (n >= 4) {
      const std::size_t a = n / 4;
      const std::size_t b = n / 2;
      const std::size_t c = a + b;
      const bool ba = before_flat(first[a], d);
      const bool bb = before_flat(first[b], d);
      const bool bc = before_flat(first[c], d);
      const std::size_t lo = bc ? c + 1 : bb ? b + 1 : ba ? a + 1 : 0;
      const std::size_t hi = bc ? n : bb ? c : ba ? b : a;
      first += lo;
      n = hi - lo;
    }
    while (n > 0) {
      const std::size_t half = n / 2;
      const bool b = before_flat(first[half], d);
      first = b ? first + half + 1 : first;
      n = b ? n - half - 1 : half;
    }
    return first;
  }

  // The admitted device with the smallest (cost, memory, index) within the
  // bound; `devices` if none; `pos` its place in cur_.rank. `critical`: at
  // most the smallest bound that would have let a device the bound refused
  // and whose key is below the chosen one's win this step (no_dim_bound if
  // there is none).
  // cur_.rank holds the devices in that order, so the walk visits exactly the
  // devices ranked before the choice (those a scan of all devices would find
  // below it) and stops at the first one within the bound that the constraint
  // admits: the same choice as comparing every device, in O(rank of the
  // choice) instead of O(D).
  std::size_t choose(std::size_t step, std::int64_t bound, std::int64_t& critical,
                     std::size_t& pos) {
    // Rooms are read only where some device may have too little (where
    // memory binds nowhere, the walk is as it was without them).
    return order_bytes_[step] > least_room_ ? choose_in<true>(step, bound, critical, pos)
                                            : choose_in<false>(step, bound, critical, pos);
  }

  template <bool ReadRoom>
  std::size_t choose_in(std::size_t step, std::int64_t bound, std::int64_t& critical,
                        std::size_t& pos) {
    const std::size_t devices = devices_;
    shard s = order_shards_[step];
    const std::int64_t room = bound - s.cols();
    const std::int64_t* dim = cur_.st.dim_sum.data();
    const std::uint32_t* rank = cur_.rank.data();
    const std::uint64_t* room_left = room_.data();
    const std::size_t walk = cur_.rank.size();
    const std::uint64_t bytes = order_bytes_[step];
    for (std::size_t p = 0; p < walk; ++p) {
      // Too little room (room_): the constraint would refuse it, whatever
      // the bound, so it is no candidate for the critical bound either
      // (which is then nearer the true one: the same plans, fewer repeated
      // steps). On large clusters with every option many devices a step are
      // passed so, and asking the constraint about each would dominate the
      // search (likely those holding a large table's row shards in
      // stage::staged's sub-task: cheap there, so ranked first,
      // and nearly full; docs/design/grid-engine.md). Skipped in a loop of its
      // own, which the compiler keeps in registers (in the walk's body it
      // reloaded its locals from the stack at every device).
      if constexpr (ReadRoom) {
        p = first_with_room(rank, room_left, p, walk, bytes);
        if (p == walk) break;
      }
      const std::uint32_t d = rank[p];
      s.device = d;
      if (dim[d] > room) {
        // Refused by the bound (need > bound): a candidate critical bound.
        // The constraint is not asked: a critical bound below the true one
        // (a device the constraint would refuse too) only makes a looser
        // bound rerun steps that it then repeats, never skip one that would
        // change; and the constraint rarely refuses a device the greedy
        // would pick.
        critical = std::min(critical, dim[d] + s.cols());
        continue;
      }
      if (admits_with_bytes(rule_, t_, cur_.st, s, bytes)) {
        pos = p;
        full_critical(d, s.cols(), critical);
        return d;
      }
    }
    full_critical(devices, s.cols(), critical);
    return devices;
  }

  // The first position from p on (or end) whose device has room for `bytes`.
  static std::size_t first_with_room(const std::uint32_t* rank, const std::uint64_t* room,
                                     std::size_t p, std::size_t end, std::uint64_t bytes) noexcept {
    while (p < end && room[rank[p]] < bytes)
      ++p;
    return p;
  }

  // room_[d] = room_of(rule_, t_, cur_.st, d), after d's state changed
  // (room_bounding_constraint: the room reads only what is placed on d);
  // least_room_ follows it down (a rewind, where rooms grow, recomputes it).
  void update_room(std::size_t d) {
    if constexpr (room_bounding_constraint<Constraint>) {
      room_[d] = room_of(rule_, t_, cur_.st, d);
      least_room_ = std::min(least_room_, room_[d]);
    }
  }

  // The full devices' part in a step's critical bound: each full dim whose
  // first-ranked device ranks before `chosen` (every one when `chosen` is
  // `devices_`, no choice).
  void full_critical(std::size_t chosen, std::int64_t cols, std::int64_t& critical) const {
    for (const auto& f : full_)
      if (chosen == devices_ || before(f.device, chosen))
        critical = std::min(critical, f.dim + cols);
  }

  // At the start of a pass under `bound` (cur_.rank holding every device):
  // the full devices leave cur_.rank for full_.
  void set_aside_full(std::int64_t bound) {
    full_.clear();
    full_from_ = bound - min_cols_;
    std::size_t kept = 0;
    std::uint32_t* r = cur_.rank.data();
    const std::size_t n = cur_.rank.size();
    for (std::size_t p = 0; p < n; ++p) {
      const std::uint32_t d = r[p];
      if (cur_.st.dim_sum[d] > full_from_) {
        note_full(d);
      } else {
        r[kept++] = d;
      }
    }
    cur_.rank.truncate(kept);
  }

  // Device `d` is full: its dim's entry in full_ keeps the first-ranked device.
  void note_full(std::uint32_t d) {
    const std::int64_t dim = cur_.st.dim_sum[d];
    for (auto& f : full_) {
      if (f.dim == dim) {
        if (before(d, f.device)) f.device = d;
        return;
      }
    }
    full_.push_back(full_dim{dim, d});
  }

  // Whether the bound refused, at `step`, a device the constraint admits.
  bool bound_refused(std::size_t step, std::int64_t bound) const {
    shard s = order_shards_[step];
    for (std::size_t d = 0; d < t_.cluster.size(); ++d) {
      s.device = static_cast<std::uint32_t>(d);
      if (cur_.st.dim_sum[d] + s.cols() > bound && rule_.admits(t_, cur_.st, s)) return true;
    }
    return false;
  }

  // Device `d`, at cur_.rank[pos], changed its key: move it to its place, or
  // out of the walk if it is now full.
  void rerank(std::size_t d, std::size_t pos) {
    std::uint32_t* r = cur_.rank.data();
    const std::size_t n = cur_.rank.size();
    const auto du = static_cast<std::uint32_t>(d);
    if (cur_.st.dim_sum[d] > full_from_) {
      cur_.rank.erase(pos);
      note_full(du);
      return;
    }
    if (pos + 1 < n && before(r[pos + 1], d)) {
      // Moves right: the first entry after pos that d precedes.
      const std::uint32_t* at = first_not_before(r + pos + 1, n - pos - 1, d);
      cur_.rank.move_back(pos, static_cast<std::size_t>(at - r) - 1);
    } else if (pos > 0 && before(d, r[pos - 1])) {
      const std::uint32_t* at = first_not_before(r, pos, d);
      cur_.rank.move_front(pos, static_cast<std::size_t>(at - r));
    }
  }

  static void sort_rank(pass_state& ps) {
    ps.rank.sort(ps.load.size(),
                 [&](std::uint32_t a, std::uint32_t b) { return before(ps, a, b); });
  }

  // cur_ = the trajectory's state before step `to`, from cur_ holding steps
  // [0, end) and from_rank_ the devices' order before step `from`. Each
  // step's placement is undone, last first (the sums are integers, and the
  // table record is undone exactly in that order), and each device it
  // touched takes the compute cost it had after its last step before `to`
  // (snap_compute_; its fold is snap_sum_ there): the figures computed when
  // that step was placed, so bitwise those of placing the steps again. The
  // devices' order: from_rank_, the devices placed between `from` and `to`
  // (whose keys differ from theirs before `from`) merged in anew.
  void rewind(std::size_t end, std::size_t to, std::size_t from) {
    moved_.assign(devices_, 0);
    changed_.clear();
    for (std::size_t k = end; k-- > to;) {
      const std::uint32_t d = device_at_[k];
      cur_.st.memory_bytes[d] -= order_bytes_[k];
      cur_.st.dram_bytes[d] -= order_dram_[k];
      cur_.st.dim_sum[d] -= order_shards_[k].cols();
      --cur_.st.shard_count[d];
      if (cur_.st.records_tables) cur_.st.note_removed(order_shards_[k].table, d);
      cur_.key[d] -= order_keys_[k];
      cur_.head[d] = prev_at_[k];
      if (moved_[d] == 0) {
        moved_[d] = 1;
        changed_.push_back(d);
      }
    }
    for (const std::uint32_t d : changed_) {
      update_room(d);
      const std::int64_t h = cur_.head[d];
      cur_.compute[d] = h >= 0 ? snap_compute_[static_cast<std::size_t>(h)] : empty_compute_[d];
      cur_.load[d] = cur_.compute[d].total_ms();
    }
    if constexpr (room_bounding_constraint<Constraint>)
      least_room_ = std::ranges::min(room_);  // rooms grew: the least again
    cur_.rank.assign(from_rank_);
    std::fill(moved_.begin(), moved_.end(), 0);
    changed_.clear();
    for (std::size_t k = std::min(to, from), last = std::max(to, from); k < last; ++k) {
      const std::uint32_t d = device_at_[k];
      if (moved_[d] == 0) {
        moved_[d] = 1;
        changed_.push_back(d);
      }
    }
    rerank_changed();
  }

  // cur_.rank holds every device in an order right but for those in
  // changed_ (whose keys changed; moved_[d] = 1 for each, 0 for the others):
  // these taken out, sorted, and merged back in with the others, which keep
  // their order. O(D + c log c) for c changed devices, where sorting all is
  // O(D log D); the result is the same (a total order).
  void rerank_changed() {
    if (changed_.empty()) return;
    const auto less = [&](std::uint32_t a, std::uint32_t b) { return before(a, b); };
    std::sort(changed_.begin(), changed_.end(), less);
    std::uint32_t* r = cur_.rank.data();
    const std::size_t n = cur_.rank.size();
    kept_.clear();
    for (std::size_t p = 0; p < n; ++p)
      if (moved_[r[p]] == 0) kept_.push_back(r[p]);
    std::merge(kept_.begin(), kept_.end(), changed_.begin(), changed_.end(), r, less);
  }

  // The pieces on device d in cur_, in placement order, priced.
  compute_cost price_group(std::size_t d) {
    group_.clear();
    group_keys_.clear();
    for (std::int64_t k = cur_.head[d]; k >= 0; k = prev_at_[static_cast<std::size_t>(k)]) {
      group_.push_back(order_shards_[static_cast<std::size_t>(k)]);
      group_.back().device = static_cast<std::uint32_t>(d);
      group_keys_.push_back(order_keys_[static_cast<std::size_t>(k)]);
    }
    std::reverse(group_.begin(), group_.end());
    std::reverse(group_keys_.begin(), group_keys_.end());
    return price_(std::span<const shard>(group_), std::span<const multiset_key>(group_keys_), d);
  }

  void prepare_order(std::span<const piece> pieces) {
    const std::size_t n = pieces.size();
    keys_.clear();
    keys_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& p = pieces[i];
      const double cost = std::isnan(p.single_ms) ? single_ms(p) : p.single_ms;
      keys_.push_back(order_key{cost, p.bytes, p.s.table, p.s.col_begin, p.s.row_begin, i});
    }
    // Descending by the whole tuple (sorted ascending, read from the end).
    // The index decides only between pieces equal in all else (never two of
    // one state; greedy_first's order). A list in that order already (the
    // beam search keeps its states so) is not sorted again.
    const auto first = [](const order_key& a, const order_key& b) {
      return std::tie(b.cost, b.bytes, b.table, b.col_begin, b.row_begin, b.index) <
             std::tie(a.cost, a.bytes, a.table, a.col_begin, a.row_begin, a.index);
    };
    if (!std::is_sorted(keys_.begin(), keys_.end(), first))
      std::sort(keys_.begin(), keys_.end(), first);
    // The previous run's keys and terms by step: most of a state's pieces
    // are the previous state's, in the same order (the beam search's states
    // differ by a few splits), so their terms' places in the pricer's store
    // are copied from there in step order instead of looked up one by one in
    // the term cache (the terms themselves stay where they are).
    order_keys_.swap(prev_keys_);
    order_terms_.swap(prev_terms_);
    order_.resize(n);
    order_shards_.resize(n);
    order_keys_.resize(n);
    order_bytes_.resize(n);
    order_dram_.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      order_[k] = keys_[k].index;
      order_bytes_[k] = keys_[k].bytes;
      order_shards_[k] = pieces[keys_[k].index].s;
      order_dram_[k] = shard_dram_bytes(t_, order_shards_[k]);  // 0 for tables in hbm
      order_keys_[k] = pieces[keys_[k].index].key;
    }
    if (price_.folds()) {
      const std::size_t kinds = kinds_.salt.size();
      const std::size_t prev_n = prev_keys_.size();
      order_terms_.resize(kinds * n);
      for (std::size_t kind = 0; kind < kinds; ++kind) {
        const std::size_t device = kinds_.representative[kind];
        const auto* prev = prev_terms_.data() + kind * prev_n;
        auto* out = order_terms_.data() + kind * n;
        std::size_t j = 0;  // the previous run's step that may hold step k's piece
        for (std::size_t k = 0; k < n; ++k) {
          const multiset_key& key = order_keys_[k];
          // The piece at j or, past up to two pieces this state lacks (a
          // split piece's halves), at j + 1 or j + 2: the same key, the same
          // term (the cache's key is the piece's).
          std::size_t at = prev_n;
          for (std::size_t skip = 0; skip < 3 && j + skip < prev_n; ++skip) {
            if (prev_keys_[j + skip] == key) {
              at = j + skip;
              break;
            }
          }
          if (at < prev_n) {
            out[k] = prev[at];
            j = at + 1;
          } else {
            out[k] = price_.term_index(order_shards_[k], key, device);
          }
        }
      }
    }
  }

  void reset(pass_state& ps) {
    const std::size_t devices = t_.cluster.size();
    ps.st.memory_bytes.assign(devices, 0);
    ps.st.dim_sum.assign(devices, 0);
    ps.st.shard_count.assign(devices, 0);
    ps.st.dram_bytes.assign(devices, 0);
    ps.st.keep_table_record(reads_table_record(rule_), t_.tables.size());  // else only cost
    ps.key.resize(devices);
    ps.compute.resize(devices);
    ps.load.resize(devices);
    ps.head.assign(devices, -1);
    for (std::size_t d = 0; d < devices; ++d) {
      ps.key[d] = kinds_.empty(d);
      ps.compute[d] =
          cache_.get(ps.key[d], [&] { return model_.compute(t_, std::span<const shard>(), d); });
      ps.load[d] = ps.compute[d].total_ms();
    }
    sort_rank(ps);
  }

  void place(std::size_t step, std::size_t d, std::size_t pos) {
    // placement_state::place with the bytes computed once per piece.
    cur_.st.memory_bytes[d] =
        checked_add(cur_.st.memory_bytes[d], order_bytes_[step], "device memory");
    if (order_dram_[step] != 0) [[unlikely]] {
      cur_.st.dram_bytes[d] =
          checked_add(cur_.st.dram_bytes[d], order_dram_[step], "device host memory");
    }
    cur_.st.dim_sum[d] += order_shards_[step].cols();
    ++cur_.st.shard_count[d];
    if (cur_.st.records_tables) {
      cur_.st.note_placed(t_.tables.size(), order_shards_[step].table,
                          static_cast<std::uint32_t>(d));
    }
    cur_.key[d] += order_keys_[step];
    const std::int64_t prev = cur_.head[d];
    prev_at_[step] = prev;
    cur_.head[d] = static_cast<std::int64_t>(step);
    device_at_[step] = static_cast<std::uint32_t>(d);
    if (price_.folds()) {
      // The device's pieces are always folded in step order, the order
      // price_group() would give them, and the cached cost of a set is the
      // fold in that order too (pieces are placed in one order of their keys
      // in every grid run: prepare_order's, a total order on keys up to
      // pieces with equal keys and terms). So the fold extended by this
      // piece is bitwise the cost the cache would return for the new set.
      // The device's fold is kept with its last step (snap_sum_), so that a
      // rewind (a later pass resuming at an earlier step) finds it there.
      cur_.compute[d] = price_.add_finish(
          snap_sum_[step], prev >= 0 ? snap_sum_[static_cast<std::size_t>(prev)] : start_sum_,
          price_.term_at(order_terms_[kinds_.kind_of[d] * order_.size() + step]),
          cur_.st.shard_count[d], d);
    } else {
      cur_.compute[d] = cache_.get(cur_.key[d], [&] { return price_group(d); });
    }
    snap_compute_[step] = cur_.compute[d];
    cur_.load[d] = cur_.compute[d].total_ms();
    update_room(d);
    rerank(d, pos);
  }

  using sum_type = typename group_pricer<CostModel>::sum_type;

  const task& t_;
  const CostModel& model_;
  const Constraint& rule_;
  Reward reward_;
  cost_cache& cache_;
  std::size_t devices_;    // t_.cluster.size()
  bool comm_nonnegative_;  // communication_nonnegative(model_, t_)
  device_kinds kinds_;
  group_pricer<CostModel> price_;
  plan_pricer pricer_;
  plan_cost scored_;  // the plan scored by a reward not decreasing in max cost

  std::vector<std::size_t> order_;          // step -> input index
  std::vector<shard> order_shards_;         // step -> shard
  std::vector<multiset_key> order_keys_;    // step -> key
  std::vector<std::uint64_t> order_bytes_;  // step -> shard_bytes
  std::vector<std::uint64_t> order_dram_;   // step -> shard_dram_bytes (host DRAM; 0 in hbm)
  std::vector<std::uint32_t> order_terms_;  // kind x step -> term (price_.term_at)
  std::vector<std::uint32_t> changed_;      // rerank_changed(): devices whose key changed,
  std::vector<std::uint32_t> kept_;         // the others in order,
  std::vector<unsigned char> moved_;        // and which is which
  std::vector<multiset_key> prev_keys_;     // the previous run's order_keys_
  std::vector<std::uint32_t> prev_terms_;   // and order_terms_
  std::vector<std::uint32_t> device_at_;    // step -> device in the current pass
  std::vector<std::int64_t> prev_at_;       // step -> previous step on the same device
  // Per device of cur_: room_of(rule_, t_, cur_.st, d), unlimited_room where
  // the constraint gives none (update_room()); least_room_, the least of them.
  std::vector<std::uint64_t> room_;
  std::uint64_t least_room_ = unlimited_room;
  struct bind {
    std::size_t step;       // a step of the current trajectory where the bound bit
    std::int64_t critical;  // the least bound that would change that step
  };
  pass_state cur_;
  // The pass's full devices (dim above full_from_ = bound - min_cols_): per
  // dim, the first-ranked one.
  struct full_dim {
    std::int64_t dim;
    std::uint32_t device;
  };
  std::vector<full_dim> full_;
  std::int64_t full_from_ = no_dim_bound;
  std::int64_t min_cols_ = 0;  // the narrowest piece's columns
  device_order from_rank_;     // cur_.rank when the current pass started
  // Per step of the current trajectory: its device's compute cost and fold
  // (price_.folds()) once the step's piece is placed; rewind() reads them.
  std::vector<compute_cost> snap_compute_;
  std::vector<sum_type> snap_sum_;
  sum_type start_sum_;                       // the fold of no piece (price_.start())
  std::vector<compute_cost> empty_compute_;  // per device: its cost with no piece
  std::vector<bind> binds_;
  std::vector<std::int64_t> bounds_;                           // grid_bounds()'s last answer
  std::tuple<std::int64_t, std::int32_t, bool> bounds_for_{};  // and its question
  // The complete plans consider() deferred (defers()), in the order found:
  // each one's run outcome, bound and devices (`pieces` entries from
  // pending_devices_[devices], per input piece), and its per-device compute
  // and dim sums (pending_compute_, pending_dims_: devices_ entries each);
  // settle() prices them into pending_cost_.
  struct pending_plan {
    grid_outcome* out;
    std::int64_t bound;
    std::size_t devices;
    std::size_t pieces;
  };
  std::vector<pending_plan> pending_;
  std::vector<compute_cost> pending_compute_;
  std::vector<std::int64_t> pending_dims_;
  std::vector<std::uint32_t> pending_devices_;
  std::vector<double> pending_cost_;
  std::vector<shard> group_;
  std::vector<multiset_key> group_keys_;
  std::vector<order_key> keys_;
};

}  // namespace embplan::inline EMBPLAN_ABI::search::detail
