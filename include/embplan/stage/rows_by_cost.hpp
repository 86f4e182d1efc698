#pragma once
// Row cuts by cost (stage_settings::rows_by_cost): tables that fit a device
// but whose narrowest column block would still bound the plan are cut into
// even row ranges, each placed by the inner searcher as a table of the
// sub-task; abutting pieces the searcher put on one device are merged back
// where the reward scores the merged plan no lower. The stage keeps the plan
// with the cuts only where the reward scores it no lower than without.
// Design notes: docs/design/stage.md.

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/stage/detail/common.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

namespace detail {

// rows_by_cost's choice (docs/design/stage.md): per table of `rest` (those the
// inner searcher places; `min_pieces[i] > 1`: cut into column blocks for
// min_shards, never by rows), the number of row pieces it is cut into, 0 for
// none.
template <cost_model CostModel, constraint Constraint>
std::vector<std::uint32_t> choose_row_cuts(const task& t, const CostModel& model,
                                           const Constraint& rule,
                                           std::span<const std::size_t> rest,
                                           std::span<const std::uint32_t> min_pieces) {
  const std::size_t devices = t.cluster.size();
  std::vector<std::uint32_t> out(t.tables.size(), 0);
  if (devices < 2 || rest.empty()) return out;
  const auto d_count = static_cast<double>(devices);
  std::vector<double> whole(t.tables.size(), 0.0);
  std::vector<double> bound(t.tables.size(), 0.0);
  double sum = 0.0;
  std::int64_t dims = 0;
  for (const std::size_t i : rest) {
    const shard w = whole_table(t, i, 0);
    whole[i] = stage_ms(t, model, w);
    bound[i] = whole[i];
    const std::int32_t units = t.tables[i].dim / 4;
    if (units >= 2) {
      const auto k = static_cast<std::int32_t>(
          std::min<std::size_t>(devices, static_cast<std::size_t>(units)));
      shard block = w;
      block.col_end = 4 * ((units + k - 1) / k);
      bound[i] = stage_ms(t, model, block);
    }
    sum += whole[i];
    dims += t.tables[i].dim;
  }
  const double share = sum / d_count;
  if (!(share > 0.0)) return out;
  // The most even row pieces of table i, at most `wanted`, that the rule
  // admits one per device on distinct devices of an empty cluster (its allowed
  // kinds and devices, max_shards, memory): where fewer are admitted, as many
  // larger pieces are asked again; 0 where fewer than two are.
  const auto admitted_pieces = [&](std::size_t i, std::uint32_t wanted) {
    std::uint32_t pieces = wanted;
    while (pieces >= 2) {
      const auto ranges = rowwise::range_partition::even(t.tables[i].rows, pieces);
      placement_state trial(t);
      std::uint32_t placed = 0;
      for (std::size_t d = 0; d < devices && placed < pieces; ++d) {
        shard s = whole_table(t, i, d);
        s.row_begin = ranges.row_begin(placed);
        s.row_end = ranges.row_end(placed);
        if (!rule.admits(t, trial, s)) continue;
        trial.place(t, s);
        ++placed;
      }
      if (placed == pieces) return pieces;
      pieces = placed;
    }
    return std::uint32_t{0};
  };
  struct candidate {
    std::size_t table;
    std::uint32_t pieces;
    double piece_ms;
  };
  std::vector<std::size_t> order;
  double rest_bound = 0.0;  // the largest bound of a table never cut
  for (const std::size_t i : rest) {
    if (min_pieces[i] <= 1 && bound[i] > share && t.tables[i].rows >= 2) {
      order.push_back(i);
    } else {
      rest_bound = std::max(rest_bound, bound[i]);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return bound[a] > bound[b]; });
  std::vector<candidate> cuts;
  for (const std::size_t i : order) {
    const double wanted = std::ceil(whole[i] / share);
    auto pieces = wanted >= d_count
                      ? static_cast<std::uint32_t>(devices)
                      : std::max<std::uint32_t>(2, static_cast<std::uint32_t>(wanted));
    pieces = static_cast<std::uint32_t>(std::min<std::int64_t>(pieces, t.tables[i].rows));
    pieces = admitted_pieces(i, pieces);
    if (pieces < 2) {
      rest_bound = std::max(rest_bound, bound[i]);
      continue;
    }
    const std::int64_t rows = rowwise::range_partition::even(t.tables[i].rows, pieces).rows_in(0);
    const shard piece{static_cast<std::uint32_t>(i), 0, 0, t.tables[i].dim, 0, rows, false};
    cuts.push_back({i, pieces, stage_ms(t, model, piece)});
  }
  const double column_ms = all_to_all_column_ms(t.cluster, t.batch_size);
  const auto estimate = [&](std::size_t k, double sum_k, std::int64_t dims_k, double pieces_k) {
    const double next = k < cuts.size() ? std::max(bound[cuts[k].table], rest_bound) : rest_bound;
    return std::max({next, pieces_k, sum_k / d_count}) + static_cast<double>(dims_k) * column_ms;
  };
  double best = estimate(0, sum, dims, 0.0);
  std::size_t best_k = 0;
  double most_piece = 0.0;
  for (std::size_t k = 0; k < cuts.size(); ++k) {
    const auto& c = cuts[k];
    sum += static_cast<double>(c.pieces) * c.piece_ms - whole[c.table];
    dims += static_cast<std::int64_t>(c.pieces - 1) * t.tables[c.table].dim;
    most_piece = std::max(most_piece, c.piece_ms);
    const double e = estimate(k + 1, sum, dims, most_piece);
    if (e < best) {
      best = e;
      best_k = k + 1;
    }
  }
  for (std::size_t k = 0; k < best_k; ++k)
    out[cuts[k].table] = cuts[k].pieces;
  return out;
}

// Row pieces of a table cut by rows_by_cost (`row_cut[table] > 1`) that the
// inner searcher put on one device with abutting rows, merged into one piece
// (the first's place in `shards` kept) where the rule admits the merged piece
// on its own (its kind: all rows are table_wise); shards of other tables are
// left as they are. The device holds the same bytes and looks up the same
// rows either way.
template <constraint Constraint>
void merge_abutting_rows(const task& t, const Constraint& rule,
                         std::span<const std::uint32_t> row_cut, std::vector<shard>& shards) {
  std::vector<std::size_t> cut;  // indices of the cut tables' pieces
  for (std::size_t k = 0; k < shards.size(); ++k) {
    const auto& s = shards[k];
    if (!s.replica && !s.data_parallel && s.table < row_cut.size() && row_cut[s.table] > 1)
      cut.push_back(k);
  }
  if (cut.size() < 2) return;
  std::stable_sort(cut.begin(), cut.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = shards[a];
    const auto& y = shards[b];
    return std::tie(x.table, x.device, x.col_begin, x.row_begin) <
           std::tie(y.table, y.device, y.col_begin, y.row_begin);
  });
  const placement_state empty(t);
  std::vector<std::uint8_t> gone(shards.size(), 0);
  std::size_t into = cut[0];
  for (std::size_t k = 1; k < cut.size(); ++k) {
    shard& a = shards[into];
    const shard& b = shards[cut[k]];
    if (b.table == a.table && b.device == a.device && b.col_begin == a.col_begin &&
        b.col_end == a.col_end && b.row_begin == a.row_end) {
      shard joined = a;
      joined.row_end = b.row_end;
      if (rule.admits(t, empty, joined)) {
        a = joined;
        gone[cut[k]] = 1;
        continue;
      }
    }
    into = cut[k];
  }
  std::size_t kept = 0;
  for (std::size_t k = 0; k < shards.size(); ++k)
    if (gone[k] == 0) shards[kept++] = shards[k];
  shards.resize(kept);
}

// merge_abutting_rows on a copy of `p`'s shards, kept where the reward scores
// the merged plan no lower than `p`: a model may price one piece of 2n rows
// unlike two of n on one device, and models disagree (a learned model can
// price a merged plan higher where the analytic model a searcher decided on
// does not; docs/design/stage.md). Returns the evaluate() calls made (two
// where anything merged, else none).
template <cost_model CostModel, constraint Constraint, reward Reward>
std::uint64_t merge_abutting_rows_if_no_costlier(const task& t, const CostModel& model,
                                                 const Constraint& rule, const Reward& score,
                                                 std::span<const std::uint32_t> row_cut, plan& p) {
  plan merged = p;
  merge_abutting_rows(t, rule, row_cut, merged.shards);
  if (merged.shards.size() == p.shards.size()) return 0;
  const auto value = [&](const plan& x) {
    return static_cast<double>(score.score(t, evaluate(t, x, model)));
  };
  if (!(value(merged) < value(p))) p = std::move(merged);
  return 2;
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::stage
