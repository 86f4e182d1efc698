// End-to-end tests of what the CLI writes: a file is replaced whole or not at
// all, so a write that fails part-way (here `ulimit -f`, as a full disk would)
// leaves the previous good file as it was and no temporary beside it.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

namespace {

// An empty folder of this file's own under the scratch folder.
fs::path output_test_dir(const std::string& name) {
  const auto dir = scratch() / ("output-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The CLI run with `args` by bash under `ulimit -f <blocks>` (1024-byte
// blocks), stdout discarded so that only the file written counts.
run_result output_test_run_limited(int blocks, const std::string& args) {
  const auto err = scratch() / "output-stderr.txt";
  const std::string inner = "ulimit -f " + std::to_string(blocks) + "; exec " +
                            std::string(EMBPLAN_CLI) + " " + args + " >/dev/null";
  const std::string cmd = "bash -c '" + inner + "' 2>" + err.string();
  const int status = std::system(cmd.c_str());
  run_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(err);
  return r;
}

std::vector<std::string> output_test_leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("plan --json: a write that fails part-way leaves the previous report as it was") {
  const auto dir = output_test_dir("json");
  const auto report = dir / "good.json";
  const std::string args = "plan --task " + small_tasks().string() +
                           " --planner lookup_greedy --json " + report.string();
  const auto first = run(args);
  REQUIRE(first.code == 0);
  const std::string good = slurp(report);
  REQUIRE(nlohmann::json::accept(good));
  REQUIRE(good.size() > 4096);  // past the limit below, so the write fails part-way

  const auto r = output_test_run_limited(4, args);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find(report.string()) != std::string::npos);
  CHECK(r.err.find("File too large") != std::string::npos);
  CHECK(slurp(report) == good);
  CHECK(nlohmann::json::accept(slurp(report)));
  CHECK(output_test_leftovers(dir).empty());
}
