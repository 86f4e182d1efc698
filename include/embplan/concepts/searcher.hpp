#pragma once
// The Searcher contract: turn (task, cost model, constraint, reward, seed) into
// a plan. A searcher is generic over the other three policies; `searcher<S>`
// checks it against archetypes that provide exactly the other contracts and
// nothing more, so a searcher that leans on anything else fails here.

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/detail/archetypes.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// What a searcher returns: a plan, or the reason there is none.
struct search_result {
  plan placement{};
  bool ok = false;
  std::string failure{};          // when !ok: which table fits where not, and why
  std::uint64_t evaluations = 0;  // cost-model calls spent (for reports)
  // Searchers with a device-cost cache (NeuroShard §3.3) count its use here;
  // hit rate = cache_hits / cache_lookups. Both 0 for searchers without one.
  std::uint64_t cache_lookups = 0;
  std::uint64_t cache_hits = 0;
  // Where a portfolio (best_of) chose among searchers: the member whose plan
  // it kept, as its place and label ("#2 staged(torchrec_like)";
  // a portfolio inside a portfolio adds its own after " > "). Empty where no
  // portfolio chose.
  std::string made_by{};
};

template <class S, class M, class C, class R>
concept searcher_for = cost_model<M> && constraint<C> && reward<R> && std::copy_constructible<S> &&
    requires(const S& s, const task& t, const M& m, const C& c, const R& r, std::uint64_t seed) {
  { s.name() } -> std::convertible_to<std::string_view>;
  { s.search(t, m, c, r, seed) } -> std::same_as<search_result>;
};

// Whether a searcher optimises the Reward it is given. A searcher that compares
// complete plans keeps the one the reward scores highest and declares
//   static constexpr bool uses_reward = true;
// (grid_greedy, column_beam, local_search, torchrec_like, random_search); a
// different reward can then give a different plan. A constructive searcher
// that never compares complete plans declares false (sorted_greedy,
// random_placement): the reward never changes its plan. A wrapper that only
// hands the reward on declares its inner searcher's value
// (stage::staged; with its run-time rows_by_cost on, it also
// keeps the better of two plans by the reward, which the trait cannot say).
// Every searcher of the library declares it; a searcher without the member
// counts as one that does not use the reward.
template <class S>
inline constexpr bool searcher_uses_reward = false;
template <class S>
requires requires {
  std::bool_constant<S::uses_reward>{};
}
inline constexpr bool searcher_uses_reward<S> = S::uses_reward;

template <class S>
concept searcher =
    searcher_for<S, concepts::detail::cost_model_archetype, concepts::detail::constraint_archetype,
                 concepts::detail::reward_archetype>;

// Optional: label() — a longer name for reports, where name() (a fixed
// string) would not tell two searchers apart: a wrapper names what it wraps
// ("staged(local_search(column_beam))"). Without the member: name().
template <class S>
std::string searcher_label(const S& s) {
  if constexpr (requires {
                  { s.label() } -> std::convertible_to<std::string>;
                }) {
    return std::string(s.label());
  } else {
    return std::string(s.name());
  }
}

}  // namespace embplan::inline EMBPLAN_ABI
