#include "embplan/core/memory_tier.hpp"

#include <doctest/doctest.h>

#include "embplan/core/error.hpp"

TEST_CASE("memory tiers by name, and a placement's checks") {
  using embplan::memory_tier;
  for (const auto t : {memory_tier::hbm, memory_tier::uvm_caching, memory_tier::host})
    CHECK(embplan::parse_memory_tier(embplan::to_string(t), "tier") == t);
  CHECK_THROWS_WITH_AS((void)embplan::parse_memory_tier("ssd", "tables[2].tier"),
                       doctest::Contains("field 'tables[2].tier' = \"ssd\""), embplan::error);
  CHECK_NOTHROW(embplan::validate(embplan::tier_placement{}));
  CHECK_NOTHROW(embplan::validate({.tier = memory_tier::host}));
  CHECK_THROWS_WITH_AS(
      embplan::validate({.tier = memory_tier::uvm_caching, .load_factor = -0.5}, "t7"),
      doctest::Contains("field 't7.load_factor' = -0.5"), embplan::error);
  CHECK_THROWS_WITH_AS((void)embplan::device_rows({}, 0), doctest::Contains("field 'rows' = 0"),
                       embplan::error);
}
