#pragma once
// piecewise_compute<CostModel>: an optional fast path for pricing a device on a
// search's cache miss, and the customisation point a cost model opts in by
// (as {fmt}'s formatter<T>: specialise it next to the model, in the model's
// own header — cost/neural.hpp does for neural_cost).
//
// Most of a search's misses are a device that already held a priced set plus
// one piece. A cost model whose device compute is a left fold over per-piece
// terms followed by a fixed function (the analytic model: one launch + the sum
// of its pieces' forward times; NeuroShard's compute net: a head MLP over the
// sum of per-table latents) can then be priced from per-piece terms computed
// once each. A model opts in by specialising
//   template <> struct embplan::search::piecewise_compute<Model> {
//     static constexpr bool enabled = true;
//     static constexpr bool cache_groups = ...;          // see below
//     using term = ...;                                  // a piece's contribution
//     using sum = ...;                                   // a fold in progress
//     static bool usable(model);                         // false: use compute()
//     static term piece(model, task, shard, device);     // the piece on that device
//     static sum start(model);                           // no piece yet
//     static void add(model, sum&, const term&);         // one more piece, at the end
//     static compute_cost finish(model, task, const sum&, pieces, device);
//   };
// and start, add in group order, finish must return exactly what
// model.compute() returns for the same pieces in the same order (the
// searchers' results may not depend on the path). Optionally also
//     static compute_cost add_finish(model, task, sum& out, const sum& acc,
//                                    const term&, pieces, device);
// out = acc + the term, then finish(out): bitwise add() and finish() on a
// copy of acc, for a model that does both in one pass (neural_cost).
// cache_groups = false says finish() costs less than a look-up in a large
// cache (a few additions): the grid search then folds each device's pieces
// as it places them and keeps no device costs in the cache
// (search/detail/grid_engine.hpp).
// Without a specialisation (the primary template: enabled = false) the
// searchers call model.compute() on every miss. The specialisation must be
// visible wherever a searcher is instantiated on the model, which holds when
// it sits in the header that defines the model.

#include <cstddef>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::search {

template <class CostModel>
struct piecewise_compute {
  static constexpr bool enabled = false;
};

// analytic_cost::compute: fwd = launch, then += each piece's forward time in
// group order; bwd = backward_factor x fwd. The same additions in the same
// order, so the result is bitwise the same.
template <>
struct piecewise_compute<analytic_cost> {
  static constexpr bool enabled = true;
  static constexpr bool cache_groups = false;
  using term = double;
  using sum = double;

  static bool usable(const analytic_cost&) noexcept { return true; }

  static term piece(const analytic_cost& m, const task& t, const shard& s, std::size_t device) {
    return m.piece_forward_ms(t, s, device);
  }

  static sum start(const analytic_cost& m) noexcept { return m.options.kernel_launch_ms; }
  static void add(const analytic_cost&, sum& fwd_ms, term v) noexcept { fwd_ms += v; }

  static compute_cost finish(const analytic_cost& m, const task&, sum fwd_ms, std::size_t pieces,
                             std::size_t) noexcept {
    if (pieces == 0) return {};
    return compute_cost{.fwd_ms = fwd_ms, .bwd_ms = m.options.backward_factor * fwd_ms};
  }
};

}  // namespace embplan::inline EMBPLAN_ABI::search
