#pragma once
// An optional fast path for pricing a device on a cache miss. Most of a
// search's misses are a device that already held a priced set plus one piece;
// a cost model whose device compute is a fixed function of per-piece terms
// (the analytic model: one launch + the sum of its pieces' forward times;
// NeuroShard's compute net: a head MLP over the sum of per-table embeddings)
// can then be priced from per-piece terms computed once each. A model opts in
// by specialising piecewise_compute<Model> with
//   using term = ...;                                   // a piece's contribution
//   static term piece(model, task, shard, device);      // the piece on that device
//   static compute_cost group(model, task, std::span<const term>, device);
// and group() must return exactly what model.compute() returns for the same
// pieces in the same order (the searchers' results may not depend on the path).
// Without a specialisation the searchers call model.compute() on every miss.

#include <cstddef>
#include <span>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/search/detail/cost_cache.hpp"

namespace embplan::search::detail {

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
  using term = double;

  static term piece(const analytic_cost& m, const task& t, const shard& s, std::size_t device) {
    return m.piece_forward_ms(t, s, device);
  }

  static compute_cost group(const analytic_cost& m, const task&, std::span<const term> terms,
                            std::size_t) {
    if (terms.empty()) return {};
    double fwd_ms = m.options.kernel_launch_ms;
    for (const double v : terms)
      fwd_ms += v;
    return compute_cost{.fwd_ms = fwd_ms, .bwd_ms = m.options.backward_factor * fwd_ms};
  }
};

// Prices a group of pieces on one device: through piecewise_compute when the
// model offers it (piece terms cached per device kind), else model.compute().
template <cost_model CostModel>
class group_pricer {
 public:
  group_pricer(const task& t, const CostModel& model, const device_kinds& kinds)
      : t_(t), model_(model), kinds_(kinds) {}

  // `group` holds shards placed on `device`; keys[i] = piece_key(group[i]).
  compute_cost operator()(std::span<const shard> group, std::span<const multiset_key> keys,
                          std::size_t device) {
    if constexpr (piecewise_compute<CostModel>::enabled) {
      using pw = piecewise_compute<CostModel>;
      terms_.clear();
      for (std::size_t i = 0; i < group.size(); ++i) {
        terms_.push_back(terms_cache_.get(kinds_.empty(device) + keys[i],
                                          [&] { return pw::piece(model_, t_, group[i], device); }));
      }
      return pw::group(model_, t_, std::span<const typename pw::term>(terms_), device);
    } else {
      return model_.compute(t_, group, device);
    }
  }

 private:
  template <class M>
  struct terms_of {
    using type = char;
  };
  template <class M>
  requires piecewise_compute<M>::enabled struct terms_of<M> {
    using type = typename piecewise_compute<M>::term;
  };
  using term_type = typename terms_of<CostModel>::type;

  const task& t_;
  const CostModel& model_;
  const device_kinds& kinds_;
  key_map<term_type> terms_cache_{1 << 10};
  std::vector<term_type> terms_;
};

}  // namespace embplan::search::detail
