#pragma once
// An optional fast path for pricing a device on a cache miss. Most of a
// search's misses are a device that already held a priced set plus one piece;
// a cost model whose device compute is a left fold over per-piece terms
// followed by a fixed function (the analytic model: one launch + the sum of
// its pieces' forward times; NeuroShard's compute net: a head MLP over the sum
// of per-table latents) can then be priced from per-piece terms computed once
// each. A model opts in by specialising piecewise_compute<Model> with
//   using term = ...;                                  // a piece's contribution
//   using sum = ...;                                   // a fold in progress
//   static bool usable(model);                         // false: use compute()
//   static term piece(model, task, shard, device);     // the piece on that device
//   static sum start(model);                           // no piece yet
//   static void add(model, sum&, const term&);        // one more piece, at the end
//   static compute_cost finish(model, task, const sum&, pieces, device);
//   static constexpr bool cache_groups;                // see below
// and start, add in group order, finish must return exactly what
// model.compute() returns for the same pieces in the same order (the
// searchers' results may not depend on the path).
// cache_groups = false says finish() costs less than a look-up in a large
// cache (a few additions): the grid search then folds each device's pieces
// as it places them and keeps no device costs in the cache (see grid_engine).
// Without a specialisation the searchers call model.compute() on every miss.

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/neural.hpp"
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

// neural_cost::compute: the head's first layer is linear in the sum of the
// pieces' table-MLP latents, so a device's pre-activation is that layer's
// bias plus each piece's latent through its weight (a term: 64 floats for
// NeuroShard's head 32-64-1, up to max_term), added in group order
// (neural_cost::piece_term / fold_start / from_fold; the packed net's
// operator() adds them the same way, so the fold is bitwise compute()).
// A term is computed once per piece; placing a piece then costs a 64-float
// add and the rest of the head (ReLU and a 64-float dot: ~14-15 ns for
// finish() in bench_nn's bm_packed_finish), where folding latents cost the
// 32x64 layer as well (~96 ns; NeuroShard-protocol 8-device tasks place
// ~92k pieces each). Finishing is cheaper than a look-up in the search's
// cache (measured with the 96 ns head: caching device costs cut the heads
// from 92k to 16k per task but the time only from 22 to 21 ms), so device
// costs are folded, not cached (cache_groups = false).
template <>
struct piecewise_compute<neural_cost> {
  static constexpr bool enabled = true;
  static constexpr bool cache_groups = false;
  static constexpr std::size_t max_term = 64;
  struct term {
    alignas(64) std::array<float, max_term> v{};
  };
  using sum = term;

  // A net with a wider first head layer is priced by compute() (no piecewise path).
  static bool usable(const neural_cost& m) { return m.term_size() <= max_term; }

  static term piece(const neural_cost& m, const task& t, const shard& s, std::size_t) {
    term out;
    m.piece_term(t, s, out.v.data());
    return out;
  }

  static sum start(const neural_cost& m) {
    sum out;
    m.fold_start(out.v.data());
    return out;
  }
  static void add(const neural_cost& m, sum& acc, const term& x) {
    m.fold_add(acc.v.data(), x.v.data());
  }

  static compute_cost finish(const neural_cost& m, const task& t, const sum& acc,
                             std::size_t pieces, std::size_t) {
    return m.from_fold(t, acc.v.data(), pieces);
  }
};

// Prices a group of pieces on one device: through piecewise_compute when the
// model offers it (piece terms cached per device kind), else model.compute().
template <cost_model CostModel>
class group_pricer {
  template <class M>
  struct types_of {
    using term = char;
    using sum = char;
  };
  template <class M>
  requires piecewise_compute<M>::enabled struct types_of<M> {
    using term = typename piecewise_compute<M>::term;
    using sum = typename piecewise_compute<M>::sum;
  };

 public:
  using term_type = typename types_of<CostModel>::term;
  using sum_type = typename types_of<CostModel>::sum;

  group_pricer(const task& t, const CostModel& model, const device_kinds& kinds)
      : t_(t), model_(model), kinds_(kinds) {
    if constexpr (piecewise_compute<CostModel>::enabled)
      piecewise_ = piecewise_compute<CostModel>::usable(model);
  }

  // Whether pieces are priced by terms (piecewise_compute), and whether the
  // grid search should fold device costs itself instead of caching them.
  bool piecewise() const noexcept { return piecewise_; }
  bool folds() const noexcept {
    if constexpr (piecewise_compute<CostModel>::enabled) {
      return piecewise_ && !piecewise_compute<CostModel>::cache_groups;
    } else {
      return false;
    }
  }

  // `group` holds shards placed on `device`; keys[i] = piece_key(group[i]).
  compute_cost operator()(std::span<const shard> group, std::span<const multiset_key> keys,
                          std::size_t device) {
    if constexpr (piecewise_compute<CostModel>::enabled) {
      if (piecewise_) {
        sum_type acc = start();
        for (std::size_t i = 0; i < group.size(); ++i)
          add(acc, group[i], keys[i], device);
        return finish(acc, group.size(), device);
      }
    }
    return model_.compute(t_, group, device);
  }

  // The fold, one piece at a time (only where piecewise()).
  sum_type start() const {
    if constexpr (piecewise_compute<CostModel>::enabled) {
      return piecewise_compute<CostModel>::start(model_);
    } else {
      return {};
    }
  }
  void add(sum_type& acc, const shard& s, const multiset_key& key, std::size_t device) {
    add(acc, term(s, key, device));
  }
  void add(sum_type& acc, const term_type& v) const {
    if constexpr (piecewise_compute<CostModel>::enabled)
      piecewise_compute<CostModel>::add(model_, acc, v);
  }
  // The term of piece `s` (key `key`) on `device`, computed once per device kind.
  const term_type& term(const shard& s, const multiset_key& key, std::size_t device) {
    return terms_cache_.ref(kinds_.empty(device) + key, [&] {
      if constexpr (piecewise_compute<CostModel>::enabled) {
        return piecewise_compute<CostModel>::piece(model_, t_, s, device);
      } else {
        return term_type{};
      }
    });
  }
  compute_cost finish(const sum_type& acc, std::size_t pieces, std::size_t device) const {
    if constexpr (piecewise_compute<CostModel>::enabled) {
      return piecewise_compute<CostModel>::finish(model_, t_, acc, pieces, device);
    } else {
      return {};
    }
  }

 private:
  const task& t_;
  const CostModel& model_;
  const device_kinds& kinds_;
  bool piecewise_ = false;
  key_map<term_type> terms_cache_{1 << 10};
};

}  // namespace embplan::search::detail
