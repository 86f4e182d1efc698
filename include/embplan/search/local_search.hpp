#pragma once
// local_search: beyond NeuroShard — start from another searcher's plan (by
// default NeuroShard's column_beam, given the same reward) and improve it by
// steepest ascent on the Reward (uses_reward) of the simulated plan
// (evaluate(): compute + backward comm + forward comm with start skew),
// under the same cost model and constraint:
//   local_search<>{.start = column_beam{}, .max_moves = 64, .destinations = 8}
// Each round tries, for the pieces of the two bottleneck devices (the largest
// total, and the latest start of the forward all-to-all), moves to up to
// 4 x `destinations` other devices: move a piece, swap two pieces, split a
// piece by columns (halves; once no move improves, also quarters and three
// quarters, which NeuroShard's halving beam cannot make), merge adjacent
// pieces of a table, shift the boundary between two of them. The candidate
// scored highest is applied if it raises the score by more than 1e-12 of it;
// the search stops when none does or after max_moves moves.
// Invariants: the result never scores below the starting plan; device costs
// come from a per-call cache or the model's fold, as in the beam. Where the
// start finds no plan, a memory-first plan (memory_first_plan) is the start;
// with torchrec_like_fallback (the default) torchrec_like's plan is improved too
// and the one the reward scores higher is the result (memory-first's on a
// tie). A round is O(p B p_b D) (p pieces on the bottleneck devices, B
// destinations, p_b pieces on b), O(p B p_b) where the bounds set the
// candidates aside.
// Design notes: docs/design/local-search.md.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/piecewise.hpp"
#include "embplan/search/detail/plan_pricer.hpp"
#include "embplan/search/torchrec_like.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace search::detail {

// A candidate change: up to two pieces leave their devices, up to two enter.
struct local_move {
  std::size_t out_a = npos;  // piece index leaving device a
  std::size_t out_b = npos;  // piece index leaving device b
  shard in_a{};              // piece entering device a (if has_in_a)
  shard in_b{};              // piece entering device b (if has_in_b)
  bool has_in_a = false;
  bool has_in_b = false;
  // The piece whose copy in_a (in_b) is, moved from its device; npos for a
  // new shape (a split's half, a merge).
  std::size_t copy_a = npos;
  std::size_t copy_b = npos;
  std::size_t a = 0;
  std::size_t b = 0;
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
};

// Steepest ascent on the Reward. Under a reward decreasing in max cost
// (concepts/reward.hpp) it compares plan costs and builds no plan_cost.
template <cost_model CostModel, constraint Constraint, reward Reward = neg_max_cost_reward>
class local_improver {
 public:
  // `destinations`: see local_search (all devices where there are at most so many).
  local_improver(const task& t, const CostModel& model, const Constraint& rule, const plan& start,
                 Reward score = {},
                 std::size_t destinations = std::numeric_limits<std::size_t>::max())
      : t_(t)
      , model_(model)
      , rule_(rule)
      , reward_(std::move(score))
      , destinations_(std::max<std::size_t>(destinations, 1))
      , comm_nonnegative_(communication_nonnegative(model, t))
      , analytic_comm_(comm_nonnegative_ && t.cluster.size() >= 2 &&
                       forward_is_skew_plus_backward(model, t) && all_to_all_is_analytic(model, t))
      , a2a_(analytic_cost::all_to_all_of(t))
      , kinds_(t)
      , price_(t, model, kinds_) {
    const std::size_t devices = t.cluster.size();
    pieces_ = start.shards;
    on_.assign(devices, {});
    of_table_.assign(t.tables.size(), {});
    key_.resize(devices);
    compute_.resize(devices);
    st_ = placement_state(devices);
    st_.keep_table_record(reads_table_record(rule), t.tables.size());
    for (std::size_t d = 0; d < devices; ++d)
      key_[d] = kinds_.empty(d);
    index_pieces();
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      key_[pieces_[i].device] += piece_keys_[i];
      st_.place(t, pieces_[i]);
    }
    for (std::size_t d = 0; d < devices; ++d)
      compute_[d] = device_cost(d, key_[d], npos, npos, nullptr);
    cost_ = pricer_.max_ms(t_, model_, compute_, st_.dim_sum);
    rescore();
  }

  double cost() const noexcept { return cost_; }
  const cost_cache& cache() const noexcept { return cache_; }
  std::uint64_t comm_calls() const noexcept { return pricer_.calls(); }
  // Device costs a folding model priced without the cache (device_cost).
  std::uint64_t folded() const noexcept { return folded_; }
  // Candidates comm_bound set aside without pricing their plan.
  std::uint64_t bounded() const noexcept { return bounded_; }

  // From now on, splits move uneven shares too (split_widths).
  void allow_uneven_splits() noexcept { uneven_ = true; }

  // One steepest-ascent step; false when no candidate raises the score.
  bool improve() {
    const std::size_t devices = t_.cluster.size();
    if (devices < 2) return false;
    std::size_t by_total = 0;
    std::size_t by_start = 0;
    const auto totals = pricer_.totals();
    const auto starts = pricer_.starts();
    for (std::size_t d = 1; d < devices; ++d) {
      if (totals[d] > totals[by_total]) by_total = d;
      if (starts[d] > starts[by_start]) by_start = d;
    }
    if constexpr (reward_decreasing_in_max_cost<Reward>) {
      best_cost_ = cost_ - 1e-12 * cost_;  // strictly lower, beyond rounding
    } else {
      best_score_ = score_ + 1e-12 * std::abs(score_);  // strictly higher, beyond rounding
    }
    found_ = false;
    top_compute();
    if (analytic_comm_) top_comm();
    pick_destinations(totals, starts);
    std::vector<std::size_t> sources{by_total};
    if (by_start != by_total) sources.push_back(by_start);
    for (const std::size_t a : sources) {
      for (const std::size_t i : on_[a]) {
        const shard& p = pieces_[i];
        if (p.replica) continue;
        with_partners(p);
        for (const std::size_t b : to_) {
          if (b == a) continue;
          local_move m;
          m.a = a;
          m.b = b;
          m.out_a = i;
          m.in_b = moved(p, b);
          m.has_in_b = true;
          m.copy_b = i;
          try_move(m);  // move
          for (const std::size_t j : on_[b]) {
            if (pieces_[j].replica) continue;
            local_move w = m;
            w.out_b = j;
            w.in_a = moved(pieces_[j], a);
            w.has_in_a = true;
            w.copy_a = j;
            try_move(w);  // swap
          }
          for (const std::int32_t w : split_widths(p.cols(), uneven_)) {
            if (w == 0) break;
            local_move h = m;
            h.in_a = moved(p, a);
            h.in_a.col_end = p.col_end - w;
            h.has_in_a = true;
            h.in_b.col_begin = h.in_a.col_end;
            h.copy_b = npos;
            try_move(h);  // split, the upper w columns to b
          }
          for (const std::size_t j : on_[b]) {
            const shard& q = pieces_[j];
            if (!mergeable(p, q)) continue;
            local_move g;
            g.a = a;
            g.b = b;
            g.out_a = i;
            g.out_b = j;
            g.in_b = moved(q, b);
            g.in_b.col_begin = std::min(p.col_begin, q.col_begin);
            g.in_b.col_end = std::max(p.col_end, q.col_end);
            g.has_in_b = true;
            try_move(g);  // merge into q
            if (!uneven_) continue;
            for (const std::int32_t w : split_widths(p.cols(), true)) {
              if (w == 0) break;
              local_move f = g;
              const bool q_above = q.col_begin == p.col_end;
              const std::int32_t cut = q_above ? p.col_end - w : p.col_begin + w;
              f.in_a = p;
              (q_above ? f.in_a.col_end : f.in_a.col_begin) = cut;
              f.has_in_a = true;
              f.in_b = moved(q, b);
              (q_above ? f.in_b.col_begin : f.in_b.col_end) = cut;
              try_move(f);  // shift w columns of p into q
            }
          }
        }
      }
    }
    if (!found_) return false;
    apply(best_);
    return true;
  }

  plan result() const {
    plan p;
    p.shards = pieces_;
    std::sort(p.shards.begin(), p.shards.end(), [](const shard& x, const shard& y) {
      return std::tie(x.table, x.row_begin, x.col_begin, x.replica, x.device) <
             std::tie(y.table, y.row_begin, y.col_begin, y.replica, y.device);
    });
    return p;
  }

 private:
  static constexpr std::size_t npos = local_move::npos;

  // The widths a split moves to another device, 0 after the last: half the
  // piece's columns where both halves are multiples of 4; with `uneven`, a
  // quarter, a half and three quarters, each rounded to a multiple of 4 (the
  // narrowest piece TorchRec's column-wise sharding makes) and leaving at
  // least 4 behind, distinct, ascending. The beam splits in halves, as
  // NeuroShard does; the uneven widths reach splits it cannot.
  static std::array<std::int32_t, 3> split_widths(std::int32_t cols, bool uneven) noexcept {
    std::array<std::int32_t, 3> out{};
    if (!uneven) {
      if (cols % 8 == 0 && cols >= 8) out[0] = cols / 2;
      return out;
    }
    std::size_t n = 0;
    for (const std::int32_t quarters : {1, 2, 3}) {
      const std::int32_t w = (cols * quarters + 8) / 16 * 4;  // nearest multiple of 4
      if (w >= 4 && w <= cols - 4 && (n == 0 || out[n - 1] != w)) out[n++] = w;
    }
    return out;
  }

  struct top_entry {
    double total;
    std::size_t device;
  };

  // The three largest compute totals of the current plan, for the bound of
  // try_move (devices other than a candidate's two keep theirs).
  void top_compute() {
    top_.fill(top_entry{-std::numeric_limits<double>::infinity(), npos});
    for (std::size_t d = 0; d < compute_.size(); ++d)
      keep_top(top_, top_entry{compute_[d].total_ms(), d});
  }
  double max_compute_except(std::size_t a, std::size_t b) const noexcept {
    return max_except(top_, a, b);
  }
  template <class Top>
  static double max_except(const Top& top, std::size_t a, std::size_t b) noexcept {
    for (const auto& e : top)
      if (e.device != a && e.device != b) return e.total;
    return -std::numeric_limits<double>::infinity();
  }
  static void keep_top(std::array<top_entry, 3>& top, top_entry e) noexcept {
    for (auto& slot : top)
      if (e.total > slot.total) std::swap(e, slot);
  }

  // For comm_bound: the current plan's column sums per host and in all, and
  // the three largest starts (compute + backward comm) and backward comms,
  // from pricer_, which priced the current plan.
  void top_comm() {
    const std::size_t devices = st_.dim_sum.size();
    const auto per_host = static_cast<std::size_t>(t_.cluster.devices_per_host);
    host_dim_.assign((devices + per_host - 1) / per_host, 0);
    total_dim_ = 0;
    for (std::size_t d = 0; d < devices; ++d) {
      host_dim_[d / per_host] += st_.dim_sum[d];
      total_dim_ += st_.dim_sum[d];
    }
    constexpr top_entry none{-std::numeric_limits<double>::infinity(), npos};
    top_start_.fill(none);
    top_transfer_.fill(none);
    const auto starts = pricer_.starts();
    const auto transfers = pricer_.backward_comm();
    for (std::size_t d = 0; d < devices; ++d) {
      keep_top(top_start_, top_entry{starts[d], d});
      keep_top(top_transfer_, top_entry{transfers[d], d});
    }
  }

  // A lower bound on the cost of the current plan with devices a and b at
  // compute ca and cb and column sums dim_a and dim_b, for a model whose
  // communication is the analytic all-to-all (all_to_all_is_analytic): or
  // -infinity where the other devices' communication changes too (a and b
  // in different hosts of several devices, or another column total). Then
  // only a's and b's transfers change (analytic_cost::transfer_ms of their
  // own sums, their host's and the total), and the plan costs
  //   max over d of start_d + (max start - start_d) + transfer_d
  //     = max start + max transfer
  // (start_d = compute_d + transfer_d; plan_pricer's arithmetic). Rounding
  // puts the priced figure within ~10 ulps of that (every term is
  // non-negative and at most the cost), so 1e-13 of it below is a bound: a
  // candidate whose bound reaches the best cost cannot beat it, and is not
  // priced device by device.
  double comm_bound(std::size_t a, std::size_t b, const compute_cost& ca, const compute_cost& cb,
                    std::int64_t dim_a, std::int64_t dim_b) const noexcept {
    const auto per_host = static_cast<std::size_t>(t_.cluster.devices_per_host);
    const std::size_t ha = a / per_host;
    const std::size_t hb = b / per_host;
    const std::int64_t delta_a = dim_a - st_.dim_sum[a];
    const std::int64_t delta_b = dim_b - st_.dim_sum[b];
    if ((ha != hb && per_host > 1) || delta_a + delta_b != 0) {
      return -std::numeric_limits<double>::infinity();
    }
    const auto devices = st_.dim_sum.size();
    const auto host_devices = [&](std::size_t h) {
      return static_cast<double>(std::min(per_host, devices - h * per_host));
    };
    const auto total = static_cast<double>(total_dim_);
    // In one host its sum is unchanged; one device per host: each its own sum.
    const std::int64_t host_a = ha == hb ? host_dim_[ha] : dim_a;
    const std::int64_t host_b = ha == hb ? host_dim_[hb] : dim_b;
    const double ta = analytic_cost::transfer_ms(
        a2a_, static_cast<double>(dim_a), static_cast<double>(host_a), host_devices(ha), total);
    const double tb = analytic_cost::transfer_ms(
        a2a_, static_cast<double>(dim_b), static_cast<double>(host_b), host_devices(hb), total);
    const double start = std::max(
        {ca.fwd_ms + ca.bwd_ms + ta, cb.fwd_ms + cb.bwd_ms + tb, max_except(top_start_, a, b)});
    const double transfer = std::max({ta, tb, max_except(top_transfer_, a, b)});
    const double cost = start + transfer;
    return cost - 1e-13 * cost;
  }

  // base_ = the round's destinations, ascending (the order of trying every
  // device, so ties between equal candidates go the same way either way).
  void pick_destinations(std::span<const double> totals, std::span<const double> starts) {
    const std::size_t devices = totals.size();
    base_.resize(devices);
    for (std::size_t d = 0; d < devices; ++d)
      base_[d] = d;
    const std::size_t keep = destinations_;
    if (devices > keep) {
      ranked_ = base_;
      const auto lowest = [&](std::span<const double> by) {
        std::nth_element(
            ranked_.begin(), ranked_.begin() + static_cast<std::ptrdiff_t>(keep), ranked_.end(),
            [&](std::size_t x, std::size_t y) { return std::tie(by[x], x) < std::tie(by[y], y); });
        return std::span<const std::size_t>(ranked_.data(), keep);
      };
      base_.clear();
      for (const auto d : lowest(starts))
        base_.push_back(d);
      for (const auto d : lowest(totals))
        base_.push_back(d);
      rank_key_.resize(devices);
      for (std::size_t d = 0; d < devices; ++d)
        rank_key_[d] = -starts[d];
      for (const auto d : lowest(rank_key_))
        base_.push_back(d);
      for (std::size_t d = 0; d < devices; ++d)
        rank_key_[d] = static_cast<double>(st_.dim_sum[d]);
      for (const auto d : lowest(rank_key_))
        base_.push_back(d);
      std::sort(base_.begin(), base_.end());
      base_.erase(std::unique(base_.begin(), base_.end()), base_.end());
    }
    all_ = base_.size() == devices;
  }

  // to_ = base_ and the devices holding a piece that `p` merges into.
  void with_partners(const shard& p) {
    to_ = base_;
    if (all_) return;
    const std::size_t before = to_.size();
    for (const std::size_t j : of_table_[p.table]) {
      const shard& q = pieces_[j];
      if (mergeable(p, q)) to_.push_back(q.device);
    }
    if (to_.size() == before) return;
    std::sort(to_.begin(), to_.end());
    to_.erase(std::unique(to_.begin(), to_.end()), to_.end());
  }

  static bool mergeable(const shard& p, const shard& q) noexcept {
    return !q.replica && q.table == p.table && q.row_begin == p.row_begin &&
           q.row_end == p.row_end && (q.col_end == p.col_begin || p.col_end == q.col_begin);
  }

  // on_, of_table_, piece_keys_ and terms_on_ anew from pieces_.
  void index_pieces() {
    for (auto& ids : on_)
      ids.clear();
    for (auto& ids : of_table_)
      ids.clear();
    piece_keys_.resize(pieces_.size());
    place_on_.resize(pieces_.size());
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      place_on_[i] = on_[pieces_[i].device].size();
      on_[pieces_[i].device].push_back(i);
      of_table_[pieces_[i].table].push_back(i);
      piece_keys_[i] = piece_key(pieces_[i]);
    }
    if (price_.piecewise()) {
      folds_ready_.resize(on_.size(), 0);
      without_.resize(on_.size());
      all_fold_.resize(on_.size(), price_.start());
      terms_on_.resize(on_.size());
      for (std::size_t d = 0; d < on_.size(); ++d) {
        terms_on_[d].clear();
        for (const std::size_t i : on_[d])
          terms_on_[d].push_back(price_.term_index(pieces_[i], piece_keys_[i], d));
      }
    }
  }

  static shard moved(shard s, std::size_t d) {
    s.device = static_cast<std::uint32_t>(d);
    return s;
  }

  // The current plan's score, for a reward not decreasing in max cost.
  void rescore() {
    if constexpr (!reward_decreasing_in_max_cost<Reward>) {
      pricer_.plan_cost_of(compute_, st_.memory_bytes, st_.dim_sum, scored_);
      score_ = static_cast<double>(reward_.score(t_, scored_));
    }
  }

  // The cost of device d holding its pieces (on_[d]) minus pieces skip1 and
  // skip2, plus `extra`; `key` the key of that set (unused where the model
  // folds, price_.folds()). A folding model (the analytic and the neural one)
  // is priced by its fold, not looked up in the cache: a few dozen additions
  // of terms already at hand cost no more than a look-up in a cache of a
  // million sets, and need far less memory (docs/design/local-search.md).
  compute_cost device_cost(std::size_t d, const multiset_key& key, std::size_t skip1,
                           std::size_t skip2, const shard* extra, std::size_t copy = npos) {
    if (price_.folds()) {
      ++folded_;
      return fold_cost(d, skip1, skip2, extra, copy);
    }
    return cache_.get(key, [&] {
      if (price_.piecewise()) return fold_cost(d, skip1, skip2, extra, copy);
      const std::vector<std::size_t>& ids = on_[d];
      group_.clear();
      keys_.clear();
      for (const std::size_t i : ids) {
        if (i == skip1 || i == skip2) continue;
        group_.push_back(moved(pieces_[i], d));
        keys_.push_back(piece_key(group_.back()));
      }
      if (extra != nullptr) {
        group_.push_back(*extra);
        keys_.push_back(piece_key(*extra));
      }
      return price_(std::span<const shard>(group_), std::span<const multiset_key>(keys_), d);
    });
  }

  // device_cost()'s figure by a piecewise model's fold over the terms kept
  // per device (terms_on_), in the order group_pricer's operator() takes
  // them: its figure bit for bit, without building the group or hashing its
  // pieces. The folds of the device's pieces without one of them, and with
  // all, are kept (fold_device), so a candidate's device costs one term
  // added and the finish.
  // `extra` a copy of piece `copy` (npos: of none) moved to d takes that
  // piece's term where both devices are of one kind (device_kinds): the same
  // key and kind, so the term term() would find.
  compute_cost fold_cost(std::size_t d, std::size_t skip1, std::size_t skip2, const shard* extra,
                         std::size_t copy) {
    const bool skips1 = skip1 != npos && pieces_[skip1].device == d;
    const bool skips2 = skip2 != npos && pieces_[skip2].device == d;
    if (skips1 && skips2) [[unlikely]] {  // two pieces leave one device: no move does so
      const std::vector<std::size_t>& ids = on_[d];
      auto acc = price_.start();
      std::size_t n = 0;
      for (std::size_t k = 0; k < ids.size(); ++k) {
        if (ids[k] == skip1 || ids[k] == skip2) continue;
        price_.add(acc, price_.term_at(terms_on_[d][k]));
        ++n;
      }
      if (extra != nullptr) {
        price_.add(acc, price_.term(*extra, piece_key(*extra), d));
        ++n;
      }
      return price_.finish(acc, n, d);
    }
    fold_device(d);
    const auto& acc = skips1   ? without_[d][place_on_[skip1]]
                      : skips2 ? without_[d][place_on_[skip2]]
                               : all_fold_[d];
    const std::size_t n = on_[d].size() - (skips1 || skips2 ? 1 : 0);
    if (extra == nullptr) return price_.finish(acc, n, d);
    if (copy != npos) {
      const std::size_t from = pieces_[copy].device;
      if (kinds_.kind_of[from] == kinds_.kind_of[d]) {
        return price_.add_finish(scratch_fold_, acc,
                                 price_.term_at(terms_on_[from][place_on_[copy]]), n + 1, d);
      }
    }
    return price_.add_finish(scratch_fold_, acc, price_.term(*extra, piece_key(*extra), d), n + 1,
                             d);
  }

  // all_fold_[d] and without_[d] for the device's current pieces: the fold
  // of all of them, and per piece (its place in on_[d]) the fold of the
  // others, each in on_[d]'s order. O(n^2) additions for n pieces, once per
  // change of the device's pieces (apply() clears folds_ready_ for the two
  // devices it changes; the others' pieces stay in the same order).
  void fold_device(std::size_t d) {
    if (folds_ready_[d] != 0) return;
    const std::vector<std::uint32_t>& terms = terms_on_[d];
    const std::size_t n = terms.size();
    auto& without = without_[d];
    without.assign(n, price_.start());
    auto all = price_.start();
    for (std::size_t k = 0; k < n; ++k) {
      const auto& term = price_.term_at(terms[k]);
      for (std::size_t j = 0; j < n; ++j)
        if (j != k) price_.add(without[j], term);
      price_.add(all, term);
    }
    all_fold_[d] = all;
    folds_ready_[d] = 1;
  }

  // The constraint sees the state with the leaving pieces removed and the
  // entering ones added in turn (st_ changed in place, then restored: integer
  // sums, so exactly).
  bool admitted(const local_move& m) {
    if (m.out_a != npos) st_.unplace(t_, pieces_[m.out_a]);
    if (m.out_b != npos) st_.unplace(t_, pieces_[m.out_b]);
    bool ok = !m.has_in_a || rule_.admits(t_, st_, m.in_a);
    if (ok && m.has_in_a) {
      st_.place(t_, m.in_a);
      ok = !m.has_in_b || rule_.admits(t_, st_, m.in_b);
      st_.unplace(t_, m.in_a);
    } else if (ok) {
      ok = !m.has_in_b || rule_.admits(t_, st_, m.in_b);
    }
    if (m.out_b != npos) st_.place(t_, pieces_[m.out_b]);
    if (m.out_a != npos) st_.place(t_, pieces_[m.out_a]);
    return ok;
  }

  // Where the model folds, a candidate is priced, bounded and only then put
  // to the constraint: its two device costs are a term and a head each, the
  // bounds set most candidates aside, and admitted() is the dearer check (a
  // large part of the search's time when it came first;
  // docs/design/local-search.md). A model
  // priced through the cache is asked only about admitted candidates. Either
  // way the best admitted candidate wins.
  void try_move(const local_move& m) {
    const bool keyed = !price_.folds();  // the cache's keys (device_cost)
    if (keyed && !admitted(m)) return;
    multiset_key ka = key_[m.a];
    multiset_key kb = key_[m.b];
    std::int64_t dim_a = st_.dim_sum[m.a];
    std::int64_t dim_b = st_.dim_sum[m.b];
    if (m.out_a != npos) {
      if (keyed) ka -= piece_keys_[m.out_a];
      dim_a -= pieces_[m.out_a].cols();
    }
    if (m.out_b != npos) {
      if (keyed) kb -= piece_keys_[m.out_b];
      dim_b -= pieces_[m.out_b].cols();
    }
    if (m.has_in_a) {
      if (keyed) ka += piece_key(m.in_a);
      dim_a += m.in_a.cols();
    }
    if (m.has_in_b) {
      if (keyed) kb += piece_key(m.in_b);
      dim_b += m.in_b.cols();
    }
    const compute_cost ca =
        device_cost(m.a, ka, m.out_a, m.out_b, m.has_in_a ? &m.in_a : nullptr, m.copy_a);
    const compute_cost cb =
        device_cost(m.b, kb, m.out_a, m.out_b, m.has_in_b ? &m.in_b : nullptr, m.copy_b);
    if constexpr (reward_decreasing_in_max_cost<Reward>) {
      // Every device's total is at least its compute where communication is
      // never negative (plan_pricer.hpp): a candidate whose compute alone
      // reaches the best cost cannot replace it, and is not priced.
      if (comm_nonnegative_ &&
          std::max({ca.total_ms(), cb.total_ms(), max_compute_except(m.a, m.b)}) >= best_cost_)
        return;
      if (analytic_comm_ && comm_bound(m.a, m.b, ca, cb, dim_a, dim_b) >= best_cost_) {
        ++bounded_;
        return;
      }
    }
    if (!keyed && !admitted(m)) return;
    // The candidate's figures in place of the current plan's, then back.
    const compute_cost old_a = compute_[m.a];
    const compute_cost old_b = compute_[m.b];
    const std::int64_t old_dim_a = st_.dim_sum[m.a];
    const std::int64_t old_dim_b = st_.dim_sum[m.b];
    compute_[m.a] = ca;
    compute_[m.b] = cb;
    st_.dim_sum[m.a] = dim_a;
    st_.dim_sum[m.b] = dim_b;
    if constexpr (reward_decreasing_in_max_cost<Reward>) {
      // Where communication is never negative, a candidate whose compute +
      // backward comm already reaches the best cost on some device is not
      // given the forward all-to-all (plan_pricer::max_ms_below; exact).
      const double c = comm_nonnegative_
                           ? trial_.max_ms_below(t_, model_, compute_, st_.dim_sum, best_cost_)
                           : trial_.max_ms(t_, model_, compute_, st_.dim_sum);
      if (c < best_cost_) {
        best_cost_ = c;
        best_ = m;
        found_ = true;
      }
    } else {
      trial_.max_ms(t_, model_, compute_, st_.dim_sum);  // plan_cost_of reads its figures
      const std::uint64_t old_memory_a = st_.memory_bytes[m.a];
      const std::uint64_t old_memory_b = st_.memory_bytes[m.b];
      if (m.out_a != npos) st_.memory_bytes[m.a] -= shard_bytes(t_, pieces_[m.out_a]);
      if (m.out_b != npos) st_.memory_bytes[m.b] -= shard_bytes(t_, pieces_[m.out_b]);
      if (m.has_in_a) st_.memory_bytes[m.a] += shard_bytes(t_, m.in_a);
      if (m.has_in_b) st_.memory_bytes[m.b] += shard_bytes(t_, m.in_b);
      trial_.plan_cost_of(compute_, st_.memory_bytes, st_.dim_sum, scored_);
      st_.memory_bytes[m.a] = old_memory_a;
      st_.memory_bytes[m.b] = old_memory_b;
      const double score = static_cast<double>(reward_.score(t_, scored_));
      if (score > best_score_) {
        best_score_ = score;
        best_ = m;
        found_ = true;
      }
    }
    compute_[m.a] = old_a;
    compute_[m.b] = old_b;
    st_.dim_sum[m.a] = old_dim_a;
    st_.dim_sum[m.b] = old_dim_b;
  }

  void apply(const local_move& m) {
    std::vector<std::size_t> gone;
    if (m.out_a != npos) gone.push_back(m.out_a);
    if (m.out_b != npos) gone.push_back(m.out_b);
    for (const std::size_t i : gone)
      st_.unplace(t_, pieces_[i]);
    std::sort(gone.begin(), gone.end(), std::greater<>());
    for (const std::size_t i : gone)
      pieces_.erase(pieces_.begin() + static_cast<std::ptrdiff_t>(i));
    if (m.has_in_a) pieces_.push_back(m.in_a);
    if (m.has_in_b) pieces_.push_back(m.in_b);
    if (m.has_in_a) st_.place(t_, m.in_a);
    if (m.has_in_b) st_.place(t_, m.in_b);
    // Rebuild the per-device and per-table lists (indices moved); price a and b.
    index_pieces();
    if (price_.piecewise()) folds_ready_[m.a] = folds_ready_[m.b] = 0;
    for (const std::size_t d : {m.a, m.b}) {
      key_[d] = kinds_.empty(d);
      for (const std::size_t i : on_[d])
        key_[d] += piece_keys_[i];
      compute_[d] = device_cost(d, key_[d], npos, npos, nullptr);
    }
    cost_ = pricer_.max_ms(t_, model_, compute_, st_.dim_sum);
    rescore();
  }

  const task& t_;
  const CostModel& model_;
  const Constraint& rule_;
  Reward reward_;
  std::size_t destinations_;
  bool comm_nonnegative_;  // communication_nonnegative(model_, t_)
  // The analytic all-to-all, never negative, forward = skew + backward: the
  // candidates are bounded by comm_bound.
  bool analytic_comm_;
  analytic_cost::all_to_all_terms a2a_;
  device_kinds kinds_;
  group_pricer<CostModel> price_;
  // Device costs of a model that does not fold (device_cost), at most
  // cache_slots slots (32 bytes each: 64 MiB): a round
  // prices O(p B p_b) device sets, many of them again the next round, but
  // over a run on hundreds of pieces per device millions of distinct ones
  // (docs/design/local-search.md); emptied when full (key_map), which
  // changes no figure.
  static constexpr std::size_t cache_slots = std::size_t{1} << 20;
  cost_cache cache_{1 << 12, cache_slots};
  std::uint64_t folded_ = 0;  // folded()
  plan_pricer pricer_;        // the current plan (its totals and starts pick the bottlenecks)
  plan_pricer trial_;         // candidates
  std::vector<shard> pieces_;
  std::vector<std::vector<std::size_t>> on_;        // device -> its pieces
  std::vector<std::vector<std::size_t>> of_table_;  // table -> its pieces
  std::vector<multiset_key> piece_keys_;            // piece -> piece_key
  std::vector<std::size_t> place_on_;               // piece -> its place in on_[its device]
  // Piecewise models: device -> the terms of its pieces (price_.term_index),
  // as on_; and the folds fold_device() keeps.
  using sum_type = typename group_pricer<CostModel>::sum_type;
  std::vector<std::vector<std::uint32_t>> terms_on_;
  std::vector<unsigned char> folds_ready_;
  std::vector<std::vector<sum_type>> without_;
  std::vector<sum_type> all_fold_;
  sum_type scratch_fold_{};
  std::vector<multiset_key> key_;
  std::vector<compute_cost> compute_;
  placement_state st_;
  double cost_ = 0.0;
  double best_cost_ = 0.0;
  double score_ = 0.0;       // the current plan's, when the reward is not decreasing in max cost
  double best_score_ = 0.0;  // likewise, the best candidate's
  plan_cost scored_;
  bool found_ = false;
  local_move best_;
  bool uneven_ = false;             // split_widths
  std::array<top_entry, 3> top_{};  // top_compute()
  // top_comm(): per host and total column sums, the largest starts and transfers.
  std::vector<std::int64_t> host_dim_;
  std::int64_t total_dim_ = 0;
  std::array<top_entry, 3> top_start_{};
  std::array<top_entry, 3> top_transfer_{};
  std::uint64_t bounded_ = 0;        // bounded()
  std::vector<std::size_t> base_;    // the round's destinations
  std::vector<std::size_t> ranked_;  // scratch of pick_destinations
  std::vector<double> rank_key_;     // likewise
  std::vector<std::size_t> to_;      // base_ and one piece's merge partners
  bool all_ = true;                  // base_ holds every device
  std::vector<shard> group_;
  std::vector<multiset_key> keys_;
};

// A plan built for memory first, for tasks the start searcher could not fit:
// pieces by bytes, largest first, each on the admitting device with the least
// predicted compute so far (shard_cost; ties: less memory, lower index); while
// a piece fits nowhere, the largest splittable piece (by bytes) is halved by
// columns (halves multiples of 4, as the beam splits) and the pieces placed
// again. Fails, with the last piece that fit nowhere, once nothing can be
// split or after max_halvings halvings (each round re-places every piece: a
// task that fits no way would otherwise take O(splits x pieces x devices)).
// Deterministic: no randomness, ties broken by index.
template <cost_model CostModel, constraint Constraint>
search_result memory_first_plan(const task& t, const CostModel& model, const Constraint& rule,
                                std::size_t max_halvings = 256) {
  search_result out;
  const std::size_t devices = t.cluster.size();
  std::vector<shard> pieces;
  pieces.reserve(t.tables.size());
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    pieces.push_back(whole_table(t, i, 0));
  const auto bytes_of = [&](const shard& s) { return shard_bytes(t, s); };
  std::vector<double> load(devices);
  std::size_t halvings = 0;
  for (;;) {
    std::stable_sort(pieces.begin(), pieces.end(), [&](const shard& a, const shard& b) {
      return std::tuple(bytes_of(b), a.table, a.col_begin) <
             std::tuple(bytes_of(a), b.table, b.col_begin);
    });
    placement_state st(t);
    std::fill(load.begin(), load.end(), 0.0);
    plan p;
    bool placed_all = true;
    for (shard s : pieces) {
      std::size_t chosen = devices;
      for (std::size_t d = 0; d < devices; ++d) {
        if (chosen != devices && std::tie(load[d], st.memory_bytes[d]) >=
                                     std::tie(load[chosen], st.memory_bytes[chosen]))
          continue;
        s.device = static_cast<std::uint32_t>(d);
        if (rule.admits(t, st, s)) chosen = d;
      }
      if (chosen == devices) {
        out.failure = no_device_for_piece(t, st, s, rule, no_dim_bound);
        placed_all = false;
        break;
      }
      s.device = static_cast<std::uint32_t>(chosen);
      st.place(t, s);
      load[chosen] += static_cast<double>(model.shard_cost(t, s));
      ++out.evaluations;
      p.shards.push_back(s);
    }
    if (placed_all) {
      out.placement = std::move(p);
      out.ok = true;
      out.failure.clear();
      return out;
    }
    // Halve the largest piece that can be halved (pieces are sorted by bytes).
    const auto it =
        std::find_if(pieces.begin(), pieces.end(), [](const shard& s) { return splittable(s); });
    if (it == pieces.end()) return out;
    if (halvings == max_halvings) {
      out.failure += " (after " + std::to_string(halvings) + " column halvings, the most it makes)";
      return out;
    }
    ++halvings;
    shard high = *it;
    it->col_end = it->col_begin + it->cols() / 2;
    high.col_begin = it->col_end;
    pieces.push_back(high);
  }
}

}  // namespace search::detail

template <class Start = column_beam>
struct local_search {
  Start start{};
  std::int32_t max_moves = 64;  // improving moves applied at most
  // Devices a bottleneck piece may go to per ranking (earliest start, lowest
  // total, latest start, fewest columns); with at most this many devices,
  // every device (so a small cluster gets the plan of trying every device).
  std::int32_t destinations = 8;
  // Where the start finds no plan, also try torchrec_like's as the start
  // (docs/design/local-search.md).
  bool torchrec_like_fallback = true;

  // Compares complete plans by reward.score, whatever the start searcher does.
  static constexpr bool uses_reward = true;

  std::string_view name() const noexcept { return "local_search"; }
  std::string label() const { return "local_search(" + searcher_label(start) + ")"; }

  void validate() const {
    if (max_moves < 0) detail::fail("local_search.max_moves", max_moves, "a count >= 0");
    if (destinations <= 0) {
      detail::fail("local_search.destinations", destinations, "a positive number of devices");
    }
  }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t seed) const {
    validate();
    search_result out = start.search(t, model, rule, score, seed);
    if (out.ok) {
      improve(t, model, rule, score, out);
      return out;
    }
    auto fallback = search::detail::memory_first_plan(t, model, rule);
    search_result other;
    if (torchrec_like_fallback) other = torchrec_like{}.search(t, model, rule, score, seed);
    if (!fallback.ok && !other.ok) {
      fallback.evaluations += out.evaluations + other.evaluations;
      fallback.cache_lookups = out.cache_lookups;
      fallback.cache_hits = out.cache_hits;
      fallback.failure =
          out.failure + "; memory-first placement with column halvings: " + fallback.failure;
      return fallback;
    }
    // Each start improved; the result counts every attempt's work.
    std::uint64_t evaluations = out.evaluations + fallback.evaluations + other.evaluations;
    std::uint64_t lookups = out.cache_lookups;
    std::uint64_t hits = out.cache_hits;
    search_result* best = nullptr;
    double best_score = 0.0;
    for (search_result* r : {&fallback, &other}) {
      if (!r->ok) continue;
      r->evaluations = r->cache_lookups = r->cache_hits = 0;
      improve(t, model, rule, score, *r);
      evaluations += r->evaluations;
      lookups += r->cache_lookups;
      hits += r->cache_hits;
      const auto s = static_cast<double>(score.score(t, evaluate(t, r->placement, model)));
      if (best == nullptr || s > best_score) {  // memory-first's on a tie
        best = r;
        best_score = s;
      }
    }
    best->evaluations = evaluations;
    best->cache_lookups = lookups;
    best->cache_hits = hits;
    return std::move(*best);
  }

 private:
  // Up to max_moves improving moves from r's plan; r's counts take the local
  // search's.
  template <cost_model CostModel, constraint Constraint, reward Reward>
  void improve(const task& t, const CostModel& model, const Constraint& rule, const Reward& score,
               search_result& r) const {
    search::detail::local_improver<CostModel, Constraint, Reward> improver(
        t, model, rule, r.placement, score, static_cast<std::size_t>(destinations));
    // Steepest ascent with halving splits to a local optimum, then on from it
    // with uneven splits and shifts too: the larger neighbourhood from the
    // start led to other optima, some worse; from the halving moves' optimum
    // it can only improve on it (docs/design/local-search.md).
    std::int32_t k = 0;
    for (; k < max_moves && improver.improve(); ++k) {
    }
    if (k < max_moves) {
      improver.allow_uneven_splits();
      for (; k < max_moves && improver.improve(); ++k) {
      }
    }
    r.placement = improver.result();
    r.cache_lookups += improver.cache().lookups();
    r.cache_hits += improver.cache().hits();
    r.evaluations += improver.cache().misses() + improver.folded() + improver.comm_calls();
  }
};
static_assert(searcher<local_search<>>);

}  // namespace embplan::inline EMBPLAN_ABI
