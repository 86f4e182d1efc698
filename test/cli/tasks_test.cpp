// End-to-end tests of `embplan tasks`: tasks drawn from one half of the pool
// (--half) or with a share of each task's tables from the test half
// (--unseen-share), and the same options of compare.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("tasks and compare --half: the tables come from that half only") {
  // The tables' names are the pool's ("t<index>"); every one must be in the half.
  const auto test_half = scratch() / "tasks-test-half.json";
  const auto train_half = scratch() / "tasks-train-half.json";
  REQUIRE(run("tasks --devices 4 --max-dim 16 --count 20 --half test --out " + test_half.string())
              .code == 0);
  REQUIRE(run("tasks --devices 4 --max-dim 16 --count 20 --half train --out " + train_half.string())
              .code == 0);
  const auto names = [](const fs::path& p) {
    std::set<std::string> out;
    const auto j = nlohmann::json::parse(slurp(p));
    for (const auto& t : j.at("tasks"))
      for (const auto& table : t.at("tables"))
        out.insert(table.at("name").get<std::string>());
    return out;
  };
  const auto a = names(test_half);
  const auto b = names(train_half);
  CHECK(a.size() > 100);
  CHECK(b.size() > 100);
  for (const auto& n : a)
    CHECK(b.count(n) == 0);  // disjoint halves

  const auto bad = run("compare --count 1 --half left");
  CHECK(bad.code == 2);
  CHECK(lines(bad.err) == 1);
  CHECK(bad.err.find("'--half' = \"left\"") != std::string::npos);
  const auto bad_tasks = run("tasks --count 1 --half left --out x.json");
  CHECK(bad_tasks.code == 2);
  CHECK(bad_tasks.err.find("'--half' = \"left\"") != std::string::npos);
}

TEST_CASE("tasks and compare --unseen-share: a share of each task from the test half") {
  const auto out = scratch() / "unseen-tasks.json";
  const auto r = run("tasks --protocol autoshard --devices 2 --count 2 --unseen-share 0.5 --out " +
                     out.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto tj = nlohmann::json::parse(slurp(out));
  REQUIRE(tj.at("tasks").size() == 2);
  CHECK(tj.at("tasks").at(1).at("name") == "autoshard-2dev-32dim-unseen0.5-001");
  const auto c =
      run("compare --protocol autoshard --devices 2 --max-dim 32 --count 2 --planners "
          "random,torchrec_like --unseen-share 0.25 --quiet");
  INFO(c.err);
  CHECK(c.code == 0);
  CHECK(c.out.find("tasks from: 0.25 of each task's tables from the test half") !=
        std::string::npos);
  CHECK(c.out.find("0.25 of each task's tables unseen") != std::string::npos);
  const auto unused = (scratch() / "unused.json").string();
  check_refused("tasks --unseen-share 1.5 --out " + unused, {"--unseen-share", "1.5"});
  check_refused("tasks --unseen-share 0.5 --half train --out " + unused,
                {"--unseen-share", "0.5", "--half train"});
  check_refused("compare --unseen-share 0.5 --half whole --count 1", {"--unseen-share", "0.5"});
}
