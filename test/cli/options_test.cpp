// Issue 51's CLI classes: numbers are decimal only; every output path and
// every option is checked before any work (an option the run would not read
// is refused, not ignored); a planner that finds no plan for a valid task is
// not a user error; stdout shows control bytes escaped; an impossible task
// request is refused at once. Each exit code as docs/cli.md "Exit codes" says.
#include "cli_support.hpp"

namespace embplan_cli_test {
namespace {

// A task file with two tables that fit alone but not together on 2 devices of
// 1 GiB, beside one more: valid input no table-wise plan can hold.
fs::path crowded_task() {
  const auto p = scratch() / "options-crowded.json";
  write(p, R"({"name": "crowded",
               "tables": [{"name": "a", "rows": 3000000, "dim": 64, "pooling_factor": 1},
                          {"name": "b", "rows": 3000000, "dim": 64, "pooling_factor": 1},
                          {"name": "c", "rows": 3000000, "dim": 64, "pooling_factor": 1}],
               "cluster": {"count": 2, "device": {"memory_gib": 1}}})");
  return p;
}

}  // namespace

TEST_CASE("numbers are decimal: octal, hex, a real for an integer, inf and hex floats refused") {
  const auto out = (scratch() / "options-numbers.json").string();
  // Before: --count 010 made 8 tasks, 0x10 sixteen.
  check_refused("tasks --count 010 --out " + out, {"--count", "010", "decimal integer"});
  check_refused("tasks --count 0x10 --out " + out, {"--count", "0x10", "decimal integer"});
  check_refused("tasks --count 5.0 --out " + out, {"--count", "5.0", "decimal integer"});
  check_refused("tasks --count +5 --out " + out, {"--count", "+5"});
  check_refused("tasks --seed 0b11 --out " + out, {"--seed", "0b11"});
  check_refused("tasks --memory-gib inf --out " + out, {"--memory-gib", "inf", "decimal number"});
  check_refused("tasks --memory-gib 0x1p3 --out " + out, {"--memory-gib", "0x1p3"});
  check_refused("tasks --memory-gib nan --out " + out, {"--memory-gib", "nan"});
  CHECK_FALSE(fs::exists(out));
  // A long value is cut in the message.
  const auto r = run("tasks --count " + std::string(5000, '9') + " --out " + out);
  CHECK(r.code == 2);
  CHECK(r.err.size() < 400);
  CHECK(r.err.find("5000 bytes") != std::string::npos);
  // What is decimal still reads: 0, a fraction, an exponent.
  REQUIRE(run("tasks --count 2 --seed 0 --memory-gib .5e1 --out " + out).code == 0);
  CHECK(nlohmann::json::parse(slurp(out)).at("tasks").size() == 2);
}

TEST_CASE("every output path is checked before any work, and a good file stays as it was") {
  const auto tasks = small_tasks().string();
  const auto good = scratch() / "options-good.json";
  write(good, "{\"kept\": true}\n");
  const auto dir = scratch().string();
  const std::string plan = "plan --task " + tasks + " --planner lookup_greedy";
  // Before: --out good.json was written, then --json <directory> failed.
  check_refused(plan + " --out " + good.string() + " --json " + dir, {"--json", dir, "directory"});
  check_refused(plan + " --json /dev/full", {"--json", "/dev/full", "regular file"});
  check_refused(plan + " --out " + good.string() + " --json " + good.string(), {"--json", "--out"});
  check_refused(plan + " --trace " + (scratch() / "no-such-dir" / "t.json").string(),
                {"--trace", "no-such-dir", "existing directory"});
  check_refused("pool --tables 4 --out " + dir, {"--out", dir, "directory"});
  check_refused("tasks --count 1 --out /dev/full", {"--out", "/dev/full"});
  check_refused("compare --devices 4 --max-dim 4 --count 1 --planners random --json " + dir,
                {"--json", dir});
  CHECK(slurp(good) == "{\"kept\": true}\n");
}

TEST_CASE("an option the run would not read is refused, not ignored") {
  const auto tasks = small_tasks().string();
  const std::string plan = "plan --task " + tasks + " --planner lookup_greedy";
  check_refused(plan + " --policy p.safetensors", {"--policy", "lookup_greedy"});
  check_refused(plan + " --autoshard-policy p.safetensors", {"--autoshard-policy"});
  check_refused(plan + " --row-layout host_first", {"--row-layout", "host_first"});
  check_refused("compare --devices 4 --max-dim 4 --count 1 --planners random --policy p",
                {"--policy"});
  check_refused("compare --devices 4 --max-dim 4 --count 1 --planners random --autoshard-policy p",
                {"--autoshard-policy"});
  // Where the planner reads it, it is read.
  CHECK(run("plan --task " + tasks + " --planner rowwise_lookup_greedy --row-layout host_first")
            .code == 0);
}

TEST_CASE("a planner that finds no plan for a valid task exits 1, not as bad input") {
  const auto r = run("plan --task " + crowded_task().string() + " --planner lookup_greedy");
  CHECK(r.code == 1);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("embplan: no plan: planner 'lookup_greedy' found no plan") == 0);
  CHECK(r.err.find("error") == std::string::npos);
}

TEST_CASE("stdout shows control bytes of a name escaped") {
  const auto p = scratch() / "options-escape.json";
  write(p, R"({"name": "evil\u001b]0;pwned\u0007",
               "tables": [{"name": "t\u001b[2J", "rows": 1000, "dim": 8, "pooling_factor": 1}],
               "cluster": {"count": 2, "device": {"memory_gib": 1}}})");
  const auto r = run("plan --task " + p.string() + " --planner lookup_greedy");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  CHECK(r.out.find("evil\\x1B]0;pwned\\x07") != std::string::npos);
  CHECK(r.out.find("t\\x1B[2J") != std::string::npos);
}

TEST_CASE("a task no draw can fit is refused at once, naming --memory-gib") {
  // Before: 10,000 draws of 20,000 tables each (seconds; 1,000,000 tables:
  // 200 s), then a message naming device_memory_bytes.
  const auto out = (scratch() / "options-hopeless.json").string();
  check_refused("tasks --tables 20000 --count 1 --out " + out,
                {"--memory-gib", "on average", "standard deviations"});
  check_refused("tasks --tables 1000000 --count 1 --out " + out, {"--memory-gib"});
}

}  // namespace embplan_cli_test
