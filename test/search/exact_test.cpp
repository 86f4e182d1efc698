// exact_table_wise (search/exact.hpp): the optimum against brute force over
// every assignment, under the analytic and a learned model and two rewards;
// symmetry breaking changes the work, never the optimum; no table-wise planner
// beats it; bad input.
#include "embplan/search/exact.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/sorted_greedy.hpp"

#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace {

using namespace embplan;

const neural_cost& exact_test_learned() {
  static const auto m = neural_cost::load(std::string(EMBPLAN_SOURCE_DIR) +
                                          "/data/cost/cpu_compute_model.safetensors");
  return m;
}

// The best reward over all D^n table-wise assignments the constraint admits
// (tables placed in index order, each checked as it is placed), and how many
// there were.
template <class Model, class Reward>
double brute_force_best(const task& t, const Model& model, const default_constraint& rule,
                        const Reward& reward, std::size_t& admitted) {
  const std::size_t n = t.tables.size();
  const std::size_t devices = t.cluster.size();
  std::vector<std::size_t> digit(n, 0);
  double best = -std::numeric_limits<double>::infinity();
  admitted = 0;
  for (;;) {
    plan p;
    placement_state st(devices);
    bool ok = true;
    for (std::size_t i = 0; i < n && ok; ++i) {
      const shard s = whole_table(t, i, digit[i]);
      ok = rule.admits(t, st, s);
      if (ok) {
        st.place(t, s);
        p.shards.push_back(s);
      }
    }
    if (ok) {
      ++admitted;
      best = std::max(best, static_cast<double>(reward.score(t, evaluate(t, p, model))));
    }
    std::size_t k = 0;
    while (k < n && ++digit[k] == devices)
      digit[k++] = 0;
    if (k == n) break;
  }
  return best;
}

template <class Model, class Reward>
void check_optimal(const task& t, const Model& model, const Reward& reward,
                   const exact_table_wise& exact) {
  const default_constraint rule;
  std::size_t admitted = 0;
  const double want = brute_force_best(t, model, rule, reward, admitted);
  const auto r = exact.search(t, model, rule, reward, 0);
  REQUIRE(r.ok == (admitted > 0));
  if (!r.ok) return;
  CHECK_NOTHROW(validate(t, r.placement));
  // Priced as evaluate() prices it: the brute force's best, bit for bit.
  const double got = static_cast<double>(reward.score(t, evaluate(t, r.placement, model)));
  CHECK(got == want);
}

}  // namespace

TEST_CASE(
    "exact: the brute force's optimum, analytic model, both rewards, with and without symmetry") {
  const analytic_cost model;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    CAPTURE(seed);
    // 5-7 tables on 3 devices; the last seeds with memory that binds.
    const auto t =
        embplan_test::search_task(seed, 5 + seed % 3, 3, seed < 5 ? 512u << 20 : 24u << 20);
    for (const bool symmetric : {true, false}) {
      CAPTURE(symmetric);
      const exact_table_wise exact{.symmetric = symmetric};
      check_optimal(t, model, neg_max_cost_reward{}, exact);
      check_optimal(t, model, balance_reward{}, exact);
    }
  }
}

TEST_CASE("exact: the brute force's optimum where host DRAM binds (undone as it backtracks)") {
  const analytic_cost model;
  std::size_t binding = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    // 7 tables on 3 devices, the first four in host DRAM; each device's DRAM
    // a third of theirs plus half the largest.
    auto t = embplan_test::search_task(seed, 7, 3);
    std::uint64_t dram = 0;
    std::uint64_t largest = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      t.tables[i].placement = {memory_tier::host, 0.0};
      dram += table_bytes(t.tables[i], t.optimizer_state);
      largest = std::max(largest, table_bytes(t.tables[i], t.optimizer_state));
    }
    const auto free =
        exact_table_wise{}.search(t, model, default_constraint{}, neg_max_cost_reward{}, 0);
    for (auto& d : t.cluster.devices)
      d.dram_bytes = dram / 3 + largest / 2;
    REQUIRE(free.ok);
    if (!plan_problems(t, free.placement).empty()) ++binding;
    check_optimal(t, model, neg_max_cost_reward{}, exact_table_wise{});
  }
  CHECK(binding > 0);
}

TEST_CASE("exact: the brute force's optimum where devices differ only in memory") {
  // Symmetry breaking must not take such devices for equal (device_kinds::by::
  // whole): the small one holds only the smaller tables.
  const analytic_cost model;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    auto t = embplan_test::search_task(seed, 7, 3, 512u << 20);
    std::vector<std::uint64_t> bytes;
    for (const auto& s : t.tables)
      bytes.push_back(table_bytes(s, t.optimizer_state));
    std::sort(bytes.begin(), bytes.end());
    t.cluster.devices[1].memory_bytes = bytes[2] + bytes[3];
    check_optimal(t, model, neg_max_cost_reward{}, exact_table_wise{});
  }
}

TEST_CASE("exact: the brute force's optimum, learned model (not monotone)") {
  const auto& model = exact_test_learned();
  for (std::uint64_t seed = 10; seed < 14; ++seed) {
    CAPTURE(seed);
    const auto t = embplan_test::search_task(seed, 6, 3);
    check_optimal(t, model, neg_max_cost_reward{}, exact_table_wise{});
  }
}

TEST_CASE("exact: symmetry breaking prices fewer plans for the same optimum") {
  const analytic_cost model;
  const auto t = embplan_test::search_task(3, 9, 4);
  const default_constraint rule;
  const auto with = exact_table_wise{}.search(t, model, rule, neg_max_cost_reward{}, 0);
  const auto without =
      exact_table_wise{.symmetric = false}.search(t, model, rule, neg_max_cost_reward{}, 0);
  REQUIRE(with.ok);
  REQUIRE(without.ok);
  const double best = evaluate(t, with.placement, model).max_ms();
  CHECK(evaluate(t, without.placement, model).max_ms() == best);
  CHECK(with.evaluations < without.evaluations);
  // Same seed or not, the same plan.
  const auto again = exact_table_wise{}.search(t, model, rule, neg_max_cost_reward{}, 7);
  CHECK(again.placement == with.placement);
}

TEST_CASE("exact: no table-wise planner finds a cheaper plan") {
  const analytic_cost model;
  const default_constraint rule;
  for (std::uint64_t seed = 20; seed < 24; ++seed) {
    CAPTURE(seed);
    const auto t = embplan_test::search_task(seed, 10, 4);
    const auto best = basic_exact_planner<analytic_cost>{}(t, 0);
    REQUIRE(best.ok);
    const double optimum = best.cost_ms.max_ms();
    const auto greedy = lookup_greedy_planner{}(t, 0);
    const auto sampled = random_search_planner{}(t, seed);
    REQUIRE(greedy.ok);
    REQUIRE(sampled.ok);
    CHECK(optimum <= greedy.cost_ms.max_ms());
    CHECK(optimum <= sampled.cost_ms.max_ms());
  }
}

TEST_CASE("exact: a task with no table-wise plan fails naming the table") {
  auto t = embplan_test::search_task(1, 5, 2, 256u << 20);
  t.tables[2].name = "giant";
  t.tables[2].rows = 50'000'000;
  const auto r =
      exact_table_wise{}.search(t, analytic_cost{}, default_constraint{}, neg_max_cost_reward{}, 0);
  CHECK_FALSE(r.ok);
  CAPTURE(r.failure);
  CHECK(r.failure.find("giant") != std::string::npos);
}

TEST_CASE("exact: bad settings and tasks too large name the field and the value") {
  const analytic_cost model;
  const default_constraint rule;
  const auto small = embplan_test::search_task(2, 6, 3);
  const auto run = [&](const exact_table_wise& e, const task& t) {
    return embplan::test::message_of([&] { e.search(t, model, rule, neg_max_cost_reward{}, 0); });
  };
  auto msg = run(exact_table_wise{.max_tables = 0}, small);
  CHECK(msg.find("exact_table_wise.max_tables") != std::string::npos);
  CHECK(msg.find("= 0") != std::string::npos);
  msg = run(exact_table_wise{.max_tables = 33}, small);
  CHECK(msg.find("exact_table_wise.max_tables") != std::string::npos);
  CHECK(msg.find("= 33") != std::string::npos);
  msg = run(exact_table_wise{.max_plans = 0}, small);
  CHECK(msg.find("exact_table_wise.max_plans") != std::string::npos);
  CHECK(msg.find("= 0") != std::string::npos);

  const auto big = embplan_test::search_task(2, 17, 3);
  msg = run(exact_table_wise{}, big);
  CHECK(msg.find("'tables'") != std::string::npos);
  CHECK(msg.find("= 17") != std::string::npos);
  CHECK(msg.find("max_tables = 16") != std::string::npos);

  // 6 tables on 3 devices have more than 10 complete plans.
  msg = run(exact_table_wise{.max_plans = 10}, small);
  CHECK(msg.find("exact_table_wise.max_plans") != std::string::npos);
  CHECK(msg.find("= 10") != std::string::npos);
}
