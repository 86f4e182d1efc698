// The Reward contract of the searchers (concepts/searcher.hpp,
// searcher_uses_reward; concepts/reward.hpp, reward_decreasing_in_max_cost):
// a searcher that declares uses_reward optimises the reward it is given, one
// that declares it does not ignores it, and a reward's promise to decrease in
// the max cost only lets a searcher skip work.

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "embplan/concepts/reward.hpp"
#include "embplan/concepts/searcher.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/memory_penalty.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/grid_greedy.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/random_placement.hpp"
#include "embplan/search/random_search.hpp"
#include "embplan/search/sorted_greedy.hpp"
#include "embplan/search/torchrec_like.hpp"
#include "embplan/stage/staged.hpp"

#include "support/random_task.hpp"

namespace {

using embplan_test::search_task;

// Adversarial: the plan cost itself, so the slowest plan wins.
struct slowest_plan_reward {
  std::string_view name() const noexcept { return "slowest_plan"; }
  double score(const embplan::task&, const embplan::plan_cost& c) const noexcept {
    return c.max_ms();
  }
};
static_assert(embplan::reward<slowest_plan_reward>);

// As little memory on device 0 as possible.
struct light_device_zero_reward {
  std::string_view name() const noexcept { return "light_device_zero"; }
  double score(const embplan::task&, const embplan::plan_cost& c) const {
    return -static_cast<double>(c.memory_bytes.at(0));
  }
};
static_assert(embplan::reward<light_device_zero_reward>);

// neg_max_cost_reward's score without its promise: searchers must price every
// plan and compare scores, and find the same plans.
struct unpromised_neg_max_cost_reward {
  std::string_view name() const noexcept { return "unpromised_neg_max_cost"; }
  double score(const embplan::task&, const embplan::plan_cost& c) const noexcept {
    return -c.max_ms();
  }
};

static_assert(embplan::reward_decreasing_in_max_cost<embplan::neg_max_cost_reward>);
static_assert(!embplan::reward_decreasing_in_max_cost<embplan::balance_reward>);
static_assert(!embplan::reward_decreasing_in_max_cost<embplan::memory_penalty_reward>);
static_assert(!embplan::reward_decreasing_in_max_cost<unpromised_neg_max_cost_reward>);

// A searcher of the library says whether it uses the reward.
template <class S>
concept declares_uses_reward = requires {
  S::uses_reward;
};

static_assert(embplan::searcher_uses_reward<embplan::grid_greedy>);
static_assert(embplan::searcher_uses_reward<embplan::column_beam>);
static_assert(embplan::searcher_uses_reward<embplan::local_search<>>);
static_assert(embplan::searcher_uses_reward<embplan::local_search<embplan::sorted_greedy>>);
static_assert(embplan::searcher_uses_reward<embplan::torchrec_like>);
static_assert(embplan::searcher_uses_reward<embplan::random_search>);
static_assert(embplan::searcher_uses_reward<embplan::stage::staged<embplan::grid_greedy>>);
static_assert(!embplan::searcher_uses_reward<embplan::sorted_greedy>);
static_assert(!embplan::searcher_uses_reward<embplan::random_placement>);
static_assert(!embplan::searcher_uses_reward<embplan::stage::staged<embplan::sorted_greedy>>);
static_assert(declares_uses_reward<embplan::sorted_greedy>);
static_assert(declares_uses_reward<embplan::random_placement>);
static_assert(declares_uses_reward<embplan::stage::staged<embplan::sorted_greedy>>);

// A user searcher that omits the member counts as not using the reward.
struct silent_searcher {
  std::string_view name() const noexcept { return "silent"; }
  template <class M, class C, class R>
  embplan::search_result search(const embplan::task&, const M&, const C&, const R&,
                                std::uint64_t) const {
    return {};
  }
};
struct claiming_searcher : silent_searcher {
  static constexpr bool uses_reward = true;
};
static_assert(embplan::searcher<silent_searcher>);
static_assert(!embplan::searcher_uses_reward<silent_searcher>);
static_assert(embplan::searcher_uses_reward<claiming_searcher>);

// Small beam: the tests run under ASan at -O1.
constexpr embplan::column_beam small_reward_beam{
    .candidates = 4, .width = 2, .steps = 4, .grid = 5};

embplan::task task_of(std::uint64_t seed) {
  return search_task(seed, 10 + 2 * seed, seed % 2 ? 8 : 4);
}

// How `reward` scores `p`, on the figures the searcher gives it: evaluate()'s.
template <class Reward>
double reward_score_of(const embplan::task& t, const embplan::plan& p, const Reward& reward) {
  return reward.score(t, embplan::evaluate(t, p, embplan::analytic_cost{}));
}

// torchrec_like's figures (torchrec_like.hpp, "Rating"): per device, the sum
// of its shards' shard_cost as compute, no communication.
template <class Reward>
double perf_score_of(const embplan::task& t, const embplan::plan& p, const Reward& reward) {
  const embplan::analytic_cost model;
  embplan::plan_cost c;
  c.devices.resize(t.cluster.size());
  for (const auto& s : p.shards)
    c.devices[s.device].fwd_compute_ms += static_cast<double>(model.shard_cost(t, s));
  const auto st = embplan::state_of(t, p);
  c.memory_bytes = st.memory_bytes;
  c.dim_sum = st.dim_sum;
  return reward.score(t, c);
}

// On task `t`, `s` under `reward` returns another plan than under
// neg_max_cost, and one that `reward` scores higher (`score` gives the figure
// the searcher optimises).
template <class Searcher, class Reward, class Score>
void check_steered(const Searcher& s, const embplan::task& t, const Reward& reward, Score score) {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const auto mine = s.search(t, model, rule, reward, 0);
  const auto cheapest = s.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
  REQUIRE(mine.ok);
  REQUIRE(cheapest.ok);
  CHECK_NOTHROW(embplan::validate(t, mine.placement, {.dim_multiple = 4, .memory = true}));
  CHECK(mine.placement != cheapest.placement);
  CHECK(score(t, mine.placement, reward) > score(t, cheapest.placement, reward));
}

// Where the candidates do not depend on the reward (the grid's plans, the
// random samples, torchrec_like's proposals), the plan under `reward` never scores
// below the one under neg_max_cost; `changed` counts the tasks where it
// scores higher.
template <class Searcher, class Reward, class Score>
int check_never_below(const Searcher& s, const Reward& reward, Score score) {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  int changed = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    CAPTURE(seed);
    const auto t = task_of(seed);
    const auto mine = s.search(t, model, rule, reward, 0);
    const auto cheapest = s.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
    REQUIRE(mine.ok);
    REQUIRE(cheapest.ok);
    const double a = score(t, mine.placement, reward);
    const double b = score(t, cheapest.placement, reward);
    CHECK(a >= b);
    changed += a > b ? 1 : 0;
  }
  return changed;
}

constexpr auto by_evaluate = [](const auto& t, const auto& p, const auto& r) {
  return reward_score_of(t, p, r);
};
constexpr auto by_perf = [](const auto& t, const auto& p, const auto& r) {
  return perf_score_of(t, p, r);
};

}  // namespace

TEST_CASE("grid_greedy optimises the reward among the grid's plans") {
  CHECK(check_never_below(embplan::grid_greedy{.grid = 5}, embplan::balance_reward{},
                          by_evaluate) >= 2);
  CHECK(check_never_below(embplan::grid_greedy{.grid = 5}, slowest_plan_reward{}, by_evaluate) >=
        2);
  check_steered(embplan::grid_greedy{.grid = 5}, task_of(2), light_device_zero_reward{},
                by_evaluate);
}

TEST_CASE("column_beam ranks its states and plans by the reward") {
  for (const std::uint64_t seed : {2u, 4u}) {
    CAPTURE(seed);
    check_steered(small_reward_beam, task_of(seed), embplan::balance_reward{}, by_evaluate);
    check_steered(small_reward_beam, task_of(seed), slowest_plan_reward{}, by_evaluate);
    check_steered(small_reward_beam, task_of(seed), light_device_zero_reward{}, by_evaluate);
  }
}

TEST_CASE("local_search climbs the reward, from any start") {
  const embplan::local_search<embplan::column_beam> from_beam{.start = small_reward_beam};
  const embplan::local_search<embplan::sorted_greedy> from_greedy{};
  for (const std::uint64_t seed : {2u, 4u}) {
    CAPTURE(seed);
    check_steered(from_beam, task_of(seed), embplan::balance_reward{}, by_evaluate);
    check_steered(from_beam, task_of(seed), slowest_plan_reward{}, by_evaluate);
    // From sorted_greedy's plan, which no reward changes, only the moves do.
    check_steered(from_greedy, task_of(seed), embplan::balance_reward{}, by_evaluate);
    check_steered(from_greedy, task_of(seed), light_device_zero_reward{}, by_evaluate);
  }
}

TEST_CASE("torchrec_like rates its proposals by the reward, on its perf figures") {
  CHECK(check_never_below(embplan::torchrec_like{}, embplan::balance_reward{}, by_perf) >= 2);
  CHECK(check_never_below(embplan::torchrec_like{}, light_device_zero_reward{}, by_perf) >= 2);
  check_steered(embplan::torchrec_like{}, task_of(3), embplan::balance_reward{}, by_perf);
}

TEST_CASE("random_search keeps the sample the reward scores highest") {
  const embplan::random_search s{.budget = 20};
  CHECK(check_never_below(s, embplan::balance_reward{}, by_evaluate) >= 2);
  CHECK(check_never_below(s, slowest_plan_reward{}, by_evaluate) >= 2);
}

TEST_CASE("stage::staged hands the reward to its inner searcher") {
  // Table 3 fits on no device whole: its rows are split, then grid_greedy
  // places the rest under the reward (scored on the whole task: the row
  // shards are the same under both rewards).
  auto t = search_task(1, 16, 4, 512u << 20);
  t.tables[3].name = "huge";
  t.tables[3].dim = 128;
  t.tables[3].rows = 1'100'000;  // 128 x 4 B x 1.1e6 = 537 MiB > 512 MiB per device
  const embplan::stage::staged<embplan::grid_greedy> s{.inner = {.grid = 5},
                                                       .settings = {.split_rows = true}};
  check_steered(s, t, light_device_zero_reward{}, by_evaluate);
  const auto r = s.search(t, embplan::analytic_cost{}, embplan::default_constraint{},
                          light_device_zero_reward{}, 0);
  int row_shards = 0;
  for (const auto& p : r.placement.shards)
    row_shards += p.table == 3 ? 1 : 0;
  CHECK(row_shards >= 2);
}

TEST_CASE("searchers that do not use the reward return the same plan under any reward") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward cheapest;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    const auto t = task_of(seed);
    for (const std::uint64_t draw : {0u, 7u}) {
      const auto g = embplan::sorted_greedy{}.search(t, model, rule, cheapest, draw);
      const auto r = embplan::random_placement{}.search(t, model, rule, cheapest, draw);
      REQUIRE(g.ok);
      REQUIRE(r.ok);
      const auto same = [&](const auto& reward) {
        CHECK(embplan::sorted_greedy{}.search(t, model, rule, reward, draw).placement ==
              g.placement);
        CHECK(embplan::random_placement{}.search(t, model, rule, reward, draw).placement ==
              r.placement);
      };
      same(embplan::balance_reward{});
      same(slowest_plan_reward{});
      same(light_device_zero_reward{});
    }
  }
}

TEST_CASE("a reward's promise to decrease in max cost only saves work: same plans without it") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const auto same = [&](const auto& s, const embplan::task& t) {
    const auto fast = s.search(t, model, rule, embplan::neg_max_cost_reward{}, 3);
    const auto full = s.search(t, model, rule, unpromised_neg_max_cost_reward{}, 3);
    REQUIRE(fast.ok);
    REQUIRE(full.ok);
    CHECK(fast.placement == full.placement);
  };
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    const auto t = task_of(seed);
    same(embplan::grid_greedy{}, t);
    same(small_reward_beam, t);
    same(embplan::local_search<embplan::column_beam>{.start = small_reward_beam}, t);
    same(embplan::local_search<embplan::sorted_greedy>{}, t);
    same(embplan::torchrec_like{}, t);
    same(embplan::random_search{.budget = 10}, t);
  }
}
