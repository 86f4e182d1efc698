// A user's table rules given to TorchRec's planner as ParameterConstraints
// (search/torchrec.hpp, apply_rules): the kinds of piece, max_shards and
// min_shards become each table's sharding_types (and min_partition); pins,
// hosts and groups have no ParameterConstraints and are checked afterwards.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/search/torchrec.hpp"

namespace torchrec_constraints_test {

using namespace embplan;
namespace tr = embplan::torchrec;
using types = std::vector<tr::sharding_type>;

// Eight tables on one host of 8 devices of 16 GiB; table 0 the largest (dim
// 256: two 128-column blocks), table 1 of dim 64.
task rules_task() {
  task t;
  device_spec d;
  d.memory_bytes = 16 * gib;
  t.cluster = uniform_topology(8, d, 8);
  for (int i = 0; i < 8; ++i) {
    table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = i == 0 ? 4'000'000 : 200'000 + 50'000 * i;
    s.dim = i == 0 ? 256 : i == 1 ? 64 : 32;
    s.pooling_factor = 8.0;
    t.tables.push_back(s);
  }
  return t;
}

types allowed(const task& t, const table_rules& rules, std::size_t table) {
  auto in = tr::inputs_of(t);
  REQUIRE(apply_rules(in, t, rules).empty());
  return in.sharding_types[table];
}

// The kinds of piece table `table` has in `p`.
std::set<sharding_kind> kinds(const task& t, const plan& p, std::size_t table) {
  std::set<sharding_kind> out;
  for (const auto& s : p.shards)
    if (s.table == table) out.insert(kind_of(t, s));
  return out;
}

std::size_t pieces(const plan& p, std::size_t table) {
  std::size_t n = 0;
  for (const auto& s : p.shards)
    n += s.table == table ? 1 : 0;
  return n;
}

TEST_CASE("a table's allowed kinds become its sharding types: those whose pieces are all allowed") {
  const auto t = rules_task();
  const table_rules tw_cw(
      t, {.tables = {
              {.table = 0, .sharding = {sharding_kind::table_wise, sharding_kind::column_wise}}}});
  // Table- and column-wise lay it out in whole tables and column blocks;
  // table-column-wise too (its blocks on one host); row-wise and
  // table-row-wise cut rows; data-parallel copies.
  CHECK(allowed(t, tw_cw, 0) == types{tr::sharding_type::table_wise, tr::sharding_type::column_wise,
                                      tr::sharding_type::table_column_wise});
  // Table 1 has no rule: any type.
  CHECK(allowed(t, tw_cw, 1).empty());
  const table_rules rows(t, {.tables = {{.table = 0, .sharding = {sharding_kind::row_wise}}}});
  CHECK(allowed(t, rows, 0) ==
        types{tr::sharding_type::row_wise, tr::sharding_type::table_row_wise});
  const table_rules copies(t,
                           {.tables = {{.table = 1, .sharding = {sharding_kind::data_parallel}}}});
  CHECK(allowed(t, copies, 1) == types{tr::sharding_type::data_parallel});
  // A dim-64 table is one 128-column block: column-wise lays it out whole.
  const table_rules whole(t, {.tables = {{.table = 1, .sharding = {sharding_kind::table_wise}}}});
  CHECK(allowed(t, whole, 1) == types{tr::sharding_type::table_wise, tr::sharding_type::column_wise,
                                      tr::sharding_type::table_column_wise});
}

TEST_CASE("max_shards and min_shards bound the number of pieces of each type") {
  const auto t = rules_task();
  // At most 2 pieces: whole, or two column blocks (data-parallel's 8 copies
  // and the row blocks of 8 ranks are too many).
  CHECK(allowed(t, table_rules(t, {.tables = {{.table = 0, .max_shards = 2}}}), 0) ==
        types{tr::sharding_type::table_wise, tr::sharding_type::column_wise,
              tr::sharding_type::table_column_wise});
  CHECK(allowed(t, table_rules(t, {.tables = {{.table = 0, .max_shards = 1}}}), 0) ==
        types{tr::sharding_type::table_wise});
  // At least 4 pieces of a dim-64 table: min_partition 16, so 4 column
  // blocks; 8 copies or 8 row blocks also count.
  const table_rules four(t, {.tables = {{.table = 1, .min_shards = 4}}});
  auto in = tr::inputs_of(t);
  REQUIRE(apply_rules(in, t, four).empty());
  CHECK(in.tables[1].min_partition == 16);
  CHECK(in.sharding_types[1] ==
        types{tr::sharding_type::data_parallel, tr::sharding_type::column_wise,
              tr::sharding_type::table_column_wise, tr::sharding_type::row_wise,
              tr::sharding_type::table_row_wise});
  CHECK(in.tables[0].min_partition == 0);
  // 3 pieces of a dim-64 table: 4 x floor(64 / 12) = 20 columns, 3 blocks
  // (20, 20, 24).
  in = tr::inputs_of(t);
  REQUIRE(apply_rules(in, t, table_rules(t, {.tables = {{.table = 1, .min_shards = 3}}})).empty());
  CHECK(in.tables[1].min_partition == 20);
}

TEST_CASE("the torchrec preset plans under the rules it can give TorchRec") {
  const auto t = rules_task();
  // Unruled, TorchRec cuts table 0 into its two column blocks.
  const auto free = run_preset("torchrec", t, 0, analytic_cost{});
  REQUIRE(free.ok);
  REQUIRE(kinds(t, free.placement, 0) == std::set<sharding_kind>{sharding_kind::column_wise});
  REQUIRE(pieces(free.placement, 0) == 2);

  const table_rules rows(t, {.tables = {{.table = 0, .sharding = {sharding_kind::row_wise}}}});
  const auto r = run_preset("torchrec", t, 0, analytic_cost{}, {}, rows);
  REQUIRE_MESSAGE(r.ok, r.failure);
  CHECK(kinds(t, r.placement, 0) == std::set<sharding_kind>{sharding_kind::row_wise});
  CHECK(pieces(r.placement, 0) == 8);

  const table_rules one(t, {.tables = {{.table = 0, .max_shards = 1}}});
  const auto whole = run_preset("torchrec", t, 0, analytic_cost{}, {}, one);
  REQUIRE_MESSAGE(whole.ok, whole.failure);
  CHECK(pieces(whole.placement, 0) == 1);

  // min_shards 4 with column-wise only: four blocks of 16 columns, planned
  // by TorchRec itself (not cut beforehand by the stage).
  const table_rules four(
      t, {.tables = {{.table = 1, .sharding = {sharding_kind::column_wise}, .min_shards = 4}}});
  const auto cut = run_preset("torchrec", t, 0, analytic_cost{}, {}, four);
  REQUIRE_MESSAGE(cut.ok, cut.failure);
  CHECK(pieces(cut.placement, 1) == 4);
  for (const auto& s : cut.placement.shards)
    if (s.table == 1) CHECK(s.col_end - s.col_begin == 16);
}

TEST_CASE("rules that leave a table no TorchRec sharding type fail naming the table") {
  const auto t = rules_task();
  // Row pieces only, but at most 2: every row layout on 8 ranks has 8.
  const table_rules rules(
      t, {.tables = {{.table = 0, .sharding = {sharding_kind::row_wise}, .max_shards = 2}}});
  const auto r = run_preset("torchrec", t, 0, analytic_cost{}, {}, rules);
  REQUIRE_FALSE(r.ok);
  CHECK(r.failure.find("table 't0' (index 0) leave it no TorchRec sharding type") !=
        std::string::npos);
}

TEST_CASE("a pin is not a ParameterConstraint: a plan that breaks it fails naming it") {
  const auto t = rules_task();
  // Table 0, whole, is placed first (the largest) on the least loaded
  // device, rank 0; the pin says device 5.
  const table_rules rules(
      t, {.tables = {{.table = 0, .devices = {5}, .sharding = {sharding_kind::table_wise}}}});
  const auto r = run_preset("torchrec", t, 0, analytic_cost{}, {}, rules);
  REQUIRE_FALSE(r.ok);
  CHECK(r.failure.find("user constraints (1 table rule") != std::string::npos);
  CHECK(r.failure.find("table 0 't0' columns [0, 256) rows [0, 4000000) on device 0") !=
        std::string::npos);
}

}  // namespace torchrec_constraints_test
