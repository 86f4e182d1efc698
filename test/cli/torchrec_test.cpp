// End-to-end tests of TorchRec's planner in the CLI: the `torchrec` preset,
// plan's yardstick (TorchRec's plan of the same task on the same meter, and
// the lower bound), --tiers torchrec, --meter torchrec, and compare on the
// user's own task file with TorchRec as the default baseline.
// small_tasks() does not fit TorchRec's memory accounting in HBM alone (it
// counts the batch's buffers and reserves 15 % and 20 x the input): with
// --tiers torchrec its tables first go where TorchRec's default sharder puts
// them, and TorchRec plans.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

namespace cli_torchrec_test {

nlohmann::json plan_json(const std::string& args, const std::string& file) {
  const auto report = scratch() / file;
  const auto r = run("plan --task " + small_tasks().string() + " --model none --json " +
                     report.string() + " " + args);
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(slurp(report));
}

}  // namespace cli_torchrec_test

using namespace cli_torchrec_test;

TEST_CASE("plan --planner torchrec: TorchRec's own plan, its own yardstick") {
  const auto report = scratch() / "torchrec-plan.json";
  const auto r = run("plan --task " + small_tasks().string() +
                     " --planner torchrec --tiers torchrec --model none --json " + report.string());
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find(", planner torchrec (search ") != std::string::npos);
  CHECK(r.out.find("tiers: torchrec moved ") != std::string::npos);
  CHECK(r.out.find("(fused_uvm_caching, load factor 0.2000)") != std::string::npos);
  CHECK(r.out.find("yardstick: this plan ") != std::string::npos);
  CHECK(r.out.find("(TorchRec's own)") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(report));
  CHECK(j.at("planner") == "torchrec");
  CHECK(j.at("yardstick").at("torchrec") == "this plan");
  CHECK(j.at("yardstick").at("torchrec_ms").get<double>() == j.at("cost_ms").get<double>());
  CHECK(j.at("tier_moves").size() > 0);
  CHECK(j.at("tier_moves")[0].at("kernel") != "fused");
  // In HBM alone TorchRec finds no plan, and says why (exit 1: no plan found).
  const auto hbm =
      run("plan --task " + small_tasks().string() + " --planner torchrec --model none");
  CHECK(hbm.code == 1);
  CHECK(hbm.err.find("TorchRec's planner: no plan, because of insufficient storage") !=
        std::string::npos);
}

TEST_CASE("plan prints TorchRec's plan and the lower bound beside another planner's") {
  const auto other = plan_json("--planner lookup_greedy --tiers torchrec", "yardstick-lookup.json");
  const auto& y = other.at("yardstick");
  CHECK(y.at("torchrec") == "planned");
  CHECK(y.at("this_plan_ms").get<double>() == other.at("cost_ms").get<double>());
  // TorchRec's figure is its plan priced by the same meter: what plan
  // --planner torchrec reports as its cost.
  const auto own = plan_json("--planner torchrec --tiers torchrec", "yardstick-own.json");
  CHECK(y.at("torchrec_ms").get<double>() == own.at("cost_ms").get<double>());
  // The bound: below every table-wise plan (lookup_greedy's is one).
  CHECK(y.at("lower_bound_ms").get<double>() > 0.0);
  CHECK(y.at("lower_bound_ms").get<double>() <= other.at("cost_ms").get<double>());
  CHECK(y.at("lower_bound").get<std::string>().find("additive") != std::string::npos);
  const auto r = run("plan --task " + small_tasks().string() +
                     " --planner lookup_greedy --tiers torchrec --model none --no-report");
  auto line = r.out;  // the yardstick line, unwrapped
  std::replace(line.begin(), line.end(), '\n', ' ');
  CHECK(line.find(" · TorchRec's ") != std::string::npos);
  CHECK(line.find(" · no table-wise plan below ") != std::string::npos);
  // Where TorchRec finds no plan, the yardstick says why.
  const auto hbm = plan_json("--planner lookup_greedy", "yardstick-hbm.json");
  CHECK(hbm.at("yardstick")
            .at("torchrec")
            .get<std::string>()
            .find("no plan: TorchRec's planner: no plan") == 0);
  CHECK(hbm.at("yardstick").at("torchrec_ms").is_null());
}

TEST_CASE("plan --yardstick off leaves TorchRec's plan and the bound out; a bad value is refused") {
  const auto j = plan_json("--planner lookup_greedy --yardstick off", "yardstick-off.json");
  CHECK(j.at("yardstick").at("torchrec") == "skipped: --yardstick off");
  CHECK(j.at("yardstick").at("torchrec_ms").is_null());
  CHECK(j.at("yardstick").at("lower_bound_ms").is_null());
  check_refused("plan --task " + small_tasks().string() + " --yardstick sometimes",
                {"--yardstick", "sometimes", "auto, on or off"});
  check_refused("plan --task " + small_tasks().string() + " --check x.json --yardstick on",
                {"--yardstick", "--check"});
}

TEST_CASE("--meter torchrec prices plans with TorchRec's perf estimator") {
  const auto j =
      plan_json("--planner torchrec --tiers torchrec --meter torchrec", "meter-torchrec.json");
  CHECK(j.at("meter").get<std::string>().find("TorchRec v0.3.2's perf estimator") !=
        std::string::npos);
  // TorchRec's perf is one number per shard: all of it is compute.
  for (const auto& d : j.at("devices")) {
    CHECK(d.at("fwd_comm_ms").get<double>() == 0.0);
    CHECK(d.at("bwd_comm_ms").get<double>() == 0.0);
  }
  check_refused("plan --task " + small_tasks().string() + " --meter torchrc",
                {"--meter", "torchrc", "torchrec"});
  check_refused("plan --task " + small_tasks().string() + " --tiers torchrc",
                {"--tiers", "torchrc", "none, auto or torchrec"});
}

TEST_CASE("compare --task runs on the user's tasks, TorchRec the default baseline") {
  const auto json = scratch() / "compare-task.json";
  const auto r = run("compare --task " + small_tasks().string() +
                     " --planners torchrec,lookup_greedy --tiers torchrec --model none --quiet "
                     "--json " +
                     json.string());
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find(small_tasks().string() + ": 2 tasks") != std::string::npos);
  CHECK(r.out.find("vs torchrec (95% CI)") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(json));
  CHECK(j.at("settings").size() == 1);
  CHECK(j.at("settings")[0].at("task_file") == small_tasks().string());
  CHECK(j.at("settings")[0].at("tasks") == 2);
  CHECK(j.at("tiers") == "torchrec");
  for (const auto& p : j.at("settings")[0].at("planners"))
    CHECK(p.at("succeeded") == 2);
  // The generator's options do not go with a task file.
  check_refused("compare --task " + small_tasks().string() + " --devices 8",
                {"--devices", "--task"});
  check_refused("compare --task " + (scratch() / "no-such-tasks.json").string(),
                {"no-such-tasks.json"});
  check_refused("compare --task " + small_tasks().string() + " --tiers auto",
                {"--tiers", "auto", "none or torchrec"});
}
