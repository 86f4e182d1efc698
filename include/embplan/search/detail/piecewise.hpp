#pragma once
// group_pricer: how the searchers price a group of pieces on one device on a
// cache miss, through the model's piecewise_compute (concepts/piecewise.hpp,
// where a model opts in) or else its compute().

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/piecewise.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::search::detail {

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
  // The term of piece `s` (key `key`) on `device`, computed once per device
  // kind; valid until the next call of term() or term_index().
  const term_type& term(const shard& s, const multiset_key& key, std::size_t device) {
    return terms_[term_index(s, key, device)];
  }
  // Where that term is kept: term_at(term_index(...)) is term(...), and an
  // index stays valid for the pricer's life (a search keeps indices, not
  // copies of terms of up to 256 bytes each).
  std::uint32_t term_index(const shard& s, const multiset_key& key, std::size_t device) {
    return term_index_.get(kinds_.empty(device) + key, [&] {
      if constexpr (piecewise_compute<CostModel>::enabled) {
        terms_.push_back(piecewise_compute<CostModel>::piece(model_, t_, s, device));
      } else {
        terms_.emplace_back();
      }
      return static_cast<std::uint32_t>(terms_.size() - 1);
    });
  }
  const term_type& term_at(std::uint32_t at) const noexcept { return terms_[at]; }
  compute_cost finish(const sum_type& acc, std::size_t pieces, std::size_t device) const {
    if constexpr (piecewise_compute<CostModel>::enabled) {
      return piecewise_compute<CostModel>::finish(model_, t_, acc, pieces, device);
    } else {
      return {};
    }
  }
  // out = acc + v, then finish(out, pieces, device) (out may be acc): the
  // model's add_finish where it has one, else add() and finish().
  compute_cost add_finish(sum_type& out, const sum_type& acc, const term_type& v,
                          std::size_t pieces, std::size_t device) const {
    if constexpr (piecewise_compute<CostModel>::enabled) {
      using pc = piecewise_compute<CostModel>;
      if constexpr (requires { pc::add_finish(model_, t_, out, acc, v, pieces, device); }) {
        return pc::add_finish(model_, t_, out, acc, v, pieces, device);
      } else {
        if (&out != &acc) out = acc;
        add(out, v);
        return finish(out, pieces, device);
      }
    } else {
      return {};
    }
  }

 private:
  const task& t_;
  const CostModel& model_;
  const device_kinds& kinds_;
  bool piecewise_ = false;
  // Terms in a dense array, found through a map of indices: a grid search
  // looks up every piece's term once per state, and the map's small slots
  // stay in cache where slots holding the terms themselves (up to 256 bytes
  // each for the neural model) would not.
  key_map<std::uint32_t> term_index_{1 << 10};
  std::vector<term_type> terms_;
};

}  // namespace embplan::inline EMBPLAN_ABI::search::detail
