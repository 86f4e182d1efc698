// End-to-end tests of `embplan size`: the sizing questions of the chapter, and
// a cache sized from a reuse histogram with the storage of its tier.
#include <doctest/doctest.h>

#include <string>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("size answers the chapter's sizing questions") {
  auto r = run("size --rows 2000000000 --dim 128 --budget-gib 16 --optimizer adam");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("1024000000000") != std::string::npos);  // 2e9 x 128 x 4 bytes
  CHECK(r.out.find("shards") != std::string::npos);
  r = run("size --rows 1000000000 --dim 128");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("m = 31623") != std::string::npos);
  r = run("size --rows 1000 --dim 128 --budget-gib 0.0000001");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--budget-gib") != std::string::npos);
  CHECK(r.err.find("512 bytes") != std::string::npos);
}

TEST_CASE("size sizes a cache from the reuse histogram and itemises the storage of a tier") {
  // 10,000 rows x 32 fp32; 1,000 bags x 10 lookups; half the unique rows read
  // 2x (bin_1), half 24.5x (bin_5): 754.7 unique rows, floor 0.0755.
  const std::string table =
      "size --rows 10000 --dim 32 --pooling-factor 10 --batch-size 1000 --optimizer "
      "rowwise_adagrad --reuse-hist 0,0.5,0,0,0,0.5,0,0,0,0,0,0,0,0,0,0,0";
  // Target 0.2: 1 - c x 23.5 / 10,000 <= 0.2 from c = 340.4 hot rows on.
  // Budget 429,496 bytes: 384,008 at any cache size + 144 a slot, 315 slots.
  auto r = run(table + " --target-miss-ratio 0.2 --hbm-budget-gib 0.0004");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("755 unique rows") != std::string::npos);
  CHECK(r.out.find("341 rows cached, load factor 0.034100") != std::string::npos);
  CHECK(r.out.find("tier uvm_caching, load factor 0.031500 (315 rows)") != std::string::npos);
  CHECK(r.out.find("cache state") != std::string::npos);
  CHECK(r.out.find("output gradients") != std::string::npos);
  // The whole table fits 1 GiB: hbm.
  r = run(table + " --hbm-budget-gib 1");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("tier hbm") != std::string::npos);
  // Bad input, each named by its flag.
  r = run(table + " --target-miss-ratio 0.01");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("'--target-miss-ratio' = 0.01: expected at least 0.0755") != std::string::npos);
  CHECK(r.out.empty());
  r = run(table + " --hbm-budget-gib 0.000001");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--hbm-budget-gib' = ") != std::string::npos);
  CHECK(r.err.find("at least 344008 (0.000 GiB)") != std::string::npos);
  r = run("size --rows 10 --dim 4 --reuse-hist 0.5,0.5 --target-miss-ratio 0.5");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--reuse-hist' = 2") != std::string::npos);
  r =
      run("size --rows 10 --dim 4 --reuse-hist 0.5,0.6,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0 "
          "--target-miss-ratio 0.5");
  CHECK(r.code == 2);
  CHECK(r.err.find("--reuse-hist.reuse_hist") != std::string::npos);
}
