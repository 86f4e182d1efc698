#include "embplan/search/random_search.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/random_placement.hpp"

namespace {

embplan::task random_task(std::uint64_t seed, std::size_t tables = 30) {
  embplan::rng gen(seed);
  embplan::task t;
  t.cluster = embplan::uniform_topology(4);
  for (std::size_t i = 0; i < tables; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = gen.between(10'000, 1'000'000);
    s.dim = static_cast<std::int32_t>(4 << gen.between(0, 5));
    s.pooling_factor = gen.uniform(1.0, 30.0);
    s.reuse_hist[0] = 0.7;
    s.reuse_hist[3] = 0.3;
    t.tables.push_back(s);
  }
  return t;
}

template <class CostModel, class Reward>
embplan::search_result run(std::uint32_t budget, const embplan::task& t, const CostModel& m,
                           const Reward& r, std::uint64_t seed) {
  return embplan::random_search{.budget = budget}.search(t, m, embplan::default_constraint{}, r,
                                                         seed);
}

template <class CostModel, class Reward>
double score_of(const embplan::task& t, const embplan::plan& p, const CostModel& m,
                const Reward& r) {
  return r.score(t, embplan::evaluate(t, p, m));
}

}  // namespace

TEST_CASE("random search is never worse than its first sample, which is random placement") {
  const embplan::analytic_cost model;
  const embplan::neg_max_cost_reward reward;
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    const auto t = random_task(seed);
    const auto first =
        embplan::random_placement{}.search(t, model, embplan::default_constraint{}, reward, seed);
    REQUIRE(first.ok);
    CHECK(run(1, t, model, reward, seed).placement == first.placement);
    const auto best = run(40, t, model, reward, seed);
    REQUIRE(best.ok);
    CHECK(score_of(t, best.placement, model, reward) >=
          score_of(t, first.placement, model, reward));
    // Samples are shared prefixes: a larger budget never scores lower.
    const auto more = run(80, t, model, reward, seed);
    CHECK(score_of(t, more.placement, model, reward) >= score_of(t, best.placement, model, reward));
  }
}

TEST_CASE("random search improves on random placement and is deterministic") {
  const auto t = random_task(11, 40);
  const embplan::lookup_cost model;
  const embplan::balance_reward reward;
  const auto a = run(60, t, model, reward, 5);
  const auto b = run(60, t, model, reward, 5);
  REQUIRE(a.ok);
  CHECK(a.placement == b.placement);
  CHECK(a.evaluations == 60 * (4 + 2));  // compute per device + two all-to-alls per sample
  CHECK(run(60, t, model, reward, 6).placement != a.placement);
  const auto first = run(1, t, model, reward, 5);
  CHECK(score_of(t, a.placement, model, reward) > score_of(t, first.placement, model, reward));
  CHECK(embplan::random_search{}.budget == 100);
  CHECK(embplan::random_search{}.name() == "random_search");
}

TEST_CASE("random search reports the first failure when no sample is legal") {
  auto t = random_task(3, 5);
  t.tables[2].dim = 6;  // never a multiple of 4
  t.tables[2].name = "odd";
  const auto r = run(10, t, embplan::dim_cost{}, embplan::balance_reward{}, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find("table 'odd' (index 2") != std::string::npos);
  CHECK(r.evaluations == 0);
}

TEST_CASE("a zero budget is refused by name and value") {
  const auto t = random_task(1, 3);
  CHECK_THROWS_WITH_AS((void)run(0, t, embplan::dim_cost{}, embplan::balance_reward{}, 0),
                       doctest::Contains("field 'random_search.budget' = 0: expected at least 1"),
                       embplan::error);
}
