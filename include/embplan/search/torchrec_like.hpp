#pragma once
// torchrec_like (preset torchrec_like, torchrec_like_planner): a TorchRec-style
// greedy after NeuroShard's appendix E.3 (table- and column-wise, perf-ordered
// partitioner); not TorchRec's planner. NeuroShard App. E.3: "TorchRec ... we
// allow TorchRec to search for both column-wise and table-wise sharding
// plans"; written from TorchRec's EmbeddingShardingPlanner design
// (enumerator -> proposers -> partitioner -> perf rating); its perf estimate
// here is the cost model's shard_cost (on device 0):
//  - enumerator: per table a table-wise option and, where the dim splits, one
//    of equal column blocks of at least min_block_dim columns (TorchRec's
//    _find_base_dim; its own lower bound, 128, would never split NeuroShard's
//    {4..128} tables, so 32 by default);
//  - proposers, TorchRec's defaults: GreedyProposer with and without
//    use_depth, then UniformProposer;
//  - partitioner (GreedyPerfPartitioner): options by total perf, descending,
//    each shard to the admitted device with the lowest perf sum so far;
//  - rating: the Reward scores each partitioned proposal on the perf model's
//    figures (compute = the perf sum, no communication), the first with the
//    highest score is the plan; under neg_max_cost_reward, TorchRec's
//    NoopPerfModel rating.
// Invariant: proposals are made one at a time and a losing one is cut short
// (search/detail/perf_partitioner.hpp), but the plan is the one partitioning
// and rating every proposal in full gives.
// Design notes, with every tie rule: docs/design/torchrec-like.md.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/detail/perf_partitioner.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace search::detail {

// TorchRec's _find_base_dim: the smallest multiple of 4 in [lower_bound, dim)
// that divides dim, else dim.
inline std::int32_t find_base_dim(std::int32_t lower_bound, std::int32_t dim) noexcept {
  for (std::int32_t b = std::max(lower_bound, 1); b < dim; ++b)
    if (dim % b == 0 && b % 4 == 0) return b;
  return dim;
}

}  // namespace search::detail

struct torchrec_like {
  std::int32_t min_block_dim = 32;  // lower bound of a column-wise block (TorchRec: 128)

  static constexpr bool uses_reward = true;  // rates the proposals by reward.score

  std::string_view name() const noexcept { return "torchrec_like"; }

  void validate() const {
    if (min_block_dim <= 0 || min_block_dim % 4 != 0) {
      detail::fail("torchrec_like.min_block_dim", min_block_dim, "a positive multiple of 4");
    }
  }

  template <cost_model CostModel, constraint Constraint, reward Reward>
  search_result search(const task& t, const CostModel& model, const Constraint& rule,
                       const Reward& score, std::uint64_t) const {
    using search::detail::sharding_option;
    validate();
    const std::size_t tables = t.tables.size();
    search_result out;
    // Enumerator.
    std::vector<std::vector<sharding_option>> options(tables);
    for (std::size_t i = 0; i < tables; ++i) {
      const shard whole = whole_table(t, i, 0);
      options[i].push_back(option_of(t, model, {whole}, out));
      const std::int32_t block = search::detail::find_base_dim(min_block_dim, whole.cols());
      if (block < whole.cols()) {
        std::vector<shard> blocks;
        for (std::int32_t c = 0; c < whole.cols(); c += block) {
          shard s = whole;
          s.col_begin = c;
          s.col_end = c + block;
          blocks.push_back(s);
        }
        options[i].push_back(option_of(t, model, blocks, out));
      }
    }

    // Partitioner + rating of each proposal as the proposers make it.
    search::detail::perf_partitioner partitioner(t, options);
    double best_rating = std::numeric_limits<double>::infinity();  // decreasing in max cost
    double best_score = 0.0;                                       // otherwise
    std::vector<std::size_t> best_choice;
    std::string first_failure;
    std::string failure;
    plan_cost perf;
    const auto rate = [&] {
      if constexpr (reward_decreasing_in_max_cost<Reward>) {
        // A proposal that cannot rate below the best is not partitioned.
        if (out.ok && partitioner.nonnegative() && partitioner.lower_bound() >= best_rating) return;
      }
      failure.clear();
      const double rating = partitioner.partition(rule,
                                                  reward_decreasing_in_max_cost<Reward>
                                                      ? best_rating
                                                      : std::numeric_limits<double>::infinity(),
                                                  failure);
      if (!failure.empty()) {
        if (first_failure.empty()) first_failure = std::move(failure);
        return;
      }
      if constexpr (reward_decreasing_in_max_cost<Reward>) {
        if (!(rating < best_rating)) return;
        best_rating = rating;
      } else {
        partitioner.perf_of(perf);
        const double value = static_cast<double>(score.score(t, perf));
        if (out.ok && !(value > best_score)) return;
        best_score = value;
      }
      const auto choice = partitioner.choice();
      best_choice.assign(choice.begin(), choice.end());
      out.ok = true;
    };

    // Proposers.
    std::vector<std::size_t> choice(tables);
    for (const bool use_depth : {true, false}) {
      std::vector<std::vector<std::size_t>> order(tables);  // table -> option ids, best first
      for (std::size_t i = 0; i < tables; ++i) {
        for (std::size_t k = 0; k < options[i].size(); ++k)
          order[i].push_back(k);
        std::stable_sort(order[i].begin(), order[i].end(), [&](std::size_t a, std::size_t b) {
          const auto& x = options[i][a];
          const auto& y = options[i][b];
          return use_depth ? x.depth_perf < y.depth_perf : x.total_perf < y.total_perf;
        });
        choice[i] = order[i][0];
      }
      partitioner.assign(choice);
      rate();
      // The table whose current option has the most storage (ties: the lower
      // index) and a next option moves to it: a heap on (storage, -index).
      std::vector<std::size_t> at(tables, 0);
      const auto storage = [&](std::size_t i) { return options[i][order[i][at[i]]].storage; };
      const auto smaller = [&](std::size_t a, std::size_t b) {
        return std::tuple(storage(a), b) < std::tuple(storage(b), a);
      };
      std::vector<std::size_t> movable;
      for (std::size_t i = 0; i < tables; ++i)
        if (order[i].size() > 1) movable.push_back(i);
      std::make_heap(movable.begin(), movable.end(), smaller);
      while (!movable.empty()) {
        std::pop_heap(movable.begin(), movable.end(), smaller);
        const std::size_t largest = movable.back();
        movable.pop_back();
        ++at[largest];
        partitioner.change(largest, order[largest][at[largest]]);
        rate();
        if (at[largest] + 1 < order[largest].size()) {
          movable.push_back(largest);
          std::push_heap(movable.begin(), movable.end(), smaller);
        }
      }
    }
    for (std::size_t i = 0; i < tables; ++i)
      choice[i] = 0;
    partitioner.assign(choice);  // UniformProposer: all table-wise,
    rate();
    for (std::size_t i = 0; i < tables; ++i)
      choice[i] = options[i].size() - 1;
    partitioner.assign(choice);  // all column-wise where they split
    rate();

    if (!out.ok) {
      out.failure = first_failure;
      return out;
    }
    partitioner.assign(best_choice);
    partitioner.partition(rule, std::numeric_limits<double>::infinity(), failure, &out.placement);
    return out;
  }

 private:
  template <class CostModel>
  static search::detail::sharding_option option_of(const task& t, const CostModel& model,
                                                   std::vector<shard> shards, search_result& out) {
    search::detail::sharding_option o;
    o.shards = std::move(shards);
    for (const auto& s : o.shards) {
      const double perf = static_cast<double>(model.shard_cost(t, s));
      ++out.evaluations;
      o.perf.push_back(perf);
      o.total_perf += perf;
      o.depth_perf = std::max(o.depth_perf, perf);
      o.storage += shard_bytes(t, s);
    }
    return o;
  }
};
static_assert(searcher<torchrec_like>);

}  // namespace embplan::inline EMBPLAN_ABI
