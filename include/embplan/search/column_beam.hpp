#pragma once
// column_beam: NeuroShard's online search (§3.3, Alg. 1 with Alg. 2 inside).
// The outer loop is a beam search over column-wise splits; each state's
// table-wise plan is found by the greedy grid search (grid_greedy), and both
// share one cost cache per search call (§3.3, "Implementation with caching"):
//   column_beam{.candidates = 10, .width = 3, .steps = 10, .grid = 11}
// (N, K, L, M — the paper's defaults, §4 "Implementation details").
// A state is a list of pieces; a split halves one piece into two pieces of
// half the columns (§3.3), allowed only while the halves stay multiples of 4
// (FBGEMM TBE rows). Per step and per state of the beam (Alg. 1 lines 8-18)
// the candidates are the top N splittable pieces by predicted single-piece
// compute cost ∪ the top N by bytes (line 9); each candidate's split state is
// priced by the grid search, the best plan seen anywhere is the answer
// (lines 14-17), and the K best distinct states form the next beam (line 20).
// "Best" is the Reward's order (uses_reward); under neg_max_cost_reward, the
// paper's cheapest.
// Invariants: the unsplit state is the plan to beat, so the result never
// scores below grid_greedy's under the same reward; each choice that differs
// from the authors' code (daochenzha/neuroshard, NeurSharder.shard) is a
// switch of column_beam_improvements, and faithful_column_beam returns the
// authors' plans (test/search/neuroshard_parity_test.cpp); the plan is the
// same for any `threads`. A task with no plan in any state fails with the
// reason of the unsplit state.
// Design notes: docs/design/column-beam.md.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/grid_engine.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace search::detail {

// Halves of a piece must stay multiples of this many columns.
inline constexpr std::int32_t split_multiple = 4;

inline bool splittable(const shard& s) noexcept {
  return s.cols() % (2 * split_multiple) == 0 && s.cols() >= 2 * split_multiple;
}

struct beam_state {
  // In the grid search's order (greedy_first), each priced (piece::single_ms),
  // so that the grid search neither prices nor sorts them again.
  std::vector<piece> pieces;
  multiset_key key;  // sum of the pieces' keys
  grid_outcome result;
  std::uint64_t largest_piece_bytes = 0;
  std::size_t born = 0;  // generation order within its step
  // The faithful mode's piece order: the authors' piece indices (the task's
  // tables, then each split's upper half appended); empty otherwise.
  std::vector<shard> by_index;
};

// (table, columns, rows) of every piece, sorted: equal for equal states.
inline std::vector<std::tuple<std::uint32_t, std::int32_t, std::int64_t, std::int64_t>> signature(
    const std::vector<piece>& pieces) {
  std::vector<std::tuple<std::uint32_t, std::int32_t, std::int64_t, std::int64_t>> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces)
    out.emplace_back(p.s.table, p.s.cols(), p.s.row_begin, p.s.row_end);
  std::sort(out.begin(), out.end());
  return out;
}

// Whether two states hold the same pieces (table, columns and rows exactly).
// A state keeps its pieces in goes_first order: a total order on a state's
// pieces, each piece's single-piece cost the same figure wherever it is
// priced (a cache of exact figures). So two states hold the same pieces
// exactly when their lists are equal place by place.
inline bool same_pieces(const std::vector<piece>& a, const std::vector<piece>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const piece& x, const piece& y) {
    return std::tie(x.s.table, x.s.col_begin, x.s.col_end, x.s.row_begin, x.s.row_end) ==
           std::tie(y.s.table, y.s.col_begin, y.s.col_end, y.s.row_begin, y.s.row_end);
  });
}

// np.argpartition(values, kth) as NumPy 1.24 computes it for float64
// (introselect: median-of-3 pivots, an O(n kth) selection for kth < 3, a max
// scan for kth = n - 1): the permutation of 0 .. n-1 it returns, so that where
// values tie, the same indices land on each side of kth. Checked against
// NumPy 1.24.2 on 200,000 random arrays full of ties (n up to 140) and in
// test/search/neuroshard_parity_test.cpp. NumPy switches to a
// median-of-medians pivot after 2 log2(n) partitions; this keeps median-of-3
// there (never reached in those checks: it takes an adversarial order).
inline void numpy_argpartition(std::span<const double> v, std::size_t kth,
                               std::vector<std::size_t>& t) {
  const std::size_t n = v.size();
  t.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    t[i] = i;
  if (n == 0) return;
  const auto at = [&](std::ptrdiff_t i) { return v[t[static_cast<std::size_t>(i)]]; };
  const auto swap = [&](std::ptrdiff_t i, std::ptrdiff_t j) {
    std::swap(t[static_cast<std::size_t>(i)], t[static_cast<std::size_t>(j)]);
  };
  const auto k = static_cast<std::ptrdiff_t>(kth);
  const auto last = static_cast<std::ptrdiff_t>(n) - 1;
  if (k < 3) {
    for (std::ptrdiff_t i = 0; i <= k; ++i) {
      std::ptrdiff_t min_i = i;
      double min_v = at(i);
      for (std::ptrdiff_t j = i + 1; j <= last; ++j) {
        if (at(j) < min_v) {
          min_i = j;
          min_v = at(j);
        }
      }
      swap(i, min_i);
    }
    return;
  }
  if (k == last) {
    std::ptrdiff_t max_i = 0;
    double max_v = at(0);
    for (std::ptrdiff_t j = 1; j <= last; ++j) {
      if (!(at(j) < max_v)) {
        max_i = j;
        max_v = at(j);
      }
    }
    swap(k, max_i);
    return;
  }
  std::ptrdiff_t low = 0;
  std::ptrdiff_t high = last;
  while (low + 1 < high) {
    std::ptrdiff_t ll = low + 1;
    std::ptrdiff_t hh = high;
    const std::ptrdiff_t mid = low + (high - low) / 2;
    if (at(high) < at(mid)) swap(high, mid);
    if (at(high) < at(low)) swap(high, low);
    if (at(low) < at(mid)) swap(low, mid);
    swap(mid, low + 1);
    const double pivot = at(low);
    for (;;) {
      do {
        ++ll;
      } while (at(ll) < pivot);
      do {
        --hh;
      } while (pivot < at(hh));
      if (hh < ll) break;
      swap(ll, hh);
    }
    swap(low, hh);
    if (hh >= k) high = hh - 1;
    if (hh <= k) low = ll;
  }
  if (low + 1 == high && at(high) < at(low)) swap(high, low);
}

// The two halves of piece `p` (lower columns first), unpriced.
inline std::pair<piece, piece> halves(const task& t, const piece& p) {
  shard low = p.s;
  shard high = low;
  low.col_end = low.col_begin + low.cols() / 2;
  high.col_begin = low.col_end;
  return {make_piece(t, low), make_piece(t, high)};
}

// Whether piece `a` goes before `b` in the grid search's order (both priced).
inline bool goes_first(const piece& a, const piece& b) noexcept {
  return greedy_first(a.single_ms, a.bytes, a.s, b.single_ms, b.bytes, b.s);
}

// Room a beam state's vectors take beyond what they hold when they grow:
// the search recycles states of earlier steps into new ones, each step's one
// piece longer, so without it each reuse would reallocate.
inline constexpr std::size_t spare_pieces = 8;

// `parent` (in goes_first order) with piece `at` replaced by its priced
// halves, each at its place in that order, written to `out` (its room kept).
inline void split_piece(const std::vector<piece>& parent, std::size_t at,
                        const std::pair<piece, piece>& half, std::vector<piece>& out) {
  // One merge of the others with the two halves (goes_first is a total
  // order on a state's pieces: each half goes before the first piece it
  // precedes, as a lower_bound insertion would put it).
  const piece* h[2] = {&half.first, &half.second};
  if (goes_first(*h[1], *h[0])) std::swap(h[0], h[1]);
  out.clear();
  // Room for a few more: `out` is often a recycled state of a step or two
  // before, each step's states one piece longer than the last's.
  if (out.capacity() < parent.size() + 1) out.reserve(parent.size() + 1 + spare_pieces);
  std::size_t k = 0;
  for (std::size_t i = 0; i < parent.size(); ++i) {
    if (i == at) continue;
    while (k < 2 && goes_first(*h[k], parent[i]))
      out.push_back(*h[k++]);
    out.push_back(parent[i]);
  }
  while (k < 2)
    out.push_back(*h[k++]);
}

inline std::vector<piece> split_piece(const std::vector<piece>& parent, std::size_t at,
                                      const std::pair<piece, piece>& half) {
  std::vector<piece> out;
  split_piece(parent, at, half, out);
  return out;
}

}  // namespace search::detail

// What embplan's search changes in NeuroShard's authors' code
// (daochenzha/neuroshard, NeurSharder.shard), each a switch. All
// false is the authors' search decision for decision (faithful_column_beam,
// the `neuroshard` preset); all true (the default of column_beam, the
// `neuroshard_plus` preset) is embplan's.
struct column_beam_improvements {
  // 1. Split candidates: the top N splittable pieces by cost and by bytes,
  //    each distinct piece once (equal columns and rows of one table are one
  //    candidate). false: as the authors, the top N by bytes and the top N
  //    by cost among ALL pieces (unsplittable ones and both halves of a split
  //    table included), their union in piece-index order, unsplittable ones
  //    then skipped — fewer candidates where small or twin pieces rank high.
  bool splittable_candidates = true;
  // 2. A state reached twice in one step is priced and kept once. false: as
  //    the authors, every copy takes a place (all K slots can hold one state).
  bool distinct_states = true;
  // 3. Where no max-device-dim bound of the grid gives a plan, one more pass
  //    without a bound. false: no plan for that state (the authors' (None, inf)).
  bool unbounded_fallback = true;
  // 4. States with no plan rank by their largest piece (the nearer to
  //    fitting first). false: in generation order, as the authors' stable
  //    sort on an infinite cost leaves them.
  bool rank_infeasible = true;
  // 5. Communication predictions below zero are clamped at 0. false: raw, as
  //    the authors' simulator uses them (honoured by models with split
  //    communication methods, e.g. neural_cost; others clamp as they do).
  bool clamp_communication = true;
  // 6. The grid's max-device-dim bounds as exact integers. false: computed in
  //    doubles as the authors do ((1.0 + 0.05 k) x mean dim: 1.15 x 100 is
  //    114.99999999999999 there, a bound of 114 where the exact one is 115).
  bool exact_bounds = true;

  static constexpr column_beam_improvements none() noexcept {
    return {.splittable_candidates = false,
            .distinct_states = false,
            .unbounded_fallback = false,
            .rank_infeasible = false,
            .clamp_communication = false,
            .exact_bounds = false};
  }
  static constexpr column_beam_improvements all() noexcept { return {}; }
  constexpr bool operator==(const column_beam_improvements&) const = default;
};

struct column_beam {
  std::int32_t candidates = 10;  // N: top-N costly and top-N largest pieces per state
  std::int32_t width = 3;        // K: states kept per step
  std::int32_t steps = 10;       // L: split steps
  std::int32_t grid = 11;        // M: max-device-dim bounds of the inner grid search
  // Threads pricing a step's split states (the calling thread and threads - 1
  // more, each with its own grid search and cache). Not a hyperparameter of
  // the search: the plan is the same for any count (only the cache counts
  // differ, each thread caching what it priced).
  std::int32_t threads = 1;
  // Embplan's changes to the authors' search, each a switch (all on).
  column_beam_improvements improve{};

  static constexpr bool uses_reward = true;  // ranks states and plans by reward.score

  std::string_view name() const noexcept { return "column_beam"; }

  void validate() const {
    if (candidates <= 0)
      detail::fail("column_beam.candidates", candidates, "a positive number of candidates (N)");
    if (width <= 0) detail::fail("column_beam.width", width, "a positive beam width (K)");
    if (steps <= 0) detail::fail("column_beam.steps", steps, "a positive number of steps (L)");
    if (grid <= 0) detail::fail("column_beam.grid", grid, "a positive number of grid steps (M)");
    if (threads <= 0) detail::fail("column_beam.threads", threads, "a positive number of threads");
  }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t) const {
    using search::detail::beam_state;
    using search::detail::better;
    using search::detail::piece;
    validate();
    using engine_type = search::detail::grid_engine<CostModel, Constraint, Reward>;
    search::detail::cost_cache cache(search::detail::engine_cache_slots(model));
    engine_type engine(t, model, rule, cache, score);

    const search::detail::grid_rules rules{.exact_bounds = improve.exact_bounds,
                                           .unbounded_fallback = improve.unbounded_fallback,
                                           .clamp_communication = improve.clamp_communication};
    beam_state root;
    root.pieces.reserve(t.tables.size());
    for (std::size_t i = 0; i < t.tables.size(); ++i) {
      root.pieces.push_back(search::detail::make_piece(t, whole_table(t, i, 0)));
      root.pieces.back().single_ms = engine.single_ms(root.pieces.back());
      root.key += root.pieces.back().key;
    }
    if (!improve.splittable_candidates) {
      for (const auto& p : root.pieces)
        root.by_index.push_back(p.s);  // the task's table order
    }
    std::sort(root.pieces.begin(), root.pieces.end(), search::detail::goes_first);
    root.result = engine.run(root.pieces, grid, true, rules);
    root.largest_piece_bytes = largest_bytes(root.pieces);

    std::vector<piece> best_pieces;
    search::detail::grid_outcome best;
    if (root.result.ok) {
      best_pieces = root.pieces;
      best = root.result;
    }
    std::string root_failure = root.result.failure;
    // Without the unbounded pass, the root's failure may be a dim bound's
    // while the task's real obstacle (memory) lies beyond it: an unbounded
    // pass for the message alone (it changes no result).
    if (!root.result.ok && !improve.unbounded_fallback) {
      auto unbounded = rules;
      unbounded.unbounded_fallback = true;
      const auto why = engine.run(root.pieces, grid, true, unbounded);
      root_failure = why.ok
                         ? root_failure +
                               "; with no dim bound (column_beam_improvements::unbounded_fallback, "
                               "which NeuroShard's code lacks) a table-wise plan exists"
                         : why.failure +
                               " (NeuroShard's table-wise step already fails under its dim "
                               "bounds: " +
                               root_failure + ")";
    }

    // Threads beyond the calling one, each with its own cache and engine.
    struct worker {
      worker(const task& t, const CostModel& m, const Constraint& r, const Reward& s)
          : cache(search::detail::engine_cache_slots(m)), engine(t, m, r, cache, s) {}
      search::detail::cost_cache cache;
      engine_type engine;
    };
    std::vector<std::unique_ptr<worker>> workers;
    for (std::int32_t i = 1; i < threads; ++i)
      workers.push_back(std::make_unique<worker>(t, model, rule, score));

    std::vector<beam_state> beam;
    beam.push_back(std::move(root));
    std::vector<beam_state> children;
    std::vector<std::size_t> picks;
    // States of earlier steps no longer needed: a new child takes one over,
    // and with it the room its vectors have (a search makes hundreds).
    std::vector<beam_state> spare;
    const auto recycle = [&](beam_state& s) { spare.push_back(std::move(s)); };
    for (std::int32_t step = 0; step < steps; ++step) {
      for (auto& c : children)
        recycle(c);  // the beam before last
      children.clear();
      for (const auto& parent : beam) {
        if (improve.splittable_candidates) {
          pick_candidates(parent.pieces, picks);
        } else {
          pick_candidates_as_authors(parent, static_cast<std::size_t>(candidates), picks);
        }
        for (const std::size_t at : picks) {
          auto half = search::detail::halves(t, parent.pieces[at]);
          const auto key = parent.key - parent.pieces[at].key + half.first.key + half.second.key;
          if (improve.distinct_states && seen(children, key, parent.pieces, at, half)) continue;
          half.first.single_ms = engine.single_ms(half.first);
          half.second.single_ms = engine.single_ms(half.second);
          beam_state child;
          if (!spare.empty()) {
            child = std::move(spare.back());
            spare.pop_back();
          }
          search::detail::split_piece(parent.pieces, at, half, child.pieces);
          child.key = key;
          child.born = children.size();
          child.largest_piece_bytes = largest_bytes(child.pieces);
          if (!improve.splittable_candidates) {
            // The authors' _col_wise_shard: the lower half keeps the piece's
            // index, the upper half is appended.
            if (child.by_index.capacity() < parent.by_index.size() + 1)
              child.by_index.reserve(parent.by_index.size() + 1 + search::detail::spare_pieces);
            child.by_index = parent.by_index;
            const auto slot =
                std::find(child.by_index.begin(), child.by_index.end(), parent.pieces[at].s) -
                child.by_index.begin();
            child.by_index[static_cast<std::size_t>(slot)] = half.first.s;
            child.by_index.push_back(half.second.s);
          } else {
            child.by_index.clear();
          }
          children.push_back(std::move(child));
        }
      }
      if (children.empty()) break;  // nothing left to split
      price_children(children, engine, workers, rules);
      // The best plan in generation order, as if priced one by one.
      for (const auto& child : children) {
        if (better(child.result, best)) {
          best = child.result;
          best_pieces = child.pieces;
        }
      }
      const bool rank_infeasible = improve.rank_infeasible;
      std::sort(children.begin(), children.end(), [&](const beam_state& a, const beam_state& b) {
        if (a.result.ok != b.result.ok) return a.result.ok;
        if (a.result.ok) {
          if (a.result.score != b.result.score) return a.result.score > b.result.score;
          return a.born < b.born;
        }
        if (!rank_infeasible) return a.born < b.born;
        return std::tie(a.largest_piece_bytes, a.born) < std::tie(b.largest_piece_bytes, b.born);
      });
      if (children.size() > static_cast<std::size_t>(width)) {
        for (std::size_t i = static_cast<std::size_t>(width); i < children.size(); ++i)
          recycle(children[i]);
        children.resize(static_cast<std::size_t>(width));
      }
      beam.swap(children);
    }

    search_result out;
    out.cache_lookups = cache.lookups();
    out.cache_hits = cache.hits();
    out.evaluations = cache.misses() + engine.comm_calls();
    for (const auto& w : workers) {
      out.cache_lookups += w->cache.lookups();
      out.cache_hits += w->cache.hits();
      out.evaluations += w->cache.misses() + w->engine.comm_calls();
    }
    if (!best.ok) {
      out.failure = root_failure + "; no column-wise split of up to " + std::to_string(steps) +
                    " halvings (beam search) found a plan either";
      return out;
    }
    out.placement.shards.reserve(best_pieces.size());
    for (std::size_t i = 0; i < best_pieces.size(); ++i) {
      shard s = best_pieces[i].s;
      s.device = best.device[i];
      out.placement.shards.push_back(s);
    }
    // Shards by (table, first column, first row), whatever the search's order.
    std::sort(out.placement.shards.begin(), out.placement.shards.end(),
              [](const shard& a, const shard& b) {
                return std::tie(a.table, a.col_begin, a.row_begin) <
                       std::tie(b.table, b.col_begin, b.row_begin);
              });
    out.ok = true;
    return out;
  }

 private:
  // Each child's grid search (Alg. 2), on this thread's engine and on the
  // workers' (one std::thread each for the step), children taken in turn from
  // a shared counter. A child's result depends on its pieces only (the caches
  // hold exact figures), so the split of the work changes nothing.
  //
  // Children of the same pieces (same_pieces: equal lists, a state's order
  // being a total one) are searched once; a repeat takes the first one's
  // outcome as it is — the same outcome as searching it again, bit for bit.
  // The faithful mode keeps duplicate states (the authors' beam does, and
  // they are common there: docs/design/column-beam.md), and two parents can
  // split into the same state in either mode.
  template <class Engine, class Worker>
  void price_children(std::vector<search::detail::beam_state>& children, Engine& engine,
                      const std::vector<std::unique_ptr<Worker>>& workers,
                      const search::detail::grid_rules& rules) const {
    const std::size_t n = children.size();
    std::vector<std::size_t> first(n);  // the child whose search child i takes
    std::vector<std::size_t> todo;      // the children searched
    for (std::size_t i = 0; i < n; ++i) {
      first[i] = i;
      for (const std::size_t j : todo) {
        if (children[j].key != children[i].key ||
            !search::detail::same_pieces(children[j].pieces, children[i].pieces))
          continue;
        first[i] = j;
        break;
      }
      if (first[i] == i) todo.push_back(i);
    }
    std::atomic<std::size_t> next{0};
    // Each engine's runs are priced together when it has no more to take
    // (grid_engine::run_batched: a learned communication model then runs
    // its networks on many plans per call); the outcomes are run()'s.
    const auto work = [&](auto& e) {
      for (std::size_t k = next++; k < todo.size(); k = next++)
        e.run_batched(children[todo[k]].result, children[todo[k]].pieces, grid, false, rules);
      e.flush();
    };
    const auto copy_repeats = [&] {
      for (std::size_t i = 0; i < n; ++i)
        if (first[i] != i) children[i].result = children[first[i]].result;
    };
    const std::size_t helpers = std::min(workers.size(), todo.size() - 1);
    if (helpers == 0) {
      work(engine);
      copy_repeats();
      return;
    }
    std::vector<std::exception_ptr> errors(helpers + 1);
    {
      std::vector<std::jthread> pool;
      pool.reserve(helpers);
      for (std::size_t h = 0; h < helpers; ++h) {
        pool.emplace_back([&, h] {
          try {
            work(workers[h]->engine);
          } catch (...) {
            errors[h + 1] = std::current_exception();
            next = children.size();  // the others stop early too
          }
        });
      }
      try {
        work(engine);
      } catch (...) {
        errors[0] = std::current_exception();
        next = children.size();
      }
    }  // joins
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    copy_repeats();
  }

  static std::uint64_t largest_bytes(const std::vector<search::detail::piece>& ps) {
    std::uint64_t out = 0;
    for (const auto& p : ps)
      out = std::max(out, p.bytes);
    return out;
  }

  // Is the state `pieces` with `at` split into `half` already among `children`?
  static bool seen(const std::vector<search::detail::beam_state>& children,
                   const search::detail::multiset_key& key,
                   const std::vector<search::detail::piece>& pieces, std::size_t at,
                   const std::pair<search::detail::piece, search::detail::piece>& half) {
    for (const auto& c : children) {
      if (c.key != key) continue;
      std::vector<search::detail::piece> state = pieces;
      state[at] = half.first;
      state.push_back(half.second);
      if (search::detail::signature(c.pieces) == search::detail::signature(state)) return true;
    }
    return false;
  }

  // Alg. 1 line 9 as the authors' code does it (improve.splittable_candidates
  // off): with P pieces in their index order (the task's tables, each split's
  // upper half appended), all of them where N > P, else the top N by bytes
  // and the top N by single-piece cost among all P (np.argpartition), their
  // union in index order (np.union1d); unsplittable ones skipped. Where the
  // N-th and (N+1)-th rank tie (a split table's halves, equal in all but
  // their columns), the pieces picked are those np.argpartition picks
  // (numpy_argpartition): which twin is a candidate decides whether both are
  // (the same state twice in the beam) or one.
  // `picks` are places in parent.pieces, in generation order.
  static void pick_candidates_as_authors(const search::detail::beam_state& parent, std::size_t n,
                                         std::vector<std::size_t>& picks) {
    const auto& by_index = parent.by_index;
    const std::size_t count = by_index.size();
    // piece place in parent.pieces of each index
    // Each index's place in parent.pieces, by (table, first column, first
    // row) — unique within a state — in O(P log P), not a scan per index.
    const auto at = [](const shard& s) { return std::tuple{s.table, s.col_begin, s.row_begin}; };
    std::vector<std::size_t> by_shard(count);
    for (std::size_t k = 0; k < count; ++k)
      by_shard[k] = k;
    std::sort(by_shard.begin(), by_shard.end(), [&](std::size_t a, std::size_t b) {
      return at(parent.pieces[a].s) < at(parent.pieces[b].s);
    });
    std::vector<std::size_t> place(count);
    for (std::size_t i = 0; i < count; ++i) {
      const auto it = std::lower_bound(
          by_shard.begin(), by_shard.end(), at(by_index[i]),
          [&](std::size_t k, const auto& key) { return at(parent.pieces[k].s) < key; });
      place[i] = *it;
    }
    std::vector<unsigned char> chosen(count, n > count ? 1 : 0);
    if (n <= count) {
      // The authors' sizes are bytes / 2^30 (exact in a double, so equal and
      // ordered as the bytes), their costs the single-piece costs.
      std::vector<double> value(count);
      std::vector<std::size_t> perm;
      const auto top = [&] {
        search::detail::numpy_argpartition(value, count - n, perm);
        for (std::size_t k = count - n; k < count; ++k)
          chosen[perm[k]] = 1;
      };
      for (std::size_t i = 0; i < count; ++i)
        value[i] = static_cast<double>(parent.pieces[place[i]].bytes);
      top();
      for (std::size_t i = 0; i < count; ++i)
        value[i] = parent.pieces[place[i]].single_ms;
      top();
    }
    picks.clear();
    for (std::size_t i = 0; i < count; ++i)
      if (chosen[i] && search::detail::splittable(by_index[i])) picks.push_back(place[i]);
  }

  // Alg. 1 line 9: the top N splittable pieces by single-piece cost, then the
  // top N by bytes, each piece (up to equal columns and rows) once.
  void pick_candidates(const std::vector<search::detail::piece>& ps,
                       std::vector<std::size_t>& picks) const {
    // Ties: (table, first column, first row), ascending.
    struct ranked {
      double cost;
      std::uint64_t bytes;
      std::tuple<std::uint32_t, std::int32_t, std::int64_t> at;
      std::size_t index;
    };
    std::vector<ranked> pool;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const auto& s = ps[i].s;
      if (!search::detail::splittable(s)) continue;
      pool.push_back(
          ranked{ps[i].single_ms, ps[i].bytes, std::tuple{s.table, s.col_begin, s.row_begin}, i});
    }
    picks.clear();
    const auto take = [&](auto better) {
      std::stable_sort(pool.begin(), pool.end(), better);
      std::size_t taken = 0;
      std::vector<search::detail::multiset_key> keys;
      for (const auto& r : pool) {
        if (taken == static_cast<std::size_t>(candidates)) break;
        const auto& k = ps[r.index].key;
        if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
        keys.push_back(k);
        ++taken;
        if (std::find(picks.begin(), picks.end(), r.index) == picks.end()) {
          // An equal piece picked by the other ranking is the same candidate.
          const bool twin = std::any_of(picks.begin(), picks.end(),
                                        [&](std::size_t p) { return ps[p].key == k; });
          if (!twin) picks.push_back(r.index);
        }
      }
    };
    take([](const ranked& a, const ranked& b) {
      return std::tie(b.cost, b.bytes, a.at) < std::tie(a.cost, a.bytes, b.at);
    });
    take([](const ranked& a, const ranked& b) {
      return std::tie(b.bytes, b.cost, a.at) < std::tie(a.bytes, a.cost, b.at);
    });
  }
};
static_assert(searcher<column_beam>);

// NeuroShard's search as its authors' code makes it: column_beam with every
// improvement off (column_beam_improvements::none()); the `neuroshard`
// preset. Measured against their NeurSharder.shard on the same models and
// tasks (test/search/neuroshard_parity_test.cpp), it returns their plans.
struct faithful_column_beam : column_beam {
  constexpr faithful_column_beam() noexcept { improve = column_beam_improvements::none(); }
  std::string_view name() const noexcept { return "faithful_column_beam"; }
};
static_assert(searcher<faithful_column_beam>);

}  // namespace embplan::inline EMBPLAN_ABI
