#include "embplan/search/lower_bound.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/search/sorted_greedy.hpp"

namespace {

embplan::task with_dims(std::initializer_list<std::int32_t> dims, std::size_t devices) {
  embplan::task t;
  t.cluster = embplan::uniform_topology(devices);
  for (const auto d : dims) {
    embplan::table_spec s;
    s.name = "d" + std::to_string(t.tables.size());
    s.rows = 100;
    s.dim = d;
    s.pooling_factor = 2.0;
    t.tables.push_back(s);
  }
  return t;
}

}  // namespace

TEST_CASE("additive lower bound: the larger of the costliest table and the average, by hand") {
  CHECK(embplan::additive_lower_bound(with_dims({8, 4, 4, 4}, 2), embplan::dim_cost{}) == 10.0);
  CHECK(embplan::additive_lower_bound(with_dims({16, 4, 4}, 2), embplan::dim_cost{}) == 16.0);
  CHECK(embplan::additive_lower_bound(with_dims({16, 4, 4}, 2), embplan::lookup_cost{}) == 32.0);
}

TEST_CASE("the bound is below greedy's max load for every additive cost") {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    embplan::rng gen(seed);
    embplan::task t;
    t.cluster = embplan::uniform_topology(static_cast<std::size_t>(gen.between(2, 12)));
    const auto tables = gen.between(1, 80);
    for (std::int64_t i = 0; i < tables; ++i) {
      embplan::table_spec s;
      s.name = "t" + std::to_string(i);
      s.rows = gen.between(100, 100'000);
      s.dim = static_cast<std::int32_t>(4 * gen.between(1, 32));
      s.pooling_factor = gen.uniform(0.5, 40.0);
      t.tables.push_back(s);
    }
    const auto check = [&](const auto& model) {
      const auto r = embplan::sorted_greedy{}.search(t, model, embplan::memory_capacity{},
                                                     embplan::balance_reward{}, 0);
      REQUIRE(r.ok);
      const double cost = embplan::evaluate(t, r.placement, model).max_ms();
      const double bound = embplan::additive_lower_bound(t, model);
      CHECK(bound > 0.0);
      CHECK(bound <= cost * (1 + 1e-12));
      CHECK(embplan::gap_to_bound(cost, bound) >= -1e-12);
    };
    check(embplan::size_cost{});
    check(embplan::dim_cost{});
    check(embplan::lookup_cost{});
    check(embplan::size_lookup_cost{});
  }
}

TEST_CASE("on a mixed cluster a table counts at its cheapest device") {
  auto t = with_dims({16, 16}, 2);
  t.batch_size = 1000;
  t.cluster.devices[1].memory_bandwidth_gbps *= 2.0;
  t.cluster.devices[1].cache_bandwidth_gbps *= 2.0;
  const embplan::analytic_cost model;
  const double fast = model.shard_cost(t, embplan::whole_table(t, 0, 1));
  CHECK(fast < model.shard_cost(t, embplan::whole_table(t, 0, 0)));
  CHECK(embplan::additive_lower_bound(t, model) == doctest::Approx(fast).epsilon(1e-12));
}

TEST_CASE("gap to bound") {
  CHECK(embplan::gap_to_bound(12.0, 10.0) == doctest::Approx(0.2));
  CHECK(embplan::gap_to_bound(10.0, 10.0) == 0.0);
  CHECK(embplan::gap_to_bound(0.0, 0.0) == 0.0);
  CHECK(std::isinf(embplan::gap_to_bound(1.0, 0.0)));
}
