#pragma once
// local_search: beyond NeuroShard — start from another searcher's plan (by
// default NeuroShard's column_beam, given the same reward) and improve it by
// steepest ascent on the Reward (uses_reward) of the simulated plan
// (evaluate(): compute + backward comm + forward comm with start skew),
// under the same cost model and constraint — under neg_max_cost_reward,
// steepest descent on the plan cost, the max over devices:
//   local_search<>{.start = column_beam{}, .max_moves = 64}
// Each round looks at the pieces of the bottleneck devices — the one with the
// largest total and the one that starts its forward all-to-all last (largest
// compute + backward comm), since every device waits for it — and tries, for
// every other device b:
//   move   a piece to b;
//   swap   a piece with a piece of b;
//   split  a piece in two halves (each a multiple of 4 columns) and move one
//          half to b — a column split the beam did not choose;
//   merge  a piece into an adjacent piece of the same table on b (undoing a
//          split that no longer pays).
// The moves come from the plan cost's bottlenecks whatever the reward; the
// candidate whose plan scores highest, if it raises the score (beyond
// rounding: by more than 1e-12 of it), is applied; the search stops when none
// does or after max_moves moves. So the result never scores below the
// starting plan. Device costs come from a per-call cache as in the beam.
// Where the start finds no plan — a task whose tables fit only when packed
// tightly, which NeuroShard's cost-ordered greedy can miss at ~95 % memory
// fill — local search starts instead from a memory-first plan
// (memory_first_plan below: pieces largest first, each on the least loaded
// device that admits it, the largest piece halved while one fits nowhere),
// so neuroshard_ls plans every task such splits can fit.
// Cost per round: O(p (D + p_b)) candidates, p pieces on the bottleneck
// devices, each priced with two device lookups and one plan pricing (O(D)).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
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
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/piecewise.hpp"
#include "embplan/search/detail/plan_pricer.hpp"
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
  std::size_t a = 0;
  std::size_t b = 0;
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
};

// Steepest ascent on the Reward. Under a reward decreasing in max cost
// (concepts/reward.hpp) it compares plan costs and builds no plan_cost.
template <cost_model CostModel, constraint Constraint, reward Reward = neg_max_cost_reward>
class local_improver {
 public:
  local_improver(const task& t, const CostModel& model, const Constraint& rule, const plan& start,
                 Reward score = {})
      : t_(t)
      , model_(model)
      , rule_(rule)
      , reward_(std::move(score))
      , kinds_(t)
      , price_(t, model, kinds_) {
    const std::size_t devices = t.cluster.size();
    pieces_ = start.shards;
    on_.assign(devices, {});
    key_.resize(devices);
    compute_.resize(devices);
    st_ = placement_state(devices);
    for (std::size_t d = 0; d < devices; ++d)
      key_[d] = kinds_.empty(d);
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      const auto& s = pieces_[i];
      on_[s.device].push_back(i);
      key_[s.device] += piece_key(s);
      st_.place(t, s);
    }
    for (std::size_t d = 0; d < devices; ++d)
      compute_[d] = device_cost(d, key_[d], on_[d], npos, npos, nullptr);
    cost_ = pricer_.max_ms(t_, model_, compute_, st_.dim_sum);
    rescore();
  }

  double cost() const noexcept { return cost_; }
  const cost_cache& cache() const noexcept { return cache_; }
  std::uint64_t comm_calls() const noexcept { return pricer_.calls(); }

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
    std::vector<std::size_t> sources{by_total};
    if (by_start != by_total) sources.push_back(by_start);
    for (const std::size_t a : sources) {
      for (const std::size_t i : on_[a]) {
        const shard& p = pieces_[i];
        if (p.replica) continue;
        for (std::size_t b = 0; b < devices; ++b) {
          if (b == a) continue;
          local_move m;
          m.a = a;
          m.b = b;
          m.out_a = i;
          m.in_b = moved(p, b);
          m.has_in_b = true;
          try_move(m);  // move
          for (const std::size_t j : on_[b]) {
            if (pieces_[j].replica) continue;
            local_move w = m;
            w.out_b = j;
            w.in_a = moved(pieces_[j], a);
            w.has_in_a = true;
            try_move(w);  // swap
          }
          if (p.cols() % 8 == 0 && p.cols() >= 8) {
            local_move h = m;
            h.in_a = moved(p, a);
            h.in_a.col_end = p.col_begin + p.cols() / 2;
            h.has_in_a = true;
            h.in_b.col_begin = h.in_a.col_end;
            try_move(h);  // split, upper half to b
          }
          for (const std::size_t j : on_[b]) {
            const shard& q = pieces_[j];
            if (q.replica || q.table != p.table || q.row_begin != p.row_begin ||
                q.row_end != p.row_end || (q.col_end != p.col_begin && p.col_end != q.col_begin))
              continue;
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

  static void unplace(const task& t, placement_state& st, const shard& s) {
    st.memory_bytes[s.device] -= shard_bytes(t, s);
    st.dim_sum[s.device] -= s.cols();
    --st.shard_count[s.device];
  }

  // The cost of device d holding `ids` minus pieces skip1/skip2, plus `extra`.
  compute_cost device_cost(std::size_t d, const multiset_key& key,
                           const std::vector<std::size_t>& ids, std::size_t skip1,
                           std::size_t skip2, const shard* extra) {
    return cache_.get(key, [&] {
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

  // The constraint sees the state with the leaving pieces removed and the
  // entering ones added in turn.
  bool admitted(const local_move& m) {
    placement_state st = st_;
    if (m.out_a != npos) unplace(t_, st, pieces_[m.out_a]);
    if (m.out_b != npos) unplace(t_, st, pieces_[m.out_b]);
    if (m.has_in_a) {
      if (!rule_.admits(t_, st, m.in_a)) return false;
      st.place(t_, m.in_a);
    }
    return !m.has_in_b || rule_.admits(t_, st, m.in_b);
  }

  void try_move(const local_move& m) {
    if (!admitted(m)) return;
    multiset_key ka = key_[m.a];
    multiset_key kb = key_[m.b];
    std::int64_t dim_a = st_.dim_sum[m.a];
    std::int64_t dim_b = st_.dim_sum[m.b];
    if (m.out_a != npos) {
      ka -= piece_key(pieces_[m.out_a]);
      dim_a -= pieces_[m.out_a].cols();
    }
    if (m.out_b != npos) {
      kb -= piece_key(pieces_[m.out_b]);
      dim_b -= pieces_[m.out_b].cols();
    }
    if (m.has_in_a) {
      ka += piece_key(m.in_a);
      dim_a += m.in_a.cols();
    }
    if (m.has_in_b) {
      kb += piece_key(m.in_b);
      dim_b += m.in_b.cols();
    }
    compute_scratch_ = compute_;
    dim_scratch_ = st_.dim_sum;
    compute_scratch_[m.a] =
        device_cost(m.a, ka, on_[m.a], m.out_a, m.out_b, m.has_in_a ? &m.in_a : nullptr);
    compute_scratch_[m.b] =
        device_cost(m.b, kb, on_[m.b], m.out_a, m.out_b, m.has_in_b ? &m.in_b : nullptr);
    dim_scratch_[m.a] = dim_a;
    dim_scratch_[m.b] = dim_b;
    const double c = trial_.max_ms(t_, model_, compute_scratch_, dim_scratch_);
    if constexpr (reward_decreasing_in_max_cost<Reward>) {
      if (c < best_cost_) {
        best_cost_ = c;
        best_ = m;
        found_ = true;
      }
    } else {
      memory_scratch_ = st_.memory_bytes;
      if (m.out_a != npos) memory_scratch_[m.a] -= shard_bytes(t_, pieces_[m.out_a]);
      if (m.out_b != npos) memory_scratch_[m.b] -= shard_bytes(t_, pieces_[m.out_b]);
      if (m.has_in_a) memory_scratch_[m.a] += shard_bytes(t_, m.in_a);
      if (m.has_in_b) memory_scratch_[m.b] += shard_bytes(t_, m.in_b);
      trial_.plan_cost_of(compute_scratch_, memory_scratch_, dim_scratch_, scored_);
      const double score = static_cast<double>(reward_.score(t_, scored_));
      if (score > best_score_) {
        best_score_ = score;
        best_ = m;
        found_ = true;
      }
    }
  }

  void apply(const local_move& m) {
    std::vector<std::size_t> gone;
    if (m.out_a != npos) gone.push_back(m.out_a);
    if (m.out_b != npos) gone.push_back(m.out_b);
    for (const std::size_t i : gone)
      unplace(t_, st_, pieces_[i]);
    std::sort(gone.begin(), gone.end(), std::greater<>());
    for (const std::size_t i : gone)
      pieces_.erase(pieces_.begin() + static_cast<std::ptrdiff_t>(i));
    if (m.has_in_a) pieces_.push_back(m.in_a);
    if (m.has_in_b) pieces_.push_back(m.in_b);
    if (m.has_in_a) st_.place(t_, m.in_a);
    if (m.has_in_b) st_.place(t_, m.in_b);
    // Rebuild the per-device lists (indices moved) and price a and b.
    for (auto& ids : on_)
      ids.clear();
    for (std::size_t i = 0; i < pieces_.size(); ++i)
      on_[pieces_[i].device].push_back(i);
    for (const std::size_t d : {m.a, m.b}) {
      key_[d] = kinds_.empty(d);
      for (const std::size_t i : on_[d])
        key_[d] += piece_key(pieces_[i]);
      compute_[d] = device_cost(d, key_[d], on_[d], npos, npos, nullptr);
    }
    cost_ = pricer_.max_ms(t_, model_, compute_, st_.dim_sum);
    rescore();
  }

  const task& t_;
  const CostModel& model_;
  const Constraint& rule_;
  Reward reward_;
  device_kinds kinds_;
  group_pricer<CostModel> price_;
  cost_cache cache_{1 << 12};
  plan_pricer pricer_;  // the current plan (its totals and starts pick the bottlenecks)
  plan_pricer trial_;   // candidates
  std::vector<shard> pieces_;
  std::vector<std::vector<std::size_t>> on_;
  std::vector<multiset_key> key_;
  std::vector<compute_cost> compute_;
  placement_state st_;
  double cost_ = 0.0;
  double best_cost_ = 0.0;
  double score_ = 0.0;       // the current plan's, when the reward is not decreasing in max cost
  double best_score_ = 0.0;  // likewise, the best candidate's
  plan_cost scored_;
  std::vector<std::uint64_t> memory_scratch_;
  bool found_ = false;
  local_move best_;
  std::vector<compute_cost> compute_scratch_;
  std::vector<std::int64_t> dim_scratch_;
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
    placement_state st(devices);
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

  // Compares complete plans by reward.score, whatever the start searcher does.
  static constexpr bool uses_reward = true;

  std::string_view name() const noexcept { return "local_search"; }

  void validate() const {
    if (max_moves < 0) detail::fail("local_search.max_moves", max_moves, "a count >= 0");
  }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t seed) const {
    validate();
    search_result out = start.search(t, model, rule, score, seed);
    if (!out.ok) {
      auto fallback = search::detail::memory_first_plan(t, model, rule);
      fallback.evaluations += out.evaluations;
      fallback.cache_lookups = out.cache_lookups;
      fallback.cache_hits = out.cache_hits;
      if (!fallback.ok) {
        fallback.failure =
            out.failure + "; memory-first placement with column halvings: " + fallback.failure;
        return fallback;
      }
      out = std::move(fallback);
    }
    search::detail::local_improver<CostModel, Constraint, Reward> improver(t, model, rule,
                                                                           out.placement, score);
    for (std::int32_t k = 0; k < max_moves && improver.improve(); ++k) {
    }
    out.placement = improver.result();
    out.cache_lookups += improver.cache().lookups();
    out.cache_hits += improver.cache().hits();
    out.evaluations += improver.cache().misses() + improver.comm_calls();
    return out;
  }
};
static_assert(searcher<local_search<>>);

}  // namespace embplan::inline EMBPLAN_ABI
