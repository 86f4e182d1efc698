#pragma once
// torchrec_like: a TorchRec-style planner (NeuroShard App. E.3: "TorchRec ...
// we allow TorchRec to search for both column-wise and table-wise sharding
// plans"), written from TorchRec's EmbeddingShardingPlanner design
// (enumerator -> proposers -> partitioner -> perf rating); its perf estimate
// here is the cost model's shard_cost. The rules we implement:
//
// Enumerator: per table, a table-wise option (one shard) and, when it splits,
//   a column-wise option of equal blocks: block = the smallest multiple of 4
//   that divides the dim and is at least min_block_dim (TorchRec's
//   _find_base_dim(lower_bound, dim)); no column-wise option when that block
//   is the whole dim. TorchRec's own lower bound (MIN_CW_DIM) is 128, which
//   would never split the {4..128} tables of NeuroShard's protocol; we use 32
//   by default. Each shard's perf = shard_cost on device 0 (the analytic model:
//   forward + backward kernel time; TorchRec adds its own comm estimate).
// Proposers (TorchRec's defaults): GreedyProposer with use_depth (options of
//   a table ordered by their largest shard's perf) and without (by the sum of
//   their shards' perf): start from each table's first option; after each
//   proposal, the table whose current option has the most storage (ties: the
//   lower index) and that has a next option moves to it; until none has. Then
//   UniformProposer: all tables table-wise; all column-wise where they split.
// Partitioner (GreedyPerfPartitioner): options sorted by total perf,
//   descending (ties: more storage, then the lower table index); each shard in
//   turn to the device with the lowest perf sum so far that the constraint
//   admits (ties: less memory used, then the lower index).
// Rating: the Reward (uses_reward) scores each partitioned proposal on the
//   perf model's figures, the plan_cost whose device d has compute = its perf
//   sum (fwd_compute_ms) and no communication, with the plan's memory and
//   dims; the first proposal with the highest score is the plan. Under
//   neg_max_cost_reward this is TorchRec's NoopPerfModel rating, the lowest
//   largest per-device perf sum (compared directly, as for any reward
//   decreasing in max cost). The reward sees the perf model's figures rather
//   than evaluate()'s, as TorchRec's planner sees only its perf estimates.
// Cost: proposals are made one at a time as the proposers move (never all
// kept), the partitioner follows the proposal's changes and places each shard
// in O(log D), and, under a reward decreasing in max cost, a proposal stops
// being partitioned once it cannot win (search/detail/perf_partitioner.hpp);
// the winner's plan is partitioned once more at the end. The plan is the one
// partitioning and rating every proposal in full gives.

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
