#include "embplan/search/random_placement.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/reward/neg_max_cost.hpp"

namespace {

// 50 tables on 4 devices that together hold 1.25x what the tables need.
embplan::task tight_task(std::uint64_t seed) {
  embplan::rng gen(seed);
  embplan::task t;
  t.cluster = embplan::uniform_topology(4);
  std::uint64_t total = 0;
  for (int i = 0; i < 50; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = gen.between(1000, 50'000);
    s.dim = static_cast<std::int32_t>(4 << gen.between(0, 5));
    s.pooling_factor = gen.uniform(1.0, 20.0);
    total += embplan::table_bytes(s);
    t.tables.push_back(s);
  }
  for (auto& d : t.cluster.devices)
    d.memory_bytes = total * 5 / 16;
  return t;
}

embplan::search_result place(const embplan::task& t, std::uint64_t seed) {
  return embplan::random_placement{}.search(t, embplan::analytic_cost{},
                                            embplan::default_constraint{},
                                            embplan::neg_max_cost_reward{}, seed);
}

}  // namespace

TEST_CASE("random placement is legal, table-wise and reproducible per seed") {
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const auto t = tight_task(seed);
    const auto r = place(t, seed);
    REQUIRE(r.ok);
    CHECK(r.failure.empty());
    CHECK(r.placement.shards.size() == t.tables.size());
    CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
    CHECK(place(t, seed).placement == r.placement);
    CHECK(place(t, seed + 100).placement != r.placement);
    CHECK(r.evaluations == 0);
  }
  CHECK(embplan::random_placement{}.name() == "random");
}

TEST_CASE("random placement draws only among admitted devices, uniformly") {
  embplan::task t;
  t.cluster = embplan::uniform_topology(4);
  t.cluster.devices[2].memory_bytes = 100;  // too small for the table
  embplan::table_spec s;
  s.name = "only";
  s.rows = 100;
  s.dim = 4;
  t.tables.push_back(s);
  std::array<int, 4> hits{};
  for (std::uint64_t seed = 0; seed < 3000; ++seed)
    ++hits[place(t, seed).placement.shards.at(0).device];
  CHECK(hits[2] == 0);
  for (const std::size_t d : {0, 1, 3}) {
    CHECK(hits[d] > 850);  // 1000 expected; +-150 is > 5 standard deviations
    CHECK(hits[d] < 1150);
  }
}

TEST_CASE("a table with no admitted device fails with its name, index, bytes and the rule") {
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 1000;
  t.cluster = embplan::uniform_topology(2, dev);
  for (const std::int64_t rows : {10, 100}) {
    embplan::table_spec s;
    s.name = "rows" + std::to_string(rows);
    s.rows = rows;
    s.dim = 4;
    t.tables.push_back(s);
  }
  const auto r = place(t, 1);
  CHECK_FALSE(r.ok);
  CHECK(r.placement.shards.empty());
  CHECK(r.failure.find("table 'rows100' (index 1, 1600 bytes)") != std::string::npos);
  CHECK(r.failure.find("memory capacity and columns a multiple of 4") != std::string::npos);
  CHECK(r.failure.find("bytes, 1: ") != std::string::npos);
  CHECK(r.failure.find("free memory per device") != std::string::npos);
}
