#pragma once
// The Reward contract: a score for a finished plan, higher is better.

#include <concepts>
#include <string_view>
#include <type_traits>

#include "embplan/core/costs.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

template <class R>
concept reward = std::copy_constructible<R> &&
    requires(const R& r, const task& t, const plan_cost& c) {
  { r.name() } -> std::convertible_to<std::string_view>;
  { r.score(t, c) } -> std::convertible_to<double>;
};

// Optional promise of a reward:
//   static constexpr bool decreasing_in_max_cost = true;
// says that, for a given task, score(t, c) depends on c only through
// c.max_ms() and strictly decreases as it grows (neg_max_cost_reward). A
// searcher may then rank plans by their max cost and skip pricing a plan whose
// max cost provably cannot beat the best so far (grid_engine.hpp's compute
// bound). Under any other reward, a searcher that uses the reward
// (searcher_uses_reward) prices every candidate plan in full, as
// embplan::evaluate does, and ranks it by score(). A reward without the member
// promises nothing.
template <class R>
inline constexpr bool reward_decreasing_in_max_cost = false;
template <class R>
requires requires {
  std::bool_constant<R::decreasing_in_max_cost>{};
}
inline constexpr bool reward_decreasing_in_max_cost<R> = R::decreasing_in_max_cost;

}  // namespace embplan::inline EMBPLAN_ABI
