#include "embplan/search/torchrec_like.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/reward/neg_max_cost.hpp"

#include "support/random_task.hpp"

TEST_CASE("TorchRec's block rule: smallest multiple of 4 dividing dim, at least the bound") {
  using embplan::search::detail::find_base_dim;
  CHECK(find_base_dim(32, 128) == 32);
  CHECK(find_base_dim(32, 64) == 32);
  CHECK(find_base_dim(32, 32) == 32);  // the whole dim: no column-wise option
  CHECK(find_base_dim(32, 16) == 16);
  CHECK(find_base_dim(128, 128) == 128);
  CHECK(find_base_dim(32, 96) == 32);
  CHECK(find_base_dim(40, 96) == 48);
}

TEST_CASE("torchrec_like: valid plans, column blocks of the rule, memory respected") {
  const embplan::analytic_cost model;
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    const auto t = embplan_test::random_task(
        seed, {.tables = 30, .device_memory_bytes = 512u << 20, .max_rows = 400'000});
    const auto r = embplan::torchrec_like{}.search(t, model, embplan::default_constraint{},
                                                   embplan::neg_max_cost_reward{}, 0);
    REQUIRE(r.ok);
    CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
    for (const auto& s : r.placement.shards) {
      const auto dim = t.tables[s.table].dim;
      CHECK((s.cols() == dim || s.cols() == embplan::search::detail::find_base_dim(32, dim)));
    }
  }
}

TEST_CASE("torchrec_like: bad block bound, infeasible task named") {
  const auto t = embplan_test::random_task(1, {.tables = 5, .devices = 2});
  const embplan::analytic_cost model;
  CHECK_THROWS_WITH_AS(
      embplan::torchrec_like{.min_block_dim = 6}.search(t, model, embplan::default_constraint{},
                                                        embplan::neg_max_cost_reward{}, 0),
      doctest::Contains("torchrec_like.min_block_dim' = 6"), embplan::error);
  auto huge = t;
  huge.tables[2].name = "enormous";
  huge.tables[2].rows = 2'000'000'000;
  huge.tables[2].dim = 16;
  const auto r = embplan::torchrec_like{}.search(huge, model, embplan::default_constraint{},
                                                 embplan::neg_max_cost_reward{}, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find("enormous") != std::string::npos);
}
