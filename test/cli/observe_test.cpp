// End-to-end tests of `embplan observe`: the four observations on small shards
// and the repeatability of the measurements.
#include <doctest/doctest.h>

#include <string>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("observe: the four observations on small shards; --separate splits (1) by part") {
  const std::string small =
      "observe --flush-mib 8 --sets 2 --tables-per-set 2 --halves 1 --repeats 2 --batch-size 16 "
      "--warmup 0 "
      "--runs 3 --drop 1 --max-weight-mib 4";
  const auto plain = run(small);
  INFO(plain.err);
  REQUIRE(plain.code == 0);
  for (const char* part : {"(0) repeatability", "(1) multi-table cost", "fused < sum in",
                           "(2) column halves", "(3) growth", "occurrences per unique index"})
    CHECK(plain.out.find(part) != std::string::npos);
  CHECK(plain.out.find("forward only:") == std::string::npos);
  const auto split = run(small + " --separate");
  INFO(split.err);
  REQUIRE(split.code == 0);
  CHECK(split.out.find("    forward only: mean ") != std::string::npos);
  CHECK(split.out.find("    backward only: mean ") != std::string::npos);
}

TEST_CASE("observe --repeatability: the CV of repeated measurements under six configurations") {
  const auto r =
      run("observe --repeatability --flush-mib 8 --repeats 2 --batch-size 32 --warmup 0 --runs 3 "
          "--drop 1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("2 measurements per configuration") != std::string::npos);
  for (const char* row :
       {"wall clock, protocol", "thread CPU, protocol", "wall clock, median of 3",
        "thread CPU, median of 3", "wall clock, drift reference", "thread CPU, drift reference"})
    CHECK(r.out.find(row) != std::string::npos);
  CHECK(r.out.find("CV between %") != std::string::npos);
  CHECK(r.out.find("(measured by the meter at its start)") != std::string::npos);
  CHECK(r.out.find("(1)") == std::string::npos);  // only the repeatability, not the observations
  const auto given =
      run("observe --repeatability --flush-mib 8 --repeats 2 --batch-size 32 --warmup 0 --runs 3 "
          "--drop 1 "
          "--reference-ms 4.25");
  INFO(given.err);
  REQUIRE(given.code == 0);
  CHECK(given.out.find("wall clock, drift reference: scaled to a reference time of 4.250 ms "
                       "(given)") != std::string::npos);
  const auto bad = run("observe --repeatability --reference-ms -1");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("'--reference-ms'") != std::string::npos);
  CHECK(bad.err.find("-1") != std::string::npos);
}
