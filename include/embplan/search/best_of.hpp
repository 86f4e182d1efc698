#pragma once
// best_of<Searchers...>: a portfolio. Every searcher plans the same task with
// the same cost model, constraint, reward and seed; the result is the plan the
// Reward scores highest, each priced on the task it was given by the cost
// model (evaluate: what planner::operator() reports as search_cost and
// scores), the first listed on a tie. TorchRec's planner does the same with
// its proposers (it keeps the cheapest of their proposals by its perf
// estimate).
//   best_of<local_search<column_beam>, torchrec_like>{}   // presets.hpp: portfolio_planner
// Why: no one searcher wins everywhere. neuroshard_ls's plan is the cheaper
// on nearly every task of the NeuroShard protocol and on most of
// bench_scale's, but on the largest clusters in NVLink hosts torchrec_like's
// can be (docs/results/scale.md). The portfolio costs the sum of its
// searchers' times.
// Behind the stage (stage::staged) each member gets its
// own stage (stage::behind_stage), so whole plans of the caller's task are
// compared, not plans of the stage's sub-task (whose costs leave out the row
// pieces' load and can rank the plans otherwise).
// Counts: evaluations, cache look-ups and hits are the sums over the members
// plus one evaluate() per plan compared. The result's made_by names the
// member whose plan was kept, by its place and label (searcher_label:
// "#2 staged(torchrec_like)"). A member that finds no plan is passed
// over; where none finds one, the failure names each member and its failure.
// Design notes: docs/design/local-search.md.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

template <class... Searchers>
requires(sizeof...(Searchers) >= 1) struct best_of {
  std::tuple<Searchers...> searchers{};

  // Compares complete plans by reward.score.
  static constexpr bool uses_reward = true;

  std::string_view name() const noexcept { return "best_of"; }
  // "best_of(<each member's label>, ...)".
  std::string label() const {
    std::string out = "best_of(";
    std::apply(
        [&](const auto&... s) {
          std::size_t k = 0;
          ((out += (k++ == 0 ? "" : ", ") + searcher_label(s)), ...);
        },
        searchers);
    return out + ")";
  }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t seed) const {
    search_result best;
    bool have = false;
    double best_score = 0.0;
    std::uint64_t evaluations = 0;
    std::uint64_t lookups = 0;
    std::uint64_t hits = 0;
    std::string failures;
    std::size_t place = 0;
    const auto one = [&](const auto& s) {
      ++place;
      search_result r = s.search(t, model, rule, score, seed);
      evaluations += r.evaluations;
      lookups += r.cache_lookups;
      hits += r.cache_hits;
      const std::string member = "#" + std::to_string(place) + " " + searcher_label(s);
      if (!r.ok) {
        failures += (failures.empty() ? "" : "; ") + member + ": " + r.failure;
        return;
      }
      ++evaluations;
      const auto v = static_cast<double>(score.score(t, evaluate(t, r.placement, model)));
      if (!have || v > best_score) {
        r.made_by = r.made_by.empty() ? member : member + " > " + r.made_by;
        best = std::move(r);
        best_score = v;
        have = true;
      }
    };
    std::apply([&](const auto&... s) { (one(s), ...); }, searchers);
    if (!have) best.failure = std::move(failures);
    best.evaluations = evaluations;
    best.cache_lookups = lookups;
    best.cache_hits = hits;
    return best;
  }
};

// Whether S is a best_of (stage::behind_stage stages its members).
template <class S>
inline constexpr bool is_best_of = false;
template <class... Searchers>
inline constexpr bool is_best_of<best_of<Searchers...>> = true;

}  // namespace embplan::inline EMBPLAN_ABI
