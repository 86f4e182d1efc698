#include "embplan/search/sorted_greedy.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/balance.hpp"

namespace {

embplan::table_spec table(std::string name, std::int64_t rows, std::int32_t dim,
                          double pooling_factor = 1.0) {
  embplan::table_spec s;
  s.name = std::move(name);
  s.rows = rows;
  s.dim = dim;
  s.pooling_factor = pooling_factor;
  s.reuse_hist[0] = 1.0;
  return s;
}

std::vector<std::size_t> devices_of(const embplan::plan& p) {
  std::vector<std::size_t> out(p.shards.size());
  for (const auto& s : p.shards)
    out[s.table] = s.device;
  return out;
}

// Random tasks with tight, uneven memory: `fill` is the share of the cluster's
// memory the tables need; devices differ in capacity and bandwidth.
embplan::task greedy_random_task(std::uint64_t seed, std::size_t tables, std::size_t devices,
                                 double fill) {
  embplan::rng gen(seed);
  embplan::task t;
  t.cluster = embplan::uniform_topology(devices);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < tables; ++i) {
    auto s = table("t" + std::to_string(i), gen.between(1000, 100'000),
                   static_cast<std::int32_t>(4 * gen.between(1, 32)), gen.uniform(0.0, 30.0));
    if (gen.below(4) == 0) s.dim = 16;  // many equal dims, so ties happen
    total += embplan::table_bytes(s);
    t.tables.push_back(s);
  }
  double weight_sum = 0.0;
  std::vector<double> weights(devices);
  for (auto& w : weights) {
    w = gen.uniform(0.5, 1.5);
    weight_sum += w;
  }
  for (std::size_t d = 0; d < devices; ++d) {
    t.cluster.devices[d].memory_bytes =
        static_cast<std::uint64_t>(static_cast<double>(total) / fill * weights[d] / weight_sum);
    t.cluster.devices[d].memory_bandwidth_gbps = gen.uniform(300.0, 900.0);
  }
  return t;
}

// The papers' algorithm written the plain way: O(T x D) linear scans.
template <class CostModel, class Constraint>
std::pair<bool, std::vector<std::size_t>> reference_greedy(const embplan::task& t,
                                                           const CostModel& model,
                                                           const Constraint& rule) {
  std::vector<std::tuple<double, std::uint64_t, std::size_t>> keys;
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    keys.emplace_back(model.shard_cost(t, embplan::whole_table(t, i, 0)),
                      embplan::table_bytes(t.tables[i]), i);
  std::sort(keys.begin(), keys.end());  // Python's sorted(), then pop() from the end
  std::vector<double> load(t.cluster.size(), 0.0);
  embplan::placement_state st(t.cluster.size());
  std::vector<std::size_t> assignment(t.tables.size());
  while (!keys.empty()) {
    const std::size_t i = std::get<2>(keys.back());
    keys.pop_back();
    std::size_t best = t.cluster.size();
    for (std::size_t d = 0; d < t.cluster.size(); ++d) {
      if (!rule.admits(t, st, embplan::whole_table(t, i, d))) continue;
      if (best == t.cluster.size() || load[d] < load[best] ||
          (load[d] == load[best] && st.memory_bytes[d] < st.memory_bytes[best])) {
        best = d;
      }
    }
    if (best == t.cluster.size()) return {false, {}};
    const auto s = embplan::whole_table(t, i, best);
    load[best] += model.shard_cost(t, s);
    st.place(t, s);
    assignment[i] = best;
  }
  return {true, assignment};
}

}  // namespace

TEST_CASE("sorted greedy reproduces a hand-worked dim-greedy example, ties included") {
  // Costs are the dims. Sorted descending by (cost, bytes, index):
  //   t1 (8, 6400), t2 (8, 3200, #2), t0 (8, 3200, #0), t3 (4, 800), t5 (4, 160, #5), t4 (4, 160,
  //   #4)
  // t1 -> d0 (all equal: lowest index)        loads 8 0 0   memory 6400 0 0
  // t2 -> d1 (load 0, memory 0: lower index)  loads 8 8 0   memory 6400 3200 0
  // t0 -> d2                                  loads 8 8 8   memory 6400 3200 3200
  // t3 -> d1 (loads tie: less memory, then lower index)     loads 8 12 8  memory 6400 4000 3200
  // t5 -> d2 (loads 8 tie with d0: less memory)             loads 8 12 12
  // t4 -> d0                                  loads 12 12 12
  embplan::task t;
  t.cluster = embplan::uniform_topology(3);
  t.tables = {table("t0", 100, 8), table("t1", 200, 8), table("t2", 100, 8),
              table("t3", 50, 4),  table("t4", 10, 4),  table("t5", 10, 4)};
  const auto r = embplan::sorted_greedy{}.search(t, embplan::dim_cost{}, embplan::memory_capacity{},
                                                 embplan::balance_reward{}, 0);
  REQUIRE(r.ok);
  CHECK(devices_of(r.placement) == std::vector<std::size_t>{2, 0, 1, 1, 0, 2});
  CHECK(r.placement.shards.size() == 6);
  CHECK(r.evaluations >= 6);
}

TEST_CASE("sorted greedy skips devices the constraint refuses") {
  // Device 0 holds 1000 bytes: the 1600-byte table goes to device 1 although
  // both are empty, and the next table then fills device 0.
  embplan::task t;
  t.cluster = embplan::uniform_topology(2);
  t.cluster.devices[0].memory_bytes = 1000;
  t.tables = {table("big", 100, 4, 9.0), table("small", 10, 4, 1.0)};
  const auto r = embplan::sorted_greedy{}.search(
      t, embplan::lookup_cost{}, embplan::memory_capacity{}, embplan::balance_reward{}, 0);
  REQUIRE(r.ok);
  CHECK(devices_of(r.placement) == std::vector<std::size_t>{1, 0});
}

TEST_CASE("sorted greedy equals the plain O(T x D) algorithm on random tight tasks") {
  int feasible = 0;
  int infeasible = 0;
  int memory_mattered = 0;
  for (std::uint64_t seed = 0; seed < 24; ++seed) {
    const auto t = greedy_random_task(seed, 200, 16, 0.85 + 0.05 * static_cast<double>(seed % 4));
    const auto check = [&](const auto& model, const auto& rule) {
      const auto [ok, expected] = reference_greedy(t, model, rule);
      const auto r = embplan::sorted_greedy{}.search(t, model, rule, embplan::balance_reward{}, 0);
      CHECK(r.ok == ok);
      if (ok) {
        CHECK(devices_of(r.placement) == expected);
        ++feasible;
        const auto free = embplan::sorted_greedy{}.search(t, model, embplan::all_of<>{},
                                                          embplan::balance_reward{}, 0);
        if (devices_of(free.placement) != expected) ++memory_mattered;
      } else {
        CHECK(r.failure.find("fits on no device") != std::string::npos);
        ++infeasible;
      }
    };
    check(embplan::lookup_cost{}, embplan::memory_capacity{});
    check(embplan::size_cost{}, embplan::default_constraint{});
    check(embplan::dim_cost{}, embplan::memory_capacity{});
    check(embplan::analytic_cost{}, embplan::memory_capacity{});  // device-dependent costs
  }
  // The comparison covered both outcomes, and plans where refusals changed the choice.
  CHECK(feasible > 20);
  CHECK(infeasible > 5);
  CHECK(memory_mattered > 10);
}

TEST_CASE("an infeasible table is reported by name, index, size and free memory") {
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 10'000;
  t.cluster = embplan::uniform_topology(2, dev);
  t.tables = {table("small", 100, 8), table("huge_user_ids", 1000, 4), table("other", 10, 4)};
  const auto r = embplan::sorted_greedy{}.search(
      t, embplan::size_cost{}, embplan::memory_capacity{}, embplan::balance_reward{}, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.placement.shards.empty());
  CHECK(r.failure.find("table 'huge_user_ids' (index 1, 16000 bytes)") != std::string::npos);
  CHECK(r.failure.find("under memory capacity") != std::string::npos);
  CHECK(r.failure.find("0: 10000 bytes, 1: 10000 bytes") != std::string::npos);
}

TEST_CASE("a table refused by a rule other than memory names the rule") {
  embplan::task t;
  t.cluster = embplan::uniform_topology(20);
  t.tables = {table("odd", 10, 6)};
  const auto r = embplan::sorted_greedy{}.search(
      t, embplan::dim_cost{}, embplan::default_constraint{}, embplan::balance_reward{}, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find("table 'odd' (index 0, 240 bytes)") != std::string::npos);
  CHECK(r.failure.find("columns a multiple of 4") != std::string::npos);
  CHECK(r.failure.find("largest free memory: 4294967296 bytes on device 0 of 20") !=
        std::string::npos);
}
