#include "embplan/rl/placement_mdp.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/max_device_dim.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/dreamshard_cost.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

using embplan::test::message_of;
namespace rl = embplan::rl;

namespace {

embplan::table_spec table(std::string name, std::int64_t rows, std::int32_t dim,
                          double pooling = 1.0) {
  embplan::table_spec s;
  s.name = std::move(name);
  s.rows = rows;
  s.dim = dim;
  s.pooling_factor = pooling;
  s.reuse_hist[0] = 1.0;
  return s;
}

// n tables of `bytes_each` bytes (fp32: rows x dim x 4) on `devices` devices of
// `per_device` tables' memory each.
embplan::task equal_tables(std::size_t n, std::size_t devices, std::size_t per_device) {
  embplan::task t;
  for (std::size_t i = 0; i < n; ++i)
    t.tables.push_back(table("t" + std::to_string(i), 1024, 16, 1.0 + static_cast<double>(i)));
  embplan::device_spec dev;
  dev.memory_bytes = per_device * 1024 * 16 * 4;
  t.cluster = embplan::uniform_topology(devices, dev);
  return t;
}

using size_cost = embplan::heuristic_cost<embplan::heuristic::size>;
using lookup_cost = embplan::heuristic_cost<embplan::heuristic::lookup>;

// Device 1 takes no table of odd index.
struct even_only_on_1 {
  bool admits(const embplan::task&, const embplan::placement_state&,
              const embplan::shard& s) const {
    return s.device != 1 || s.table % 2 == 0;
  }
  std::string describe() const { return "even tables only on device 1"; }
};

}  // namespace

TEST_CASE("descending_order: higher keys first, equal keys in index order (Python's stable sort)") {
  CHECK(rl::descending_order(std::vector<double>{1.0, 3.0, 2.0, 3.0, 1.0}) ==
        std::vector<std::uint32_t>{1, 3, 2, 0, 4});
  const auto msg = message_of([] { rl::descending_order(std::vector<double>{1.0, NAN}); });
  CHECK(msg.find("order_keys[1]") != std::string::npos);
  CHECK(msg.find("nan") != std::string::npos);
}

TEST_CASE("the order comes from the cost source, or from the caller") {
  const auto t = equal_tables(5, 2, 5);  // pooling 1..5: lookup cost grows with the index
  const lookup_cost model;
  rl::placement_mdp mdp(t, rl::model_cost_source<lookup_cost>{&model}, embplan::memory_capacity{});
  CHECK(std::vector<std::uint32_t>(mdp.order().begin(), mdp.order().end()) ==
        std::vector<std::uint32_t>{4, 3, 2, 1, 0});
  CHECK(mdp.table() == 4);
  rl::placement_mdp given(t, rl::no_cost_source{}, embplan::memory_capacity{},
                          std::vector<std::uint32_t>{2, 0, 1, 4, 3});
  CHECK(given.table() == 2);
  given.step(0);
  CHECK(given.table() == 0);

  const auto bad = message_of([&] {
    rl::placement_mdp m(t, rl::no_cost_source{}, embplan::memory_capacity{},
                        std::vector<std::uint32_t>{0, 1, 1, 3, 4});
  });
  CHECK(bad.find("placement_mdp.order[2]") != std::string::npos);
  CHECK(bad.find("= 1") != std::string::npos);
  const auto short_order = message_of([&] {
    rl::placement_mdp m(t, rl::no_cost_source{}, embplan::memory_capacity{},
                        std::vector<std::uint32_t>{0, 1});
  });
  CHECK(short_order.find("placement_mdp.order.size") != std::string::npos);
  CHECK(short_order.find("= 2") != std::string::npos);
}

TEST_CASE("transitions: the legal set shrinks as memory fills, and the state follows") {
  const auto t = equal_tables(4, 2, 2);  // each device holds two tables
  rl::placement_mdp mdp(t, rl::no_cost_source{}, embplan::memory_capacity{},
                        std::vector<std::uint32_t>{0, 1, 2, 3});
  CHECK(mdp.step_index() == 0);
  CHECK(std::vector<std::uint32_t>(mdp.legal().begin(), mdp.legal().end()) ==
        std::vector<std::uint32_t>{0, 1});
  CHECK(mdp.reward() == 0.0);
  mdp.step(0);
  CHECK(mdp.legal().size() == 2);
  mdp.step(0);  // device 0 is full
  CHECK(std::vector<std::uint32_t>(mdp.legal().begin(), mdp.legal().end()) ==
        std::vector<std::uint32_t>{1});
  CHECK(mdp.tables_on(0).size() == 2);
  CHECK(mdp.tables_on(0)[1] == 1);
  CHECK(mdp.state().memory_bytes[0] == 2u * 1024 * 16 * 4);
  CHECK(mdp.state().dim_sum[0] == 32);
  CHECK(mdp.device_of()[1] == 0);
  CHECK(mdp.device_of()[2] == rl::unplaced);
  CHECK(mdp.reward() == 0.0);

  const auto illegal = message_of([&] { mdp.step(0); });
  CHECK(illegal.find("placement_mdp.action") != std::string::npos);
  CHECK(illegal.find("= 0") != std::string::npos);
  CHECK(illegal.find("[1]") != std::string::npos);

  mdp.step(1);
  mdp.step(1);
  CHECK(mdp.done());
  CHECK(mdp.legal().empty());
  const auto finished = message_of([&] { mdp.step(0); });
  CHECK(finished.find("placement_mdp.step") != std::string::npos);
  CHECK(finished.find("= 4") != std::string::npos);
  const auto p = mdp.to_plan();
  embplan::validate(t, p);
  CHECK(p.shards[3].device == 1);

  // reset: back to step 0, nothing placed.
  mdp.reset();
  CHECK(mdp.step_index() == 0);
  CHECK(mdp.tables_on(0).empty());
  CHECK(mdp.state().memory_bytes[0] == 0);
  CHECK(mdp.legal().size() == 2);
}

TEST_CASE("legality is the planner's constraint: custom rules and all_of compose") {
  const auto t = equal_tables(4, 3, 4);
  rl::placement_mdp mdp(t, rl::no_cost_source{},
                        embplan::all_of{embplan::memory_capacity{}, even_only_on_1{},
                                        embplan::max_device_dim{.max_dim = 16}},
                        std::vector<std::uint32_t>{1, 0, 2, 3});
  // table 1 (odd) may not go to device 1
  CHECK(std::vector<std::uint32_t>(mdp.legal().begin(), mdp.legal().end()) ==
        std::vector<std::uint32_t>{0, 2});
  mdp.step(0);
  // table 0 (even): device 0 already holds dim 16 = the bound
  CHECK(std::vector<std::uint32_t>(mdp.legal().begin(), mdp.legal().end()) ==
        std::vector<std::uint32_t>{1, 2});
  mdp.step(2);
  // table 2 (even): only device 1 is left under the dim bound
  CHECK(std::vector<std::uint32_t>(mdp.legal().begin(), mdp.legal().end()) ==
        std::vector<std::uint32_t>{1});
  // table 3 (odd) after table 2 on device 1: nothing admits it
  CHECK_FALSE(mdp.try_step(1));
  CHECK(mdp.failure().find("table 't3' (index 3") != std::string::npos);
  CHECK(mdp.failure().find("free memory per device") != std::string::npos);
}

TEST_CASE(
    "a task no legal action can complete: the error names the table and each device's free "
    "memory") {
  auto t = equal_tables(3, 2, 1);  // two devices, one table each, three tables
  rl::placement_mdp mdp(t, rl::no_cost_source{}, embplan::memory_capacity{},
                        std::vector<std::uint32_t>{0, 1, 2});
  mdp.step(0);
  const auto msg = message_of([&] { mdp.step(1); });
  CHECK(msg.find("table 't2' (index 2, 65536 bytes)") != std::string::npos);
  CHECK(msg.find("memory capacity") != std::string::npos);
  CHECK(msg.find("0: 0 bytes, 1: 0 bytes") != std::string::npos);

  // The first table fits nowhere: reset() throws, try_reset() says false.
  t.tables[0].rows = 1 << 20;
  rl::placement_mdp first(t, rl::no_cost_source{}, embplan::memory_capacity{},
                          std::vector<std::uint32_t>{0, 1, 2});
  CHECK_FALSE(first.try_reset());
  const auto at_reset = message_of([&] { first.reset(); });
  CHECK(at_reset.find("table 't0' (index 0") != std::string::npos);
  CHECK(at_reset.find("0: 65536 bytes, 1: 65536 bytes") != std::string::npos);
}

TEST_CASE("reward: 0 until the last step, then minus the plan's cost under the source") {
  const auto t = embplan_test::search_task(3, 12, 4);
  const embplan::analytic_cost model;
  rl::placement_mdp mdp(t, rl::model_cost_source<embplan::analytic_cost>{&model},
                        embplan::memory_capacity{});
  std::size_t k = 0;
  while (!mdp.done()) {
    CHECK(mdp.reward() == 0.0);
    mdp.step(mdp.legal()[k++ % mdp.legal().size()]);
  }
  const double expected = embplan::evaluate(t, mdp.to_plan(), model).max_ms();
  CHECK(expected > 0.0);
  CHECK(mdp.final_cost() == expected);
  CHECK(mdp.reward() == -expected);
}

TEST_CASE("the estimated MDP: DreamShard's order and overall head") {
  const auto t = embplan_test::search_task(5, 10, 3);
  const embplan::dreamshard_cost cost(embplan::nn::make_dreamshard_model(21, 4, 11));
  const rl::dreamshard_estimate source{cost};
  rl::placement_mdp mdp(t, source, embplan::memory_capacity{});
  // Order: descending fwd + comm + bwd of each table alone (Env.reset).
  for (std::size_t k = 1; k < mdp.order().size(); ++k) {
    const auto a = mdp.order()[k - 1];
    const auto b = mdp.order()[k];
    const double ka = cost.shard_cost(t, embplan::whole_table(t, a, 0));
    const double kb = cost.shard_cost(t, embplan::whole_table(t, b, 0));
    CHECK(ka >= kb - 1e-5 * (1.0 + std::abs(kb)));
  }
  while (!mdp.done())
    mdp.step(mdp.legal()[mdp.step_index() % mdp.legal().size()]);
  CHECK(mdp.final_cost() == doctest::Approx(cost.overall_ms(t, mdp.to_plan())).epsilon(1e-6));
  CHECK(mdp.reward() == -mdp.final_cost());
}
