#include "embplan/stage/tiers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/topology.hpp"

namespace {

// Four tables of 100,000 x 16 fp32 (6.4 MB each) on two devices of 8 MB:
// 25.6 MB of tables for 16 MB of HBM. t0 and t1 are read skewed (a small hot
// set), t2 and t3 uniformly.
embplan::task crowded() {
  embplan::task t;
  t.name = "crowded";
  t.batch_size = 1024;
  for (int i = 0; i < 4; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 100'000;
    s.dim = 16;
    s.pooling_factor = 10.0 * (i + 1);
    if (i < 2) {
      s.reuse_hist[0] = 0.5;
      s.reuse_hist[6] = 0.5;
    } else {
      s.reuse_hist[0] = 1.0;
    }
    t.tables.push_back(s);
  }
  t.cluster = embplan::uniform_topology(2, embplan::device_spec{.memory_bytes = 8'000'000});
  return t;
}

// crowded() with this much host DRAM per device.
embplan::task crowded_with_dram(std::uint64_t dram_bytes) {
  auto t = crowded();
  for (auto& d : t.cluster.devices)
    d.dram_bytes = dram_bytes;
  return t;
}

std::size_t tables_in_hbm(const embplan::task& t) {
  return static_cast<std::size_t>(std::count_if(
      t.tables.begin(), t.tables.end(),
      [](const embplan::table_spec& s) { return s.placement.tier == embplan::memory_tier::hbm; }));
}

}  // namespace

TEST_CASE("choose_tiers: nothing moves when the tables fit") {
  auto t = crowded();
  for (auto& d : t.cluster.devices)
    d.memory_bytes = 100'000'000;
  CHECK(embplan::stage::choose_tiers(t).empty());
  for (const auto& s : t.tables)
    CHECK(s.placement.tier == embplan::memory_tier::hbm);
}

TEST_CASE("choose_tiers: moves the cheapest tables per byte freed until the need fits") {
  auto t = crowded();
  const auto before = t;
  const auto moves = embplan::stage::choose_tiers(t);
  REQUIRE(!moves.empty());
  CHECK(static_cast<double>(embplan::stage::tables_hbm_bytes(t)) <= 0.9 * 16'000'000);
  for (const auto& m : moves) {
    CHECK(t.tables[m.table].placement == m.placement);
    CHECK(m.placement.tier != embplan::memory_tier::hbm);
    CHECK(m.hbm_freed_bytes > 0);
  }
  // Each move was the cheapest per byte freed then: the first moved table's
  // cost per byte is no more than any other's host move.
  const embplan::analytic_cost model;
  const auto& first = moves.front();
  const double first_score = first.added_cost_ms / static_cast<double>(first.hbm_freed_bytes);
  for (std::size_t i = 0; i < before.tables.size(); ++i) {
    const auto whole = embplan::whole_table(before, i, 0);
    const double added =
        model.tiered_shard_cost(before, whole, {.tier = embplan::memory_tier::host}) -
        model.shard_cost(before, whole);
    CHECK(first_score <= added / static_cast<double>(embplan::shard_bytes(before, whole)) + 1e-18);
  }
  // Deterministic.
  auto again = crowded();
  const auto moves2 = embplan::stage::choose_tiers(again);
  REQUIRE(moves2.size() == moves.size());
  for (std::size_t k = 0; k < moves.size(); ++k) {
    CHECK(moves2[k].table == moves[k].table);
    CHECK(moves2[k].placement == moves[k].placement);
  }
  CHECK(again == t);
}

TEST_CASE("choose_tiers: fixed tables stay; bad options are named") {
  auto t = crowded();
  const std::vector<bool> fixed{true, true, true, true};
  CHECK(embplan::stage::choose_tiers(t, {}, fixed).empty());
  const std::vector<bool> some{false, true, true, true};
  const auto moves = embplan::stage::choose_tiers(t, {}, some);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].table == 0);
  try {
    (void)embplan::stage::choose_tiers(t, {.hbm_fill = 1.5});
    CHECK(false);
  } catch (const embplan::error& e) {
    CHECK(std::string(e.what()).find("tier_options.hbm_fill' = 1.5") != std::string::npos);
  }
}

TEST_CASE("choose_tiers: a table stays in hbm where the cluster's host DRAM cannot take it") {
  // Without a DRAM limit, more than one table moves.
  auto unlimited = crowded();
  const auto free_moves = embplan::stage::choose_tiers(unlimited);
  REQUIRE(free_moves.size() >= 2);

  // 6.6 MB of host DRAM in all: one table's 6.4 MB of weights, not two.
  auto t = crowded_with_dram(3'300'000);
  const auto moves = embplan::stage::choose_tiers(t);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].table == free_moves[0].table);  // the best move, as without the limit
  std::uint64_t dram = 0;
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    dram += embplan::shard_dram_bytes(t, embplan::whole_table(t, i, 0));
  CHECK(dram <= 6'600'000);
  CHECK(tables_in_hbm(t) == 3);

  // No room for any table: nothing moves.
  auto none = crowded_with_dram(1'000'000);
  CHECK(embplan::stage::choose_tiers(none).empty());
  CHECK(tables_in_hbm(none) == 4);

  // A device with no limit makes the cluster's DRAM unlimited.
  auto mixed = crowded();
  mixed.cluster.devices[0].dram_bytes = 1'000'000;
  CHECK(embplan::stage::choose_tiers(mixed).size() == free_moves.size());

  // A table already off hbm counts against the DRAM: with it, none moves.
  auto held = crowded_with_dram(3'300'000);
  held.tables[3].placement = {.tier = embplan::memory_tier::host};
  CHECK(embplan::stage::choose_tiers(held).empty());
}
