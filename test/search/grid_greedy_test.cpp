#include "embplan/search/grid_greedy.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/plan_pricer.hpp"

#include "support/random_task.hpp"

namespace {

using embplan_test::search_task;

// Alg. 2 without the engine's shortcuts: the plan of every bound of the grid
// from scratch (and of no bound, when none gives one), device costs from
// model.compute.
template <class Rule>
std::vector<embplan::plan> reference_grid_plans(const embplan::task& t,
                                                const embplan::analytic_cost& model,
                                                const Rule& rule, std::int32_t grid) {
  using namespace embplan;
  const std::size_t n = t.tables.size();
  const std::size_t devices = t.cluster.size();
  struct key {
    double cost;
    std::uint64_t bytes;
    std::uint32_t table;
  };
  std::vector<key> order;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const shard s = whole_table(t, i, 0);
    order.push_back(key{model.compute(t, std::span<const shard>(&s, 1), 0).total_ms(),
                        shard_bytes(t, s), s.table});
    total += s.cols();
  }
  std::sort(order.begin(), order.end(), [](const key& a, const key& b) {
    return std::tie(b.cost, b.bytes, b.table) < std::tie(a.cost, a.bytes, a.table);
  });
  std::vector<plan> out;
  const auto pass = [&](std::int64_t bound) {
    placement_state st(devices);
    std::vector<std::vector<shard>> on(devices);
    std::vector<double> load(devices, 0.0);
    plan p;
    for (const auto& k : order) {
      std::size_t chosen = devices;
      for (std::size_t d = 0; d < devices; ++d) {
        const shard s = whole_table(t, k.table, d);
        if (st.dim_sum[d] + s.cols() > bound || !rule.admits(t, st, s)) continue;
        if (chosen == devices || std::tie(load[d], st.memory_bytes[d], d) <
                                     std::tie(load[chosen], st.memory_bytes[chosen], chosen))
          chosen = d;
      }
      if (chosen == devices) return;
      const shard s = whole_table(t, k.table, chosen);
      st.place(t, s);
      on[chosen].push_back(s);
      p.shards.push_back(s);
      load[chosen] = model.compute(t, std::span<const shard>(on[chosen]), chosen).total_ms();
    }
    out.push_back(std::move(p));
  };
  for (const auto b : search::detail::dim_bounds(total, devices, grid))
    pass(b);
  if (out.empty()) pass(search::detail::no_dim_bound);
  return out;
}

// A table-wise plan with its shards in table order, as grid_greedy returns it.
embplan::plan in_table_order(const embplan::task& t, const embplan::plan& p) {
  std::vector<std::size_t> device(t.tables.size());
  for (const auto& s : p.shards)
    device[s.table] = s.device;
  return embplan::table_wise_plan(t, device);
}

// The cheapest of those plans, priced by evaluate().
template <class Rule>
double reference_grid(const embplan::task& t, const embplan::analytic_cost& model, const Rule& rule,
                      std::int32_t grid) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& p : reference_grid_plans(t, model, rule, grid))
    best = std::min(best, embplan::evaluate(t, p, model).max_ms());
  return best;
}

}  // namespace

TEST_CASE("dim bounds: M points from the mean device dim to 1.5 x it, integers, no repeats") {
  using embplan::search::detail::dim_bounds;
  CHECK(dim_bounds(400, 4, 11) ==
        std::vector<std::int64_t>{100, 105, 110, 115, 120, 125, 130, 135, 140, 145, 150});
  CHECK(dim_bounds(400, 4, 1) == std::vector<std::int64_t>{100});
  CHECK(dim_bounds(8, 4, 11) == std::vector<std::int64_t>{2, 3});  // 2, 2.1, ... 3
}

TEST_CASE("grid greedy picks the cheapest bound, exactly as a from-scratch grid search") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    CAPTURE(seed);
    const auto t = search_task(seed, 10 + 5 * (seed % 6), seed % 2 ? 8 : 4);
    const auto r = embplan::grid_greedy{}.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
    const double expected = reference_grid(t, model, rule, 11);
    REQUIRE(r.ok == std::isfinite(expected));
    if (!r.ok) continue;
    CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
    CHECK(embplan::evaluate(t, r.placement, model).max_ms() ==
          doctest::Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("grid greedy respects the dim bound it reports and memory") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  using embplan::search::detail::piece;
  for (std::uint64_t seed = 20; seed < 26; ++seed) {
    const auto t = search_task(seed, 30, 4);
    embplan::search::detail::cost_cache cache;
    embplan::search::detail::grid_engine<embplan::analytic_cost, embplan::default_constraint>
        engine(t, model, rule, cache);
    std::vector<piece> pieces;
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      pieces.push_back(embplan::search::detail::make_piece(t, embplan::whole_table(t, i, 0)));
    const auto out = engine.run(pieces, 11, false);
    REQUIRE(out.ok);
    std::vector<std::size_t> assignment(out.device.begin(), out.device.end());
    const auto p = embplan::table_wise_plan(t, assignment);
    const auto st = embplan::state_of(t, p);
    for (std::size_t d = 0; d < 4; ++d) {
      CHECK(st.dim_sum[d] <= out.bound);
      CHECK(st.memory_bytes[d] <= t.cluster.devices[d].memory_bytes);
    }
    CHECK(out.cost_ms == doctest::Approx(embplan::evaluate(t, p, model).max_ms()).epsilon(1e-12));
  }
}

TEST_CASE("the plan pricer is evaluate()'s arithmetic") {
  const embplan::analytic_cost model;
  const auto t = search_task(3, 25, 8);
  const auto r = embplan::grid_greedy{}.search(t, model, embplan::default_constraint{},
                                               embplan::neg_max_cost_reward{}, 0);
  REQUIRE(r.ok);
  const auto cost = embplan::evaluate(t, r.placement, model);
  std::vector<embplan::compute_cost> compute;
  for (const auto& d : cost.devices)
    compute.push_back({d.fwd_compute_ms, d.bwd_compute_ms});
  embplan::search::detail::plan_pricer pricer;
  CHECK(pricer.max_ms(t, model, compute, cost.dim_sum) == cost.max_ms());
  for (std::size_t d = 0; d < 8; ++d)
    CHECK(pricer.totals()[d] == cost.devices[d].total_ms());
}

TEST_CASE("grid greedy: bad M, an infeasible task names the table, cache counted") {
  const auto t = search_task(4, 12, 4);
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  for (const std::int32_t m : {0, -3}) {
    const std::string expected = "grid_greedy.grid' = " + std::to_string(m);
    CHECK_THROWS_WITH_AS(embplan::grid_greedy{.grid = m}.search(t, model, rule, reward, 0),
                         doctest::Contains(expected.c_str()), embplan::error);
  }
  auto huge = t;
  huge.tables[5].name = "giant";
  huge.tables[5].rows = 2'000'000'000;
  const auto r = embplan::grid_greedy{}.search(huge, model, rule, reward, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find("giant") != std::string::npos);
  CHECK(r.failure.find("memory") != std::string::npos);

  const auto ok = embplan::grid_greedy{}.search(t, model, rule, reward, 0);
  REQUIRE(ok.ok);
  CHECK(ok.cache_lookups > 0);
  CHECK(ok.cache_hits > 0);
  CHECK(ok.cache_hits < ok.cache_lookups);
}

TEST_CASE("plans that cannot win are not priced only where communication is never negative") {
  using embplan::search::detail::communication_nonnegative;
  using embplan::search::detail::compute_bound_ms;
  const embplan::analytic_cost model;
  auto t = search_task(3, 20, 4);
  CHECK(communication_nonnegative(model, t));
  t.cluster.collective_latency_ms = -0.01;  // an unvalidated topology: no promise
  CHECK_FALSE(communication_nonnegative(model, t));
  t.cluster.collective_latency_ms = 0.05;
  t.cluster.inter_host_bandwidth_gbps = 0.0;
  CHECK_FALSE(communication_nonnegative(model, t));
  // The bound is the busiest device's compute, and a priced plan is never below it.
  t = search_task(3, 20, 4);
  const auto r = embplan::grid_greedy{}.search(t, model, embplan::default_constraint{},
                                               embplan::neg_max_cost_reward{}, 0);
  REQUIRE(r.ok);
  const auto costs = embplan::evaluate(t, r.placement, model);
  std::vector<embplan::compute_cost> compute;
  for (const auto& d : costs.devices)
    compute.push_back({.fwd_ms = d.fwd_compute_ms, .bwd_ms = d.bwd_compute_ms});
  CHECK(compute_bound_ms(compute) > 0.0);
  CHECK(compute_bound_ms(compute) <= costs.max_ms());
}

TEST_CASE("grid greedy keeps, of the grid's plans, the one the reward scores highest") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::balance_reward reward;
  int changed = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    CAPTURE(seed);
    const auto t = search_task(seed, 10 + 2 * seed, seed % 2 ? 8 : 4);
    const auto r = embplan::grid_greedy{.grid = 5}.search(t, model, rule, reward, 0);
    const auto plans = reference_grid_plans(t, model, rule, 5);
    REQUIRE(r.ok == !plans.empty());
    if (!r.ok) continue;
    // The first plan with the highest balance, in the order of the bounds.
    double best = -1.0;
    embplan::plan expected;
    for (const auto& p : plans) {
      const double score = reward.score(t, embplan::evaluate(t, p, model));
      if (score > best) {
        best = score;
        expected = in_table_order(t, p);
      }
    }
    CHECK(r.placement == expected);
    const auto cheapest =
        embplan::grid_greedy{.grid = 5}.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
    REQUIRE(cheapest.ok);
    changed += r.placement == cheapest.placement ? 0 : 1;
  }
  CHECK(changed >= 2);
}

TEST_CASE("the engine scores a plan on evaluate()'s plan_cost") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  using embplan::search::detail::piece;
  for (std::uint64_t seed = 30; seed < 34; ++seed) {
    const auto t = search_task(seed, 25, 8);
    embplan::search::detail::cost_cache cache;
    embplan::search::detail::grid_engine<embplan::analytic_cost, embplan::default_constraint,
                                         embplan::balance_reward>
        engine(t, model, rule, cache, embplan::balance_reward{});
    std::vector<piece> pieces;
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      pieces.push_back(embplan::search::detail::make_piece(t, embplan::whole_table(t, i, 0)));
    const auto out = engine.run(pieces, 11, false);
    REQUIRE(out.ok);
    std::vector<std::size_t> assignment(out.device.begin(), out.device.end());
    const auto cost = embplan::evaluate(t, embplan::table_wise_plan(t, assignment), model);
    // The same figures, up to the order in which a device's pieces are summed
    // (placement order in the engine, table order in evaluate()).
    CHECK(out.score == doctest::Approx(embplan::balance_reward{}.score(t, cost)).epsilon(1e-12));
    CHECK(out.cost_ms == doctest::Approx(cost.max_ms()).epsilon(1e-12));
    CHECK(out.score != doctest::Approx(-out.cost_ms));
  }
}

TEST_CASE("plan_cost_of gives evaluate()'s plan_cost for the plan last priced") {
  const embplan::analytic_cost model;
  const auto t = search_task(5, 25, 8);
  const auto r = embplan::grid_greedy{}.search(t, model, embplan::default_constraint{},
                                               embplan::neg_max_cost_reward{}, 0);
  REQUIRE(r.ok);
  const auto cost = embplan::evaluate(t, r.placement, model);
  std::vector<embplan::compute_cost> compute;
  for (const auto& d : cost.devices)
    compute.push_back({d.fwd_compute_ms, d.bwd_compute_ms});
  embplan::search::detail::plan_pricer pricer;
  pricer.max_ms(t, model, compute, cost.dim_sum);
  embplan::plan_cost out;
  out.memory_bytes.assign(3, 7);  // stale contents are replaced
  pricer.plan_cost_of(compute, cost.memory_bytes, cost.dim_sum, out);
  REQUIRE(out.devices.size() == cost.devices.size());
  for (std::size_t d = 0; d < cost.devices.size(); ++d) {
    CHECK(out.devices[d].fwd_compute_ms == cost.devices[d].fwd_compute_ms);
    CHECK(out.devices[d].bwd_compute_ms == cost.devices[d].bwd_compute_ms);
    CHECK(out.devices[d].fwd_comm_ms == cost.devices[d].fwd_comm_ms);
    CHECK(out.devices[d].bwd_comm_ms == cost.devices[d].bwd_comm_ms);
  }
  CHECK(out.memory_bytes == cost.memory_bytes);
  CHECK(out.dim_sum == cost.dim_sum);
}
