#pragma once
// piecewise_compute<CostModel>: an optional fast path for pricing a device on
// a search's cache miss, and the CostModel customisation point a model opts
// in by (as {fmt}'s formatter<T>: specialised next to the model, in its own
// header — cost/analytic.hpp and cost/neural.hpp do). A model whose device
// compute is a left fold over per-piece terms followed by a fixed function
// specialises
//   template <> struct embplan::piecewise_compute<Model> {
//     static constexpr bool enabled = true;
//     static constexpr bool cache_groups = ...;       // false: finish() is cheaper
//     using term = ...; using sum = ...;              //   than a cache look-up
//     static bool usable(model);                      // false: use compute()
//     static term piece(model, task, shard, device);
//     static sum start(model);
//     static void add(model, sum&, const term&);      // one more piece, at the end
//     static compute_cost finish(model, task, const sum&, pieces, device);
//   };  // optionally add_finish(model, task, sum& out, const sum& acc, term, pieces, device)
// Invariant: start, add in group order and finish return bitwise what
// model.compute() returns for the same pieces in the same order, so the
// searchers' results do not depend on the path. Without a specialisation
// (enabled = false) the searchers call compute() on every miss.
// Design notes: docs/design/grid-engine.md; how to write one: docs/extending.md.

#include <cstddef>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

template <class CostModel>
struct piecewise_compute {
  static constexpr bool enabled = false;
};

}  // namespace embplan::inline EMBPLAN_ABI
