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
#include "embplan/search/infeasible.hpp"
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

struct sharding_option {
  std::vector<shard> shards;  // device unset
  std::vector<double> perf;   // per shard
  double total_perf = 0.0;
  double depth_perf = 0.0;  // the largest shard's perf
  std::uint64_t storage = 0;
};

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
    // Proposers.
    std::vector<std::vector<std::size_t>> proposals;
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
      }
      std::vector<std::size_t> at(tables, 0);
      for (;;) {
        std::vector<std::size_t> proposal(tables);
        for (std::size_t i = 0; i < tables; ++i)
          proposal[i] = order[i][at[i]];
        proposals.push_back(std::move(proposal));
        std::size_t largest = tables;
        for (std::size_t i = 0; i < tables; ++i) {
          if (at[i] + 1 >= order[i].size()) continue;
          if (largest == tables || options[i][order[i][at[i]]].storage >
                                       options[largest][order[largest][at[largest]]].storage)
            largest = i;
        }
        if (largest == tables) break;
        ++at[largest];
      }
    }
    std::vector<std::size_t> table_wise(tables, 0);
    std::vector<std::size_t> column_wise(tables);
    for (std::size_t i = 0; i < tables; ++i)
      column_wise[i] = options[i].size() - 1;
    proposals.push_back(table_wise);
    proposals.push_back(column_wise);

    // Partitioner + rating.
    double best_rating = std::numeric_limits<double>::infinity();  // decreasing in max cost
    double best_score = 0.0;                                       // otherwise
    std::string first_failure;
    plan_cost perf;
    for (const auto& proposal : proposals) {
      plan p;
      std::string failure;
      const double rating = partition(t, rule, options, proposal, p, perf, failure);
      if (!failure.empty()) {
        if (first_failure.empty()) first_failure = std::move(failure);
        continue;
      }
      if constexpr (reward_decreasing_in_max_cost<Reward>) {
        if (!(rating < best_rating)) continue;
        best_rating = rating;
      } else {
        const double value = static_cast<double>(score.score(t, perf));
        if (out.ok && !(value > best_score)) continue;
        best_score = value;
      }
      out.placement = std::move(p);
      out.ok = true;
    }
    if (!out.ok) out.failure = first_failure;
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

  // GreedyPerfPartitioner; returns the rating (max device perf sum) and fills
  // `perf` (the rating's plan_cost, see the header), or sets `failure` when a
  // shard fits on no device.
  template <class Constraint>
  static double partition(const task& t, const Constraint& rule,
                          const std::vector<std::vector<search::detail::sharding_option>>& options,
                          const std::vector<std::size_t>& proposal, plan& p, plan_cost& perf,
                          std::string& failure) {
    const std::size_t tables = t.tables.size();
    const std::size_t devices = t.cluster.size();
    std::vector<std::size_t> by_perf(tables);
    for (std::size_t i = 0; i < tables; ++i)
      by_perf[i] = i;
    std::stable_sort(by_perf.begin(), by_perf.end(), [&](std::size_t a, std::size_t b) {
      const auto& x = options[a][proposal[a]];
      const auto& y = options[b][proposal[b]];
      return std::tie(y.total_perf, y.storage, a) < std::tie(x.total_perf, x.storage, b);
    });
    placement_state st(devices);
    std::vector<double> load(devices, 0.0);
    for (const std::size_t i : by_perf) {
      const auto& o = options[i][proposal[i]];
      for (std::size_t k = 0; k < o.shards.size(); ++k) {
        std::size_t chosen = devices;
        shard s = o.shards[k];
        for (std::size_t d = 0; d < devices; ++d) {
          if (chosen != devices && std::tie(load[d], st.memory_bytes[d], d) >=
                                       std::tie(load[chosen], st.memory_bytes[chosen], chosen))
            continue;
          s.device = static_cast<std::uint32_t>(d);
          if (rule.admits(t, st, s)) chosen = d;
        }
        if (chosen == devices) {
          failure = search::no_device_for(t, st, i, rule);
          return std::numeric_limits<double>::infinity();
        }
        s.device = static_cast<std::uint32_t>(chosen);
        st.place(t, s);
        load[chosen] += o.perf[k];
        p.shards.push_back(s);
      }
    }
    perf.devices.assign(devices, device_cost{});
    for (std::size_t d = 0; d < devices; ++d)
      perf.devices[d].fwd_compute_ms = load[d];
    perf.memory_bytes = st.memory_bytes;
    perf.dim_sum = st.dim_sum;
    return *std::max_element(load.begin(), load.end());
  }
};
static_assert(searcher<torchrec_like>);

}  // namespace embplan::inline EMBPLAN_ABI
