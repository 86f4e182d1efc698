// End-to-end tests of `embplan skew`: the chapter's demo of balanced storage,
// skewed load and an exact gather; bad input named.
#include <doctest/doctest.h>

#include <string>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("skew reproduces the chapter's demo: balanced storage, skewed load, exact gather") {
  auto r =
      run("skew --rows 20000 --dim 16 --shards 4 --requests 50000 --zipf 1.3 --seed 7 "
          "--replicate 100 --target-skew 1.1");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("rows per shard (store) : [5000, 5000, 5000, 5000]") != std::string::npos);
  CHECK(r.out.find("gathered == reference  : true") != std::string::npos);
  CHECK(r.out.find("max abs difference     : 0.00e+00") != std::string::npos);
  CHECK(r.out.find("false") == std::string::npos);  // gathered == reference at every k
  CHECK(r.out.find("pre-aggregated") != std::string::npos);
  // Balanced routing (the default): the hottest ID alone brings the load to
  // T / S = 12,500 per shard, and it stays there.
  CHECK(r.out.find("routing balanced") != std::string::npos);
  CHECK(r.out.find("target skew 1.10x (routing balanced): smallest k = 1 (skew 1.00x)") !=
        std::string::npos);
  CHECK(r.out.find("[12500, 12500, 12500, 12500]") != std::string::npos);
  // The chapter's exercise: random routing, still available.
  r =
      run("skew --rows 20000 --dim 16 --shards 4 --requests 50000 --zipf 1.3 --seed 7 "
          "--replicate 10 --target-skew 1.1 --routing random");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("routing random, seed 7") != std::string::npos);
  CHECK(r.out.find("target skew 1.10x (routing random): smallest k = 3") != std::string::npos);
  CHECK(r.out.find("false") == std::string::npos);

  r = run("skew --rows 100 --shards 0");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("'--shards' = 0") != std::string::npos);
  r = run("skew --rows 100 --shards 101");
  CHECK(r.code == 2);
  CHECK(r.err.find("101") != std::string::npos);
  r = run("skew --rows 100 --replicate 101");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--replicate' = 101") != std::string::npos);
  r = run("skew --rows 100 --zipf -1");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--zipf' = -1") != std::string::npos);
  r = run("skew --rows 100 --target-skew 0.5");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--target-skew' = 0.5") != std::string::npos);
  r = run("skew --rows 100 --routing fastest");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("'--routing' = \"fastest\"") != std::string::npos);
}
