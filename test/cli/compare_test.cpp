// End-to-end tests of `embplan compare`: one row per planner, the meters and
// the learned model it plans and judges by, the table counts, the gap to the
// exact optimum, cost ratios to a baseline, and every option checked before
// anything is printed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "embplan/io/json_task.hpp"
#include "embplan/presets.hpp"
#include "embplan/rl/dreamshard.hpp"

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("compare prints one row per planner, and '-' is used only for failures") {
  const auto json = scratch() / "compare.json";
  const auto r = run("compare --devices 4 --max-dim 16 --count 4 --json " + json.string());
  REQUIRE(r.code == 0);
  for (const char* name :
       {"random", "size_greedy", "dim_greedy", "lookup_greedy", "size_lookup_greedy"}) {
    CHECK(r.out.find(name) != std::string::npos);
  }
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& rows = j.at("settings").at(0).at("planners");
  CHECK(rows.size() >= 5);
  for (const auto& row : rows) {
    CHECK(row.at("tasks") == 4);
    if (row.at("succeeded") == 4) CHECK(row.at("mean_cost_ms").is_number());
  }
}

TEST_CASE("compare: NeuroShard, local search and TorchRec-like rows; cache and gap columns") {
  const auto json = scratch() / "compare-search.json";
  const auto r =
      run("compare --devices 4 --max-dim 16 --count 2 --planners random,torchrec_like,neuroshard,"
          "neuroshard_ls --json " +
          json.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("meter: simulated") != std::string::npos);
  CHECK(r.out.find("cache hit") != std::string::npos);
  CHECK(r.out.find("gap to LB") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& rows = j.at("settings").at(0).at("planners");
  REQUIRE(rows.size() == 4);
  CHECK(rows.at(0).at("cache_hit_rate").is_null());  // random has no cache
  CHECK(rows.at(2).at("planner") == "neuroshard");
  CHECK(rows.at(2).at("cache_hit_rate").get<double>() > 0.0);
  CHECK(rows.at(2).at("success_rate") == 1.0);
  CHECK(rows.at(2).at("mean_speedup_over_random").get<double>() > 1.0);
  CHECK(rows.at(3).at("mean_cost_ms").get<double>() <=
        rows.at(2).at("mean_cost_ms").get<double>() + 1e-9);
}

TEST_CASE("compare: a bad meter names the flag and the value") {
  const auto r = run("compare --count 1 --meter bogus");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--meter") != std::string::npos);
  CHECK(r.err.find("bogus") != std::string::npos);
}

TEST_CASE("compare plans NeuroShard on the bundled learned model and judges by it by default") {
  const auto json = scratch() / "compare-learned.json";
  const auto r =
      run("compare --devices 4 --max-dim 32 --count 3 --planners "
          "random,lookup_greedy,neuroshard --json " +
          json.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("planning model: bundled cpu_compute_model.safetensors") != std::string::npos);
  CHECK(r.out.find("meter: simulated, the learned compute model") != std::string::npos);
  // The bundled model trained on the pool's train half: it is judged on the other.
  CHECK(r.out.find("tasks from: the test half of the pool (split seed 0): tables the learned "
                   "model, trained on the train half, never saw") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json));
  CHECK(j.at("planning_model").get<std::string>().find("cpu meter") != std::string::npos);
  CHECK(j.at("tasks_from").at("half") == "test");
  CHECK(j.at("tasks_from").at("split_seed") == 0);
  const auto& rows = j.at("settings").at(0).at("planners");
  REQUIRE(rows.size() == 3);
  // NeuroShard searches the meter's own model: it beats a random placement.
  CHECK(rows.at(2).at("mean_speedup_over_random").get<double>() > 1.0);

  // --model none --meter analytic: the old, analytic-only comparison; the
  // numbers differ from the learned meter's.
  const auto json2 = scratch() / "compare-analytic.json";
  const auto a =
      run("compare --devices 4 --max-dim 32 --count 3 --planners "
          "random,lookup_greedy,neuroshard --model none --meter analytic --json " +
          json2.string());
  REQUIRE(a.code == 0);
  CHECK(a.out.find("planning model: none") != std::string::npos);
  CHECK(a.out.find("meter: analytic, analytic cost model") != std::string::npos);
  CHECK(a.out.find("tasks from: the whole pool (no learned model plans)") != std::string::npos);
  const auto j2 = nlohmann::json::parse(slurp(json2));
  CHECK(j2.at("settings").at(0).at("planners").at(1).at("mean_cost_ms").get<double>() !=
        rows.at(1).at("mean_cost_ms").get<double>());
}

TEST_CASE("compare and plan: a model file that is missing or not a cost model is named") {
  const auto missing = run("compare --count 1 --model /nonexistent/model.safetensors");
  CHECK(missing.code == 2);
  CHECK(lines(missing.err) == 1);
  CHECK(missing.err.find("--model") != std::string::npos);
  CHECK(missing.err.find("/nonexistent/model.safetensors") != std::string::npos);

  // A safetensors file without neural_cost metadata (an nn golden file).
  const std::string golden =
      std::string(EMBPLAN_SOURCE_DIR) + "/test/nn/golden/mlp_golden.safetensors";
  const auto wrong = run("compare --count 1 --model " + golden);
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("mlp_golden.safetensors") != std::string::npos);
  CHECK(wrong.err.find("embplan.kind") != std::string::npos);

  const auto bad = run("plan --task x.json --meter bogus");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--meter") != std::string::npos);
  CHECK(bad.err.find("bogus") != std::string::npos);
}

TEST_CASE("compare checks every option before it prints anything") {
  struct bad {
    const char* args;
    const char* flag;
    const char* value;
  };
  for (const auto& b : {
           bad{"--count 1 --max-dim 999", "'--max-dim'", "999"},
           bad{"--count 1 --max-dim 16 --devices 4 0", "'--devices'", "0"},
           bad{"--count 0 --max-dim 16", "'--count'", "0"},
           bad{"--count 1 --max-dim 16 --memory-gib 0", "'--memory-gib'", "0"},
           bad{"--count 1 --max-dim 16 --protocol tiny", "'--protocol'", "\"tiny\""},
           bad{"--count 1 --max-dim 16 --half left", "'--half'", "\"left\""},
           bad{"--count 1 --max-dim 16 --meter fast", "'--meter'", "\"fast\""},
           bad{"--count 1 --max-dim 16 --json /nonexistent-dir/c.json", "'--json'",
               "/nonexistent-dir"},
       }) {
    const auto r = run(std::string("compare ") + b.args);
    INFO(std::string(b.args));
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(b.flag) != std::string::npos);
    CHECK(r.err.find(b.value) != std::string::npos);
  }
  // tasks and plan too.
  auto r = run("tasks --max-dim 999 --out " + (scratch() / "t999.json").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("'--max-dim' = 999") != std::string::npos);
  r = run("plan --task " + small_tasks().string() + " --out /nonexistent-dir/p.json");
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("'--out'") != std::string::npos);
  r = run("size --rows 1000 --dim 128 --budget-gib -1");
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("'--budget-gib' = -1") != std::string::npos);
}

TEST_CASE("compare: a setting where some tasks fail shows the mean of the solved ones, (n/N)") {
  // 4 GiB devices, 64-dim tables: random placement runs out of memory on some.
  const auto json = scratch() / "compare-partial.json";
  const auto r =
      run("compare --devices 4 --max-dim 128 --count 6 --memory-gib 1.2 "
          "--planners random,lookup_greedy --model none --meter analytic --json " +
          json.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(slurp(json));
  for (const auto& row : j.at("settings").at(0).at("planners")) {
    const auto solved = row.at("succeeded").get<std::size_t>();
    const std::string suffix = "(" + std::to_string(solved) + "/6)";
    if (solved == 6) {
      CHECK(r.out.find(row.at("planner").get<std::string>()) != std::string::npos);
    } else if (solved > 0) {
      char mean[32];
      std::snprintf(mean, sizeof mean, "%.2f", row.at("mean_cost_ms_of_succeeded").get<double>());
      CHECK(r.out.find(std::string(mean) + " " + suffix) != std::string::npos);
    } else {
      CHECK(r.out.find("- " + suffix) != std::string::npos);
    }
  }
  // Every line of the legend fits 80 columns (the tables may be wider).
  std::istringstream lines_of(r.out);
  for (std::string line; std::getline(lines_of, line);) {
    if (line.rfind("speedup/random", 0) == 0 || line.rfind("cost = ", 0) == 0) {
      CHECK(line.size() <= 80);
    }
  }
}

TEST_CASE(
    "compare --tables: one setting per table count; --meter dreamshard prices by the "
    "policy's overall head") {
  const auto json = scratch() / "compare-tables.json";
  const auto r = run(
      "compare --protocol dreamshard --devices 4 --max-dim 16 --tables 8 12 --count 2 --planners "
      "random,lookup_greedy,dreamshard --meter dreamshard --quiet --json " +
      json.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("8 tables per task") != std::string::npos);
  CHECK(r.out.find("12 tables per task") != std::string::npos);
  CHECK(r.out.find("4dev/16/T8") != std::string::npos);
  CHECK(r.out.find("4dev/16/T12") != std::string::npos);
  CHECK(r.out.find("meter: dreamshard, DreamShard's cost network") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json));
  REQUIRE(j.at("settings").size() == 2);
  CHECK(j.at("settings").at(0).at("tables") == 8);
  CHECK(j.at("settings").at(1).at("tables") == 12);
  // The overall head, not a sum over devices: no lower bound to compare with.
  for (const auto& p : j.at("settings").at(0).at("planners")) {
    CHECK(p.at("mean_gap_to_lower_bound").is_null());
    CHECK(std::isfinite(p.at("mean_cost_ms").get<double>()));
  }

  // The cost is the bundled policy's overall head on each plan: one task by hand.
  const auto tasks = scratch() / "compare-tables-tasks.json";
  REQUIRE(run("tasks --protocol dreamshard --devices 4 --tables 8 --count 1 --half test --out " +
              tasks.string())
              .code == 0);
  const auto one =
      run("compare --protocol dreamshard --devices 4 --max-dim 16 --tables 8 --count 1 --half test "
          "--planners lookup_greedy --meter dreamshard --quiet --json " +
          json.string());
  REQUIRE(one.code == 0);
  const auto task = embplan::io::tasks_from_json(nlohmann::json::parse(slurp(tasks))).at(0);
  const auto policy = embplan::rl::dreamshard_policy::load(
      fs::path(EMBPLAN_SOURCE_DIR) / "data" / "rl" / "dreamshard_cpu_4dev.safetensors");
  const auto plan = embplan::lookup_greedy_planner{}(task, 0);
  REQUIRE(plan.ok);
  const double expected = policy.cost_model().overall_ms(task, plan.placement);
  const auto got = nlohmann::json::parse(slurp(json))
                       .at("settings")
                       .at(0)
                       .at("planners")
                       .at(0)
                       .at("mean_cost_ms")
                       .get<double>();
  CHECK(got == doctest::Approx(expected).epsilon(1e-9));

  // Bad input: a table count of 0, and the dreamshard meter where it is not taken.
  check_refused("compare --protocol dreamshard --tables 0", {"--tables", "0"});
  check_refused("plan --task " + tasks.string() + " --planner random --meter dreamshard",
                {"--meter", "dreamshard"});
  check_refused("compare --meter dreamshard --policy /nonexistent/p.safetensors --count 1",
                {"--policy", "/nonexistent/p.safetensors"});
}

TEST_CASE("compare --optimum: each planner's gap to the exact table-wise optimum") {
  const auto json = scratch() / "compare-optimum.json";
  const auto r = run(
      "compare --devices 4 --max-dim 16 --tables 8 --count 3 --meter analytic --optimum --quiet "
      "--planners random,lookup_greedy,neuroshard --json " +
      json.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("gap to opt") != std::string::npos);
  const auto rows = nlohmann::json::parse(slurp(json)).at("settings").at(0).at("planners");
  REQUIRE(rows.size() == 3);
  for (const auto& row : rows) {
    CAPTURE(row.dump());
    CHECK(row.at("optimum_tasks") == 3);
    CHECK(row.at("optimum_found").get<int>() <= 3);
    // Table-wise planners cannot beat the table-wise optimum; NeuroShard's
    // column splits can.
    if (row.at("planner") != "neuroshard")
      CHECK(row.at("mean_gap_to_optimum").get<double>() >= 0.0);
  }
  // Random placement finds the optimum by chance only: not on all three.
  CHECK(rows.at(0).at("optimum_found").get<int>() < 3);

  // Without --optimum, no such fields.
  REQUIRE(run("compare --devices 4 --max-dim 16 --tables 8 --count 1 --meter analytic --quiet "
              "--planners random --json " +
              json.string())
              .code == 0);
  CHECK_FALSE(nlohmann::json::parse(slurp(json))
                  .at("settings")
                  .at(0)
                  .at("planners")
                  .at(0)
                  .contains("optimum_found"));

  // Bad input: tasks too large for the exact search, a measured meter.
  check_refused("compare --devices 4 --max-dim 16 --count 1 --optimum", {"--tables", "60"});
  check_refused("compare --devices 4 --max-dim 16 --tables 8 --count 1 --optimum --meter measured",
                {"--meter", "measured"});
}

TEST_CASE("compare: per-task cost ratios to a baseline, with a 95% interval; interleaved rounds") {
  const auto json = scratch() / "compare-ratios.json";
  auto r =
      run("compare --devices 4 --max-dim 16 --tables 6 --count 4 --meter analytic --quiet "
          "--planners random,torchrec --json " +
          json.string());
  REQUIRE(r.code == 0);
  // The default baseline: TorchRec's own planner.
  CHECK(r.out.find("vs torchrec (95% CI)") != std::string::npos);
  auto rows = nlohmann::json::parse(slurp(json)).at("settings").at(0).at("planners");
  const auto& to_self = rows.at(1).at("ratio_to_baseline");
  CHECK(to_self.at("baseline") == "torchrec");
  CHECK(to_self.at("geometric_mean") == 1.0);
  CHECK(to_self.at("ci95") == nlohmann::json::array({1.0, 1.0}));
  const auto& random = rows.at(0).at("ratio_to_baseline");
  CHECK(random.at("tasks") == 4);
  REQUIRE(random.at("per_task").size() == 4);
  double log_sum = 0.0;
  for (const auto& x : random.at("per_task"))
    log_sum += std::log(x.get<double>());
  CHECK(random.at("geometric_mean").get<double>() == doctest::Approx(std::exp(log_sum / 4.0)));
  CHECK(random.at("ci95").at(0).get<double>() < random.at("geometric_mean").get<double>());
  CHECK(random.at("ci95").at(1).get<double>() > random.at("geometric_mean").get<double>());
  // Each task's cost per planner; the ratios are their quotients.
  const auto& random_costs = rows.at(0).at("per_task_cost_ms");
  const auto& torchrec_costs = rows.at(1).at("per_task_cost_ms");
  REQUIRE(random_costs.size() == 4);
  REQUIRE(torchrec_costs.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(random_costs.at(i).get<double>() > 0.0);
    CHECK(random.at("per_task").at(i).get<double>() ==
          doctest::Approx(random_costs.at(i).get<double>() / torchrec_costs.at(i).get<double>()));
  }

  // Another baseline.
  REQUIRE(run("compare --devices 4 --max-dim 16 --tables 6 --count 2 --meter analytic --quiet "
              "--planners random,torchrec_like --baseline random --json " +
              json.string())
              .code == 0);
  rows = nlohmann::json::parse(slurp(json)).at("settings").at(0).at("planners");
  CHECK(rows.at(0).at("ratio_to_baseline").at("geometric_mean") == 1.0);

  // The measured meter, two interleaved rounds per plan (tiny tasks).
  r = run(
      "compare --devices 2 --max-dim 16 --tables 3 --count 2 --meter measured --rounds 2 --quiet "
      "--flush-mib 8 --planners random,torchrec --json " +
      json.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("measured 2 times, interleaved") != std::string::npos);
  rows = nlohmann::json::parse(slurp(json)).at("settings").at(0).at("planners");
  for (const auto& x : rows.at(0).at("ratio_to_baseline").at("per_task"))
    CHECK(x.get<double>() > 0.0);

  // Bad input.
  check_refused("compare --count 1 --planners random,torchrec_like --baseline nope", {"nope"});
  check_refused("compare --count 1 --planners random,torchrec_like --baseline lookup_greedy",
                {"--baseline", "lookup_greedy"});
  check_refused("compare --count 1 --meter analytic --rounds 3", {"--rounds", "3"});
  check_refused("compare --count 1 --meter measured --rounds 0", {"--rounds", "0"});
}
