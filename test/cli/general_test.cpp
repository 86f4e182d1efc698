// End-to-end tests of the `embplan` CLI, what every subcommand shares: --help,
// an unknown command, bad input (exit code 2 and one line on stderr naming the
// flag or field and the value, escaped), numeric ranges, the progress line, and
// the bundled model found next to an installed binary.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("help works for the app and every subcommand") {
  CHECK(run("--help").code == 0);
  for (const char* sub : {"pool", "tasks", "plan", "compare"}) {
    const auto r = run(std::string(sub) + " --help");
    CHECK(r.code == 0);
    CHECK(r.out.find("--") != std::string::npos);
  }
}

TEST_CASE("bad input: one line on stderr, exit code 2, naming field and value") {
  auto r = run("tasks --protocol bogus --out " + (scratch() / "x.json").string());
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("protocol") != std::string::npos);
  CHECK(r.err.find("bogus") != std::string::npos);

  r = run("plan --task " + (scratch() / "does-not-exist.json").string());
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("does-not-exist.json") != std::string::npos);

  const auto truncated = scratch() / "truncated.json";
  write(truncated, "{\"tasks\": [{\"tables\": [");
  r = run("plan --task " + truncated.string());
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("truncated.json") != std::string::npos);

  const auto bad_rows = scratch() / "bad_rows.json";
  write(bad_rows,
        R"({"tables": [{"name": "a", "rows": -4, "dim": 8, "pooling_factor": 1}],
            "cluster": {"count": 2}})");
  r = run("plan --task " + bad_rows.string());
  CHECK(r.code == 2);
  CHECK(r.err.find("rows") != std::string::npos);
  CHECK(r.err.find("-4") != std::string::npos);

  const auto tasks = scratch() / "tasks-for-bad-planner.json";
  REQUIRE(run("tasks --count 1 --out " + tasks.string()).code == 0);
  r = run("plan --task " + tasks.string() + " --planner foo");
  CHECK(r.code == 2);
  CHECK(r.err.find("\"foo\"") != std::string::npos);
  CHECK(r.err.find("lookup_greedy") != std::string::npos);

  r = run("compare --planners nope --count 1");
  CHECK(r.code == 2);
  CHECK(r.err.find("nope") != std::string::npos);

  r = run("tasks --devices 0 --out " + (scratch() / "y.json").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("devices") != std::string::npos);

  r = run("frobnicate");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
}

TEST_CASE(
    "progress: nothing on stderr when it is not a terminal; --quiet taken by every long run") {
  const auto records = scratch() / "quiet-comm.jsonl";
  fs::remove(records);
  auto r = run("collect comm --samples 12 --devices 4 --batch-size 32 --quiet --out " +
               records.string());
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  r = run("collect comm --samples 14 --devices 4 --batch-size 32 --out " + records.string());
  REQUIRE(r.code == 0);
  CHECK(r.err.find('\r') == std::string::npos);
  CHECK(r.err.find("samples,") == std::string::npos);
  for (const std::string quiet : {"", " --quiet"}) {
    auto c = run("compare --devices 4 --max-dim 16 --count 1 --planners random" + quiet);
    CHECK(c.code == 0);
    CHECK(c.err.empty());
    c = run("train comm --data " + records.string() + " --epochs 2 --out " +
            (scratch() / "quiet-comm.safetensors").string() + quiet);
    CHECK(c.code == 0);
    CHECK(c.err.empty());
    c =
        run("observe --repeatability --flush-mib 8 --repeats 2 --batch-size 16 --warmup 0 --runs 3 "
            "--drop 1" +
            quiet);
    CHECK(c.code == 0);
    CHECK(c.err.empty());
  }
}

TEST_CASE("progress: one updating line on a terminal") {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    MESSAGE("SKIPPED: no `script` to run the CLI on a pseudo-terminal");
    return;
  }
  // script(1) gives the CLI a pseudo-terminal; its output comes back on stdout.
  const auto out = scratch() / "tty.txt";
  const std::string cmd = "script -qec '" + std::string(EMBPLAN_CLI) +
                          " compare --devices 4 --max-dim 16 --count 2 --planners random' "
                          "/dev/null >" +
                          out.string() + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const auto text = slurp(out);
  CHECK(text.find("compare: ") != std::string::npos);
  CHECK(text.find("/2 plans, ") != std::string::npos);
  CHECK(text.find('\r') != std::string::npos);
  // --quiet: no progress line even there.
  const std::string quiet = "script -qec '" + std::string(EMBPLAN_CLI) +
                            " compare --devices 4 --max-dim 16 --count 2 --planners random "
                            "--quiet' /dev/null >" +
                            out.string() + " 2>&1";
  REQUIRE(std::system(quiet.c_str()) == 0);
  CHECK(slurp(out).find("/2 plans, ") == std::string::npos);
}

TEST_CASE("an installed CLI finds its bundled model under <prefix>/share/embplan") {
  // A prefix laid out as `cmake --install` does, holding another model under
  // the bundled name: the CLI must take that one, not the source tree's.
  const auto prefix = scratch() / "prefix";
  fs::remove_all(prefix);
  fs::create_directories(prefix / "bin");
  fs::create_directories(prefix / "share" / "embplan" / "cost");
  fs::copy_file(EMBPLAN_CLI, prefix / "bin" / "embplan");
  const std::string plan = " plan --task " + small_tasks().string() + " --planner neuroshard";
  const auto installed = [&] {
    const auto out = scratch() / "installed.txt";
    const std::string cmd =
        (prefix / "bin" / "embplan").string() + plan + " >" + out.string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    return std::pair{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out)};
  };
  // No model next to it: the source tree's (a binary in a build tree).
  auto [code, text] = installed();
  REQUIRE(code == 0);
  CHECK(text.find("planning model: bundled cpu_compute_model.safetensors") != std::string::npos);
  CHECK(text.find("cpu meter") != std::string::npos);
  // The GPU model in its place: found next to the binary first.
  fs::copy_file(fs::path(EMBPLAN_SOURCE_DIR) / "data" / "cost" / "gpu_compute_model.safetensors",
                prefix / "share" / "embplan" / "cost" / "cpu_compute_model.safetensors");
  std::tie(code, text) = installed();
  REQUIRE(code == 0);
  CHECK(text.find("planning model: bundled cpu_compute_model.safetensors") != std::string::npos);
  CHECK(text.find("cuda meter") != std::string::npos);
  CHECK(text.find("cpu meter") == std::string::npos);
  // --model still wins.
  const auto out = scratch() / "installed-none.txt";
  REQUIRE(std::system(((prefix / "bin" / "embplan").string() + plan + " --model none >" +
                       out.string() + " 2>&1")
                          .c_str()) == 0);
  CHECK(slurp(out).find("planning model: none") != std::string::npos);
}

TEST_CASE("numeric options: out of range or negative values are refused before any work") {
  const auto out = (scratch() / "unused.json").string();
  // Negatives are refused, not wrapped to 2^64 - 1 for an unsigned option.
  check_refused("tasks --count -1 --out " + out, {"--count", "-1", "[1, 1000000]"});
  check_refused("tasks --seed -1 --out " + out, {"--seed", "-1"});
  check_refused("tasks --devices -4 --out " + out, {"--devices", "-4"});
  check_refused("pool --split-seed -1", {"--split-seed", "-1"});
  check_refused("plan --task x.json --index -1", {"--index", "-1"});
  // Huge values are refused at once (each would cost minutes or gigabytes).
  check_refused("tasks --count 1e12 --out " + out, {"--count", "1e12"});
  check_refused("tasks --devices 1e9 --out " + out, {"--devices", "1e9", "65536"});
  check_refused("compare --count 1e12", {"--count", "1e12"});
  check_refused("compare --devices 4,100000", {"--devices", "100000"});
  check_refused("compare --max-dim 2048", {"--max-dim", "2048"});
  check_refused("pool --tables 1e9", {"--tables", "1e9"});
  check_refused("skew --requests 1e12", {"--requests", "1e12"});
  check_refused("skew --zipf nan", {"--zipf", "nan"});
  check_refused("skew --shards 0", {"--shards", "0"});
  check_refused("size --rows 10 --dim -3", {"--dim", "-3"});
  check_refused("collect comm --out " + out + " --devices 70000", {"--devices", "70000"});
  check_refused("collect compute --out " + out + " --runs 0", {"--runs", "0"});
  check_refused("observe --repeats 1.5", {"--repeats", "1.5"});
  check_refused("train compute --data x --out y --epochs -2", {"--epochs", "-2"});
  check_refused("tasks --memory-gib -1 --out " + out, {"--memory-gib", "-1"});
  // The largest seed is still taken, and the ranges are in --help.
  CHECK(run("pool --seed 18446744073709551615 --tables 3").code == 0);
  const auto help = run("tasks --help");
  CHECK(help.out.find("[1, 65536]") != std::string::npos);
  CHECK(help.out.find("[1, 1000000]") != std::string::npos);
  CHECK(help.out.find("[0, 18446744073709551615]") != std::string::npos);
}

TEST_CASE("an unknown command is named, with the commands") {
  check_refused("fooo", {"unknown command 'fooo'", "pool", "compare", "skew"});
}

TEST_CASE("an error echoing binary file content shows escaped bytes") {
  const auto data = scratch() / "binary.jsonl";
  write(data, std::string("\x01\x02\xff\xfe{garbage\x1b[31m\n", 15));
  const auto r = run("train compute --data " + data.string() + " --out " +
                     (scratch() / "m.safetensors").string());
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  for (const char c : r.err) {
    const auto u = static_cast<unsigned char>(c);
    CHECK((c == '\n' || (u >= 0x20 && u < 0x7f)));
  }
}
