// Row pieces for tables that fit (stage::stage_settings::rows_by_cost: the
// planner picks the sharding type per table by cost).
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/check_plan.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/presets.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/stage/settings.hpp"
#include "embplan/stage/staged.hpp"

#include "support/random_task.hpp"

namespace {

// `p` behind the stage, rows split, rows_by_cost as given.
template <class Planner, class Rule>
embplan::rowwise_planner_of<Planner> rows_staged(const Planner& p, bool by_cost, const Rule& rule) {
  return {p.cost(),
          embplan::stage::behind_stage(p.searcher(), {.split_rows = true, .rows_by_cost = by_cost}),
          rule, p.scorer()};
}
template <class Planner>
embplan::rowwise_planner_of<Planner> rows_staged(const Planner& p, bool by_cost) {
  return rows_staged(p, by_cost, p.rule());
}

// 12 random tables on `devices` devices and, at index 4, "clicks": 50,000
// rows of dim 4 looked up `pooling` times a sample, which no column split
// can cut.
embplan::task hot_narrow_task(std::uint64_t seed, std::size_t devices, double pooling) {
  auto t = embplan_test::random_task(seed, {.tables = 12, .devices = devices, .max_rows = 50'000});
  embplan::table_spec hot;
  hot.name = "clicks";
  hot.rows = 50'000;
  hot.dim = 4;
  hot.pooling_factor = pooling;
  t.tables.insert(t.tables.begin() + 4, hot);
  return t;
}

struct row_pieces {
  std::size_t count = 0;
  std::int64_t rows = 0;
  std::set<std::uint32_t> devices;
};

row_pieces row_pieces_of(const embplan::task& t, const embplan::plan& p, std::uint32_t table) {
  row_pieces out;
  for (const auto& s : p.shards) {
    if (s.table != table) continue;
    if (s.rows() == t.tables[table].rows) continue;
    ++out.count;
    out.rows += s.rows();
    out.devices.insert(s.device);
  }
  return out;
}

std::size_t row_cut_tables(const embplan::task& t, const embplan::plan& p) {
  std::set<std::uint32_t> cut;
  for (const auto& s : p.shards)
    if (s.rows() != t.tables[s.table].rows) cut.insert(s.table);
  return cut.size();
}

}  // namespace

TEST_CASE("rows_by_cost cuts a narrow table of many lookups by rows, and the plan costs less") {
  const auto t = hot_narrow_task(5, 4, 400.0);
  const embplan::neuroshard_ls_planner p;
  const auto without = rows_staged(p, false)(t, 1);
  const auto with = rows_staged(p, true)(t, 1);
  REQUIRE(without.ok);
  REQUIRE(with.ok);
  CHECK(row_pieces_of(t, without.placement, 4).count == 0);  // dim 4: whole on one device
  const auto cut = row_pieces_of(t, with.placement, 4);
  CHECK(cut.count >= 2);
  CHECK(cut.rows == 50'000);  // every row once
  CHECK(cut.devices.size() == cut.count);
  CHECK(row_cut_tables(t, with.placement) == 1);  // only "clicks"
  CHECK_NOTHROW(embplan::validate(t, with.placement, {.dim_multiple = 4, .memory = true}));
  CHECK(with.cost_ms.max_ms() < 0.9 * without.cost_ms.max_ms());
  // Counted: both plans' searches and one evaluate() each.
  CHECK(with.evaluations > without.evaluations);
  // Same seed, same plan.
  CHECK(rows_staged(p, true)(t, 1).placement == with.placement);
}

TEST_CASE("rows_by_cost leaves the plan as it was where no table bounds it") {
  for (const std::uint64_t seed : {1U, 2U, 3U}) {
    CAPTURE(seed);
    const auto t = embplan_test::random_task(seed, {.tables = 40, .devices = 4});
    const embplan::neuroshard_ls_planner p;
    const auto without = rows_staged(p, false)(t, 7);
    const auto with = rows_staged(p, true)(t, 7);
    REQUIRE(with.ok);
    CHECK(with.placement == without.placement);
    CHECK(row_cut_tables(t, with.placement) == 0);
  }
}

TEST_CASE("rows_by_cost never gives a plan the reward scores lower than the stage without it") {
  std::size_t cut_kept = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    CAPTURE(seed);
    const auto t =
        hot_narrow_task(seed, seed % 2 == 0 ? 4 : 8, 40.0 + 60.0 * static_cast<double>(seed));
    const embplan::torchrec_like_planner p;  // a baseline whose plans the estimate does not know
    const auto without = rows_staged(p, false)(t, 3);
    const auto with = rows_staged(p, true)(t, 3);
    REQUIRE(without.ok);
    REQUIRE(with.ok);
    CHECK(with.reward >= without.reward);
    if (row_cut_tables(t, with.placement) > 0) {
      ++cut_kept;
      CHECK(with.reward > without.reward);  // kept only where it scores higher
    } else {
      CHECK(with.placement == without.placement);
    }
  }
  CHECK(cut_kept > 0);
}

TEST_CASE("rows_by_cost asks the rules about the pieces in the caller's terms") {
  // "clicks" may go to devices 1 and 3 only; a table ruled elsewhere stays
  // where its rule says.
  const auto t = hot_narrow_task(5, 4, 400.0);
  embplan::user_constraints c;
  c.tables.push_back({.table = 4, .devices = {1, 3}});
  c.tables.push_back({.table = 0, .devices = {2}});
  const embplan::neuroshard_ls_planner p;
  const embplan::default_constraint rule{embplan::memory_capacity{}, embplan::dim_multiple{},
                                         embplan::table_rules(t, c)};
  const auto with = rows_staged(p, true, rule)(t, 1);
  REQUIRE(with.ok);
  const auto cut = row_pieces_of(t, with.placement, 4);
  CHECK(cut.count == 2);  // as many pieces as it has devices
  CHECK(cut.rows == 50'000);
  CHECK(cut.devices == std::set<std::uint32_t>{1, 3});
  for (const auto& s : with.placement.shards)
    if (s.table == 0) CHECK(s.device == 2);
  CHECK_NOTHROW(embplan::validate(t, with.placement, {.dim_multiple = 4, .memory = true}));
  CHECK(with.cost_ms.max_ms() < rows_staged(p, false, rule)(t, 1).cost_ms.max_ms());
}

TEST_CASE("rows_by_cost cuts a table into no more pieces than its max_shards") {
  // Without a rule "clicks" is cut into 3 pieces; the rule allows 2. Cut
  // into 3, the inner searcher could not place them and the plan without
  // cuts would be kept; cut into 2 the plan still gains.
  const auto t = hot_narrow_task(5, 4, 400.0);
  const embplan::neuroshard_ls_planner p;
  REQUIRE(row_pieces_of(t, rows_staged(p, true)(t, 1).placement, 4).count == 3);
  embplan::user_constraints c;
  c.tables.push_back({.table = 4, .max_shards = 2});
  const embplan::default_constraint rule{embplan::memory_capacity{}, embplan::dim_multiple{},
                                         embplan::table_rules(t, c)};
  const auto with = rows_staged(p, true, rule)(t, 1);
  REQUIRE(with.ok);
  const auto cut = row_pieces_of(t, with.placement, 4);
  CHECK(cut.count == 2);
  CHECK(cut.rows == 50'000);
  CHECK(cut.devices.size() == 2);
  CHECK(embplan::check_plan(t, with.placement, rule).empty());
  CHECK(with.cost_ms.max_ms() < 0.9 * rows_staged(p, false, rule)(t, 1).cost_ms.max_ms());
}

TEST_CASE("merge_abutting_rows joins a cut table's pieces on one device whose rows abut") {
  embplan::task t = embplan_test::random_task(3, {.tables = 3, .devices = 4});
  t.tables[1].rows = 40;
  const auto piece = [](std::uint32_t table, std::uint32_t device, std::int64_t begin,
                        std::int64_t end, std::int32_t cols) {
    return embplan::shard{table, device, 0, cols, begin, end, false};
  };
  const std::int32_t dim = t.tables[1].dim;
  const embplan::shard other = embplan::whole_table(t, 0, 1);
  const std::vector<std::uint32_t> row_cut{0, 4, 0};
  {
    // [0, 10) and [10, 20) on device 1 join; [30, 40), also there, does not
    // abut them; a table not cut (0) is left alone, in its place.
    std::vector<embplan::shard> shards{piece(1, 1, 0, 10, dim), other, piece(1, 2, 20, 30, dim),
                                       piece(1, 1, 10, 20, dim), piece(1, 1, 30, 40, dim)};
    embplan::stage::detail::merge_abutting_rows(t, embplan::paper_constraint{}, row_cut, shards);
    CHECK(shards == std::vector<embplan::shard>{piece(1, 1, 0, 20, dim), other,
                                                piece(1, 2, 20, 30, dim),
                                                piece(1, 1, 30, 40, dim)});
  }
  std::vector<embplan::shard> all_on_one{piece(1, 3, 20, 30, dim), piece(1, 3, 0, 10, dim),
                                         piece(1, 3, 30, 40, dim), piece(1, 3, 10, 20, dim)};
  {
    // All four on one device: the whole table.
    auto shards = all_on_one;
    embplan::stage::detail::merge_abutting_rows(t, embplan::paper_constraint{}, row_cut, shards);
    CHECK(shards == std::vector<embplan::shard>{embplan::whole_table(t, 1, 3)});
  }
  {
    // A rule that allows the table row-wise only: joined up to the last
    // piece, which would make it whole.
    embplan::user_constraints c;
    c.tables.push_back({.table = 1, .sharding = {embplan::sharding_kind::row_wise}});
    const embplan::default_constraint rule{embplan::memory_capacity{}, embplan::dim_multiple{},
                                           embplan::table_rules(t, c)};
    auto shards = all_on_one;
    embplan::stage::detail::merge_abutting_rows(t, rule, row_cut, shards);
    CHECK(shards == std::vector<embplan::shard>{piece(1, 3, 0, 30, dim), piece(1, 3, 30, 40, dim)});
  }
  {
    // Pieces of other columns, or other devices, stay apart.
    std::vector<embplan::shard> shards{piece(1, 0, 0, 20, dim), piece(1, 1, 20, 40, dim)};
    const auto before = shards;
    embplan::stage::detail::merge_abutting_rows(t, embplan::paper_constraint{}, row_cut, shards);
    CHECK(shards == before);
  }
}

// The analytic model plus, per shard of table 1 on a device, `per_shard_ms`
// and `per_row_squared_ms` x its rows^2 of forward compute: a model that
// prices one piece of 2n rows unlike two of n.
struct per_piece_model {
  embplan::analytic_cost base{};
  double per_shard_ms = 0.0;
  double per_row_squared_ms = 0.0;
  std::string_view name() const { return "per_piece"; }
  double extra(const embplan::shard& s) const {
    if (s.table != 1) return 0.0;
    const auto rows = static_cast<double>(s.rows());
    return per_shard_ms + per_row_squared_ms * rows * rows;
  }
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return base.shard_cost(t, s) + extra(s);
  }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> group,
                                std::size_t device) const {
    auto c = base.compute(t, group, device);
    for (const auto& s : group)
      c.fwd_ms += extra(s);
    return c;
  }
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    base.communication(t, dim_sum, start_ms, out);
  }
};

TEST_CASE("abutting row pieces are merged only where the reward scores the merged plan no lower") {
  embplan::task t = embplan_test::random_task(3, {.tables = 3, .devices = 4});
  t.tables[1].rows = 40;
  const std::int32_t dim = t.tables[1].dim;
  const std::vector<std::uint32_t> row_cut{0, 2, 0};
  const std::vector<embplan::shard> apart{embplan::whole_table(t, 0, 0),
                                          {1, 1, 0, dim, 0, 20, false},
                                          {1, 1, 0, dim, 20, 40, false},
                                          embplan::whole_table(t, 2, 2)};
  const embplan::neg_max_cost_reward score{};
  const embplan::paper_constraint rule{};
  {
    // A cost per piece: one piece is cheaper, so merged.
    embplan::plan p{apart};
    const auto& shards = p.shards;
    const per_piece_model model{.per_shard_ms = 50.0};
    CHECK(embplan::stage::detail::merge_abutting_rows_if_no_costlier(t, model, rule, score, row_cut,
                                                                     p) == 2);
    REQUIRE(shards.size() == 3);
    CHECK(shards[1] == embplan::whole_table(t, 1, 1));
  }
  {
    // A cost growing with rows^2: two pieces are cheaper, so kept apart.
    embplan::plan p{apart};
    const auto& shards = p.shards;
    const per_piece_model model{.per_row_squared_ms = 0.1};
    CHECK(embplan::stage::detail::merge_abutting_rows_if_no_costlier(t, model, rule, score, row_cut,
                                                                     p) == 2);
    CHECK(shards == apart);
  }
  {
    // Nothing to merge: no evaluation.
    embplan::plan p{{apart[0], apart[1], apart[3]}};
    const auto& shards = p.shards;
    const auto before = shards;
    CHECK(embplan::stage::detail::merge_abutting_rows_if_no_costlier(t, per_piece_model{}, rule,
                                                                     score, row_cut, p) == 0);
    CHECK(shards == before);
  }
}

TEST_CASE("rows_by_cost keeps to the rules: a table allowed table-wise only is not cut") {
  const auto t = hot_narrow_task(5, 4, 400.0);
  embplan::user_constraints c;
  c.tables.push_back({.table = 4, .sharding = {embplan::sharding_kind::table_wise}});
  const embplan::neuroshard_ls_planner p;
  const embplan::default_constraint rule{embplan::memory_capacity{}, embplan::dim_multiple{},
                                         embplan::table_rules(t, c)};
  const auto with = rows_staged(p, true, rule)(t, 1);
  REQUIRE(with.ok);
  CHECK(row_pieces_of(t, with.placement, 4).count == 0);
  CHECK(with.placement == rows_staged(p, false, rule)(t, 1).placement);
}

TEST_CASE("run_preset takes rows_by_cost in its stage_settings: the staged planner's plan") {
  const auto t = hot_narrow_task(5, 4, 400.0);
  const auto by_name = embplan::run_preset("neuroshard_ls", t, 1, embplan::analytic_cost{}, {}, {},
                                           embplan::stage::stage_settings{.rows_by_cost = true});
  const auto typed = rows_staged(embplan::neuroshard_ls_planner{}, true)(t, 1);
  REQUIRE(by_name.ok);
  CHECK(by_name.placement == typed.placement);
  CHECK(row_pieces_of(t, by_name.placement, 4).count >= 2);
  // Off (the default and the other overload): whole.
  CHECK(row_pieces_of(t, embplan::run_preset("neuroshard_ls", t, 1).placement, 4).count == 0);
}
