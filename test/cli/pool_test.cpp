// End-to-end tests of `embplan pool`: the table pool's statistics, next to the
// published ones, and its JSON file.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("pool prints statistics next to the published ones and writes JSON") {
  const auto path = scratch() / "pool.json";
  const auto r = run("pool --seed 3 --out " + path.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("856") != std::string::npos);
  CHECK(r.out.find("4107458") != std::string::npos);  // published mean hash size
  const auto j = nlohmann::json::parse(slurp(path));
  CHECK(j.at("tables").size() == 856);
}
