// What the end-to-end tests of the `embplan` CLI (test/cli/*_test.cpp, one file
// per subcommand) share: running the CLI (and, built with MPI, under mpirun),
// a scratch folder per test process, reading back what it wrote.
//
// The folder is compiled as one unity translation unit: these helpers are
// inline, in a named namespace, and a helper that one file alone uses stays in
// that file's anonymous namespace, under a name no other file uses. No
// TEST_CASE here: each lives in the *_test.cpp its ctest entry runs.
#pragma once

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embplan_cli_test {

namespace fs = std::filesystem;

struct run_result {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline fs::path scratch() {
  static const fs::path dir = [] {
    auto d = fs::temp_directory_path() / ("embplan-cli-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

inline run_result run(const std::string& args) {
  const auto out = scratch() / "stdout.txt";
  const auto err = scratch() / "stderr.txt";
  const std::string cmd =
      std::string(EMBPLAN_CLI) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  run_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

inline void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

inline std::size_t lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s)
    n += c == '\n' ? 1 : 0;
  return n;
}

// Ids of a JSON-lines file, in file order.
inline std::vector<std::int64_t> record_ids(const fs::path& p) {
  std::vector<std::int64_t> ids;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    ids.push_back(nlohmann::json::parse(line).at("id").get<std::int64_t>());
  return ids;
}
// Small and quick: 32 bags, 8 MiB of weights, 3 measured runs.
inline const std::string quick_collect =
    " --batch-size 32 --max-weight-mib 8 --warmup 1 --runs 3 --drop 1 --quiet --out ";

// quick_collect for `collect comm` in a world of one (the analytic model: no
// meter options, no protocol).
inline const std::string quick_comm = " --batch-size 32 --quiet --out ";

// The CPU meter's cache flush in these tests: an 8 MiB buffer, not twice the
// machine's last-level cache (a VM may report its host's 480 MiB: 960 MiB
// written before every timed run, nine tenths of the suite's time). The flush
// still runs before every run; the meter's tests check the default size.
inline const std::string small_flush = " --flush-mib 8";

// quick_collect for `collect compute`, with the small flush.
inline const std::string quick_compute = small_flush + quick_collect;

// A small task file (the first of 2 neuroshard tasks on 4 devices).
inline fs::path small_tasks() {
  static const fs::path path = [] {
    const auto p = scratch() / "small-tasks.json";
    const auto r = run("tasks --devices 4 --max-dim 32 --count 2 --seed 1 --out " + p.string());
    REQUIRE(r.code == 0);
    return p;
  }();
  return path;
}

// One bad-input class per check: exit 2, stderr names the flag and the value.
inline void check_refused(const std::string& args, const std::vector<std::string>& names) {
  CAPTURE(args);
  const auto r = run(args);
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.out.empty());
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK(r.err.find(name) != std::string::npos);
  }
}

#if defined(EMBPLAN_MPIEXEC)
inline run_result run_mpi(int ranks, const std::string& args) {
  const auto out = scratch() / "mpi-stdout.txt";
  const auto err = scratch() / "mpi-stderr.txt";
  // LeakSanitizer (the asan preset) reports Open MPI's own allocations that live
  // until exit; leaks of embplan's code are covered by every other test.
  const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 " + std::string(EMBPLAN_MPIEXEC) + " -np " +
                          std::to_string(ranks) + " " + EMBPLAN_CLI + " " + args + " >" +
                          out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  run_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}
#endif

}  // namespace embplan_cli_test
