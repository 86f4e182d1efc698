// End-to-end tests of the `embplan` CLI: exit codes, one-line errors, files.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/content_hash.hpp"
#include "embplan/io/json_task.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/presets.hpp"
#include "embplan/rl/dreamshard.hpp"

namespace fs = std::filesystem;

namespace {

struct run_result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path scratch() {
  static const fs::path dir = [] {
    auto d = fs::temp_directory_path() / ("embplan-cli-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

run_result run(const std::string& args) {
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

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// A task whose table "huge" (2e9 rows x 4 fp16 columns) fits no 4 GiB device:
// the rowwise_ planners split it by rows; "small" stays whole.
fs::path rowwise_task(const std::string& file) {
  const auto p = scratch() / file;
  write(p, R"({"name": "rowwise",
                 "tables": [{"name": "huge", "rows": 2000000000, "dim": 4, "pooling_factor": 1,
                             "dtype": "fp16"},
                            {"name": "small", "rows": 1000, "dim": 8, "pooling_factor": 2}],
                 "cluster": {"count": 8, "device": {"memory_gib": 4}}})");
  return p;
}

// The "__metadata__" of a safetensors file's JSON header.
nlohmann::json safetensors_metadata(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  return nlohmann::json::parse(header).at("__metadata__");
}

std::size_t lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s)
    n += c == '\n' ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("help works for the app and every subcommand") {
  CHECK(run("--help").code == 0);
  for (const char* sub : {"pool", "tasks", "plan", "compare"}) {
    const auto r = run(std::string(sub) + " --help");
    CHECK(r.code == 0);
    CHECK(r.out.find("--") != std::string::npos);
  }
}

TEST_CASE("pool prints statistics next to the published ones and writes JSON") {
  const auto path = scratch() / "pool.json";
  const auto r = run("pool --seed 3 --out " + path.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("856") != std::string::npos);
  CHECK(r.out.find("4107458") != std::string::npos);  // published mean hash size
  const auto j = nlohmann::json::parse(slurp(path));
  CHECK(j.at("tables").size() == 856);
}

TEST_CASE("tasks -> plan -> TorchRec export and trace") {
  const auto tasks = scratch() / "tasks.json";
  auto r = run("tasks --protocol neuroshard --devices 4 --max-dim 32 --count 3 --seed 1 --out " +
               tasks.string());
  REQUIRE(r.code == 0);
  const auto tj = nlohmann::json::parse(slurp(tasks));
  CHECK(tj.at("tasks").size() == 3);

  const auto plan = scratch() / "plan.json";
  const auto tr = scratch() / "plan_torchrec.json";
  const auto trace = scratch() / "plan.trace.json";
  r = run("plan --task " + tasks.string() + " --index 2 --planner lookup_greedy --out " +
          plan.string() + " --torchrec " + tr.string() + " --trace " + trace.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("cuda:3") != std::string::npos);
  CHECK(r.out.find("degree of balance") != std::string::npos);
  const auto pj = nlohmann::json::parse(slurp(plan));
  CHECK(pj.at("shards").size() == tj.at("tasks").at(2).at("tables").size());
  const auto torchrec = nlohmann::json::parse(slurp(tr));
  CHECK(torchrec.size() == tj.at("tasks").at(2).at("tables").size());
  CHECK(torchrec.begin()->at("sharding_type") == "table_wise");
  const auto tracej = nlohmann::json::parse(slurp(trace));
  CHECK(tracej.at("traceEvents").size() >= 4 * 4);
}

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

TEST_CASE("an infeasible task names the table that does not fit") {
  const auto big = scratch() / "big.json";
  write(big, R"({"name": "too-big",
                 "tables": [{"name": "huge", "rows": 2000000000, "dim": 128, "pooling_factor": 1}],
                 "cluster": {"count": 2, "device": {"memory_gib": 4}}})");
  const auto r = run("plan --task " + big.string() + " --planner lookup_greedy");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("huge") != std::string::npos);
}

namespace {
// Ids of a JSON-lines file, in file order.
std::vector<std::int64_t> record_ids(const fs::path& p) {
  std::vector<std::int64_t> ids;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    ids.push_back(nlohmann::json::parse(line).at("id").get<std::int64_t>());
  return ids;
}
// Small and quick: 32 bags, 8 MiB of weights, 3 measured runs.
const std::string quick_collect =
    " --batch-size 32 --max-weight-mib 8 --warmup 1 --runs 3 --drop 1 --quiet --out ";
}  // namespace

TEST_CASE("collect compute: JSON lines, resumable") {
  const auto out = scratch() / "compute.jsonl";
  fs::remove(out);
  auto r = run("collect compute --samples 3" + quick_collect + out.string());
  REQUIRE(r.code == 0);
  CHECK(record_ids(out) == std::vector<std::int64_t>{0, 1, 2});
  std::ifstream in(out);
  std::string first;
  std::getline(in, first);
  const auto rec = nlohmann::json::parse(first);
  CHECK(rec["meter"] == "cpu");
  CHECK(rec["batch_size"] == 32);
  CHECK(rec["tables"].size() == rec["dims"].size());
  CHECK(rec["forward_ms"].get<double>() > 0.0);
  CHECK(rec["backward_ms"].get<double>() > 0.0);
  CHECK(rec["total_ms"].get<double>() > 0.0);

  // A rerun asking for 5 measures only ids 3 and 4.
  r =
      run("collect compute --samples 5 --batch-size 32 --max-weight-mib 8 --warmup 1 --runs 3 "
          "--drop 1 --out " +
          out.string());
  REQUIRE(r.code == 0);
  CHECK(r.err.find("2 samples to measure (3 already in") != std::string::npos);
  // stderr is a file here, not a terminal: no progress line.
  CHECK(r.err.find("ETA") == std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);
  CHECK(record_ids(out) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("collect compute --reference: every record scaled to one reference time, recorded") {
  const auto out = scratch() / "compute-reference.jsonl";
  fs::remove(out);
  auto r = run("collect compute --samples 2 --reference-ms 2.5" + quick_collect + out.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::ifstream in(out);
  std::string line;
  std::size_t records = 0;
  while (std::getline(in, line)) {
    const auto rec = nlohmann::json::parse(line);
    CHECK(rec["meter"] == "cpu");
    CHECK(rec["reference_ms"].get<double>() == 2.5);
    CHECK(rec["total_ms"].get<double>() > 0.0);
    ++records;
  }
  CHECK(records == 2);
  // --reference alone: measured once, said on stderr, the same in every record.
  const auto calibrated = scratch() / "compute-calibrated.jsonl";
  fs::remove(calibrated);
  r =
      run("collect compute --samples 2 --reference --batch-size 32 --max-weight-mib 8 --warmup 1 "
          "--runs 3 --drop 1 --out " +
          calibrated.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("drift reference") != std::string::npos);
  std::ifstream in2(calibrated);
  std::vector<double> ms;
  while (std::getline(in2, line))
    ms.push_back(nlohmann::json::parse(line)["reference_ms"].get<double>());
  REQUIRE(ms.size() == 2);
  CHECK(ms[0] > 0.0);
  CHECK(ms[1] == ms[0]);
}

namespace {
// Two small tables on two devices: quick to measure on the CPU meter.
fs::path small_measured_task(const std::string& file) {
  const auto task = scratch() / file;
  write(task, R"({"name": "two-devices", "batch_size": 256,
                "tables": [{"name": "a", "rows": 2000, "dim": 16, "pooling_factor": 4},
                           {"name": "b", "rows": 3000, "dim": 32, "pooling_factor": 2}],
                "cluster": {"count": 2, "device": {"memory_gib": 1}}})");
  return task;
}
}  // namespace

TEST_CASE("plan --meter measured --reference-ms: the plan measured on the scaled meter") {
  const auto task = small_measured_task("reference-plan-task.json");
  const auto r = run("plan --task " + task.string() +
                     " --planner lookup_greedy --meter measured --reference-ms 1.5");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("drift reference") != std::string::npos);
  CHECK(r.out.find("takes 1.500 ms") != std::string::npos);
  CHECK(r.out.find("cost (max over devices)") != std::string::npos);
}

TEST_CASE("plan --meter measured: the meter's batch follows a CPU-meter model, or --meter-batch") {
  const auto task = small_measured_task("meter-batch-task.json");
  const std::string plan = "plan --task " + task.string() + " --planner lookup_greedy";
  // The bundled CPU model learned the CPU meter at 1,024 bags per table.
  auto r = run(plan + " --meter measured");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("batch 1024") != std::string::npos);  // the model's line
  CHECK(r.out.find("; 1024 bags per table per run") != std::string::npos);
  r = run(plan + " --meter measured --model none");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("; 4096 bags per table per run") != std::string::npos);
  r = run(plan + " --meter measured --meter-batch 512");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("; 512 bags per table per run") != std::string::npos);
  CHECK(r.out.find("cost (max over devices)") != std::string::npos);
  r = run(plan + " --meter analytic --meter-batch 512");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--meter") != std::string::npos);
  CHECK(r.err.find("analytic") != std::string::npos);
  CHECK(r.err.find("--meter-batch") != std::string::npos);
  r = run(plan + " --meter measured --meter-batch 0");
  CHECK(r.code == 2);
  CHECK(r.err.find("--meter-batch") != std::string::npos);
  CHECK(r.err.find("0") != std::string::npos);
}

TEST_CASE("--reference: bad input names the flag or field and the value") {
  auto r = run("collect comm --reference --samples 1 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("collect.reference") != std::string::npos);
  CHECK(r.err.find("true") != std::string::npos);
  r = run("collect compute --reference-ms -1 --samples 1 --out " +
          (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("'--reference-ms'") != std::string::npos);
  CHECK(r.err.find("-1") != std::string::npos);
  r = run("compare --count 1 --meter analytic --reference");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--meter") != std::string::npos);
  CHECK(r.err.find("analytic") != std::string::npos);
  r = run("compare --count 1 --meter measured --reference-ms -2");
  CHECK(r.code == 2);
  CHECK(r.err.find("--reference-ms") != std::string::npos);
  CHECK(r.err.find("-2") != std::string::npos);
}

TEST_CASE("collect comm without MPI ranks: analytic meter, per-device costs") {
  const auto out = scratch() / "comm.jsonl";
  fs::remove(out);
  const auto r = run("collect comm --samples 2 --devices 4" + quick_collect + out.string());
  REQUIRE(r.code == 0);
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  const auto rec = nlohmann::json::parse(line);
  CHECK(rec["meter"] == "analytic");
  CHECK(rec["forward_ms"].size() == 4);
  CHECK(rec["start_ms"].size() == 4);
  CHECK(rec["dim_sum"].size() == 4);
}

TEST_CASE("collect and observe: bad input names the field and value") {
  auto r = run("collect bogus --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("collect.kind") != std::string::npos);
  CHECK(r.err.find("bogus") != std::string::npos);
  r = run("collect compute --samples -4 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("'--samples'") != std::string::npos);
  CHECK(r.err.find("-4") != std::string::npos);
  r = run("collect compute --runs 2 --drop 1 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("protocol.drop") != std::string::npos);
  r = run("observe --sets 0");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--sets'") != std::string::npos);
  r = run("observe --repeatability --repeats 1");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--repeats'") != std::string::npos);
  r = run("observe --max-weight-mib 0");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--max-weight-mib'") != std::string::npos);
  CHECK(r.err.find("0") != std::string::npos);
}

TEST_CASE("observe: the four observations on small shards; --separate splits (1) by part") {
  const std::string small =
      "observe --sets 2 --tables-per-set 2 --halves 1 --repeats 2 --batch-size 16 --warmup 0 "
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
      run("observe --repeatability --repeats 2 --batch-size 32 --warmup 0 --runs 3 --drop 1");
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
      run("observe --repeatability --repeats 2 --batch-size 32 --warmup 0 --runs 3 --drop 1 "
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

#if defined(EMBPLAN_MPIEXEC)
namespace {
run_result run_mpi(int ranks, const std::string& args) {
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
}  // namespace

TEST_CASE(
    "collect under mpirun -np 2: ranks share the samples, rank 0 writes, all-to-all measured") {
  const auto out = scratch() / "mpi-compute.jsonl";
  fs::remove(out);
  auto r = run_mpi(2, "collect compute --samples 5" + quick_collect + out.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto ids = record_ids(out);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  // The same samples as one process would make: same tables and dims.
  const auto single = scratch() / "single-compute.jsonl";
  fs::remove(single);
  REQUIRE(run("collect compute --samples 5" + quick_collect + single.string()).code == 0);
  std::ifstream a(out);
  std::ifstream b(single);
  std::map<std::int64_t, nlohmann::json> by_id;
  for (std::string line; std::getline(a, line);) {
    const auto j = nlohmann::json::parse(line);
    by_id[j["id"].get<std::int64_t>()] = j;
  }
  for (std::string line; std::getline(b, line);) {
    const auto j = nlohmann::json::parse(line);
    CHECK(by_id[j["id"].get<std::int64_t>()]["tables"] == j["tables"]);
    CHECK(by_id[j["id"].get<std::int64_t>()]["dims"] == j["dims"]);
  }
  // --reference: rank 0 measures the reference once; both ranks scale to it.
  const auto referenced = scratch() / "mpi-compute-reference.jsonl";
  fs::remove(referenced);
  r = run_mpi(2, "collect compute --samples 4 --reference" + quick_collect + referenced.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::ifstream rf(referenced);
  std::set<double> reference_ms;
  for (std::string line; std::getline(rf, line);)
    reference_ms.insert(nlohmann::json::parse(line)["reference_ms"].get<double>());
  REQUIRE(reference_ms.size() == 1);
  CHECK(*reference_ms.begin() > 0.0);

  const auto comm = scratch() / "mpi-comm.jsonl";
  fs::remove(comm);
  r = run_mpi(2, "collect comm --samples 2 --max-start-ms 2" + quick_collect + comm.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::ifstream c(comm);
  std::string line;
  REQUIRE(std::getline(c, line));
  const auto rec = nlohmann::json::parse(line);
  CHECK(rec["meter"] == "mpi-alltoallv");
  REQUIRE(rec["forward_ms"].size() == 2);
  CHECK(rec["forward_ms"][0].get<double>() > 0.0);
  CHECK(rec["backward_ms"][1].get<double>() > 0.0);
  // The rank that starts first waits for the other: its forward cost is at
  // least the gap between the two start times, less timer slack.
  const double s0 = rec["start_ms"][0].get<double>();
  const double s1 = rec["start_ms"][1].get<double>();
  const std::size_t early = s0 < s1 ? 0 : 1;
  CHECK(rec["forward_ms"][early].get<double>() >= std::abs(s0 - s1) * 0.9);
}

TEST_CASE("plan --meter measured under mpirun -np 2: a real all-to-all, rank 0 reports") {
  const auto task = scratch() / "mpi-plan-task.json";
  write(task, R"({"name": "two-devices", "batch_size": 256,
                  "tables": [{"name": "a", "rows": 2000, "dim": 16, "pooling_factor": 4},
                             {"name": "b", "rows": 3000, "dim": 32, "pooling_factor": 2},
                             {"name": "c", "rows": 1000, "dim": 8, "pooling_factor": 6}],
                  "cluster": {"count": 2, "device": {"memory_gib": 1}}})");
  auto r = run_mpi(2, "plan --task " + task.string() + " --planner lookup_greedy --meter measured");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("MPI_Alltoallv") != std::string::npos);
  // One report (rank 0's), with both devices' rows.
  std::size_t reports = 0;
  for (std::size_t at = r.out.find("cost (max over devices)"); at != std::string::npos;
       at = r.out.find("cost (max over devices)", at + 1))
    ++reports;
  CHECK(reports == 1);
  // Three devices, two ranks: refused with the field and both counts.
  write(task, R"({"name": "three-devices", "batch_size": 256,
                  "tables": [{"name": "a", "rows": 2000, "dim": 16, "pooling_factor": 4}],
                  "cluster": {"count": 3, "device": {"memory_gib": 1}}})");
  r = run_mpi(2, "plan --task " + task.string() +
                     " --planner lookup_greedy --meter measured --reference-ms 1");
  CHECK(r.code != 0);  // the MPI plan meter has no drift reference
  CHECK(r.err.find("--reference") != std::string::npos);
  CHECK(r.err.find("mpirun") != std::string::npos);
  r = run_mpi(2, "plan --task " + task.string() + " --planner lookup_greedy --meter measured");
  CHECK(r.code != 0);  // every rank exits 2; mpirun passes on a failure
  CHECK(r.err.find("measure_plan.ranks") != std::string::npos);
  CHECK(r.err.find("(3)") != std::string::npos);
}
TEST_CASE("train dreamshard under mpirun -np 2: communication measured, rank 0 writes the policy") {
  const auto tasks = scratch() / "mpi-dreamshard-tasks.json";
  REQUIRE(
      run("tasks --protocol dreamshard --devices 2 --tables 6 --count 2 --out " + tasks.string())
          .code == 0);
  const auto policy = scratch() / "mpi-dreamshard.safetensors";
  const auto checkpoint = scratch() / "mpi-dreamshard-ckpt.safetensors";
  fs::remove(policy);
  const std::string tiny =
      " --meter cpu --iterations 2 --collect 2 --cost-steps 3 --cost-batch 4 --rl-steps 1 "
      "--episodes 2 --quiet --seed 5";
  auto r = run_mpi(2, "train dreamshard --tasks " + tasks.string() + tiny + " --checkpoint " +
                          checkpoint.string() + " --out " + policy.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("MPI_Alltoallv") != std::string::npos);
  // One report (rank 0's).
  std::size_t tables = 0;
  for (std::size_t at = r.out.find("learning curve:"); at != std::string::npos;
       at = r.out.find("learning curve:", at + 1))
    ++tables;
  CHECK(tables == 1);
  REQUIRE(fs::exists(policy));
  REQUIRE(fs::exists(checkpoint));
  const auto md = safetensors_metadata(policy);
  CHECK(md.at("communication") == "mpi");
  CHECK(md.at("mpi_ranks") == "2");
  CHECK(md.at("embplan.meter") == "cpu");
  // The policy plans.
  CHECK(run("plan --task " + tasks.string() + " --planner dreamshard --policy " + policy.string())
            .code == 0);

  // Bad input under mpirun: the analytic meter, a drift reference, ranks != devices.
  r = run_mpi(2, "train dreamshard --tasks " + tasks.string() + " --meter analytic --quiet --out " +
                     policy.string());
  CHECK(r.code != 0);
  CHECK(r.err.find("--meter") != std::string::npos);
  CHECK(r.err.find("mpirun") != std::string::npos);
  r = run_mpi(2, "train dreamshard --tasks " + tasks.string() +
                     " --meter cpu --reference --quiet --out " + policy.string());
  CHECK(r.code != 0);
  CHECK(r.err.find("--reference") != std::string::npos);
  const auto four = scratch() / "mpi-dreamshard-4dev.json";
  REQUIRE(run("tasks --protocol dreamshard --devices 4 --tables 6 --count 1 --out " + four.string())
              .code == 0);
  r = run_mpi(2, "train dreamshard --tasks " + four.string() + " --meter cpu --quiet --out " +
                     policy.string());
  CHECK(r.code != 0);
  CHECK(r.err.find("tasks[0].cluster.size") != std::string::npos);
  CHECK(r.err.find("2 ranks") != std::string::npos);
}
TEST_CASE(
    "train autoshard under mpirun -np 2: the ranks are actors, the same policy as one process") {
  const auto tasks = scratch() / "mpi-autoshard-tasks.json";
  REQUIRE(run("tasks --protocol autoshard --devices 2 --tables 8 --count 2 --out " + tasks.string())
              .code == 0);
  const auto one = scratch() / "mpi-autoshard-one.safetensors";
  const auto two = scratch() / "mpi-autoshard-two.safetensors";
  const std::string common = "train autoshard --tasks " + tasks.string() +
                             " --meter analytic --updates 3 --batch 5 --cost-updates 2 "
                             "--cost-batch 8 --quiet --seed 2 --out ";
  REQUIRE(run(common + one.string()).code == 0);
  fs::remove(two);
  const auto r = run_mpi(2, common + two.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("actors: 2 MPI ranks") != std::string::npos);
  std::size_t reports = 0;
  for (std::size_t at = r.out.find("wrote "); at != std::string::npos;
       at = r.out.find("wrote ", at + 1))
    ++reports;
  CHECK(reports == 1);  // rank 0 writes
  REQUIRE(fs::exists(two));
  // The networks and curves are equal; only the actors note differs.
  auto m1 = safetensors_metadata(one);
  auto m2 = safetensors_metadata(two);
  CHECK(m2.at("embplan.hp.actors") == "2 MPI ranks");
  CHECK(m1.at("embplan.learning_curve") == m2.at("embplan.learning_curve"));
  const auto t1 = embplan::io::read_safetensors(one);
  const auto t2 = embplan::io::read_safetensors(two);
  REQUIRE(t1.tensors.size() == t2.tensors.size());
  for (const auto& [name, t] : t1.tensors) {
    CAPTURE(name);
    CHECK(t.values == t2.tensors.at(name).values);
  }
}
#else
TEST_CASE("collect under mpirun: skipped, embplan was built without MPI") {
  MESSAGE("SKIPPED: no MPI found at configure time; mpirun -np 2 collect test not run");
}
#endif

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

TEST_CASE("size answers the chapter's sizing questions") {
  auto r = run("size --rows 2000000000 --dim 128 --budget-gib 16 --optimizer adam");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("1024000000000") != std::string::npos);  // 2e9 x 128 x 4 bytes
  CHECK(r.out.find("shards") != std::string::npos);
  r = run("size --rows 1000000000 --dim 128");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("m = 31623") != std::string::npos);
  r = run("size --rows 1000 --dim 128 --budget-gib 0.0000001");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--budget-gib") != std::string::npos);
  CHECK(r.err.find("512 bytes") != std::string::npos);
}

TEST_CASE("size sizes a cache from the reuse histogram and itemises the storage of a tier") {
  // 10,000 rows x 32 fp32; 1,000 bags x 10 lookups; half the unique rows read
  // 2x (bin_1), half 24.5x (bin_5): 754.7 unique rows, floor 0.0755.
  const std::string table =
      "size --rows 10000 --dim 32 --pooling-factor 10 --batch-size 1000 --optimizer "
      "rowwise_adagrad --reuse-hist 0,0.5,0,0,0,0.5,0,0,0,0,0,0,0,0,0,0,0";
  // Target 0.2: 1 - c x 23.5 / 10,000 <= 0.2 from c = 340.4 hot rows on.
  // Budget 429,496 bytes: 384,008 at any cache size + 144 a slot, 315 slots.
  auto r = run(table + " --target-miss-ratio 0.2 --hbm-budget-gib 0.0004");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("755 unique rows") != std::string::npos);
  CHECK(r.out.find("341 rows cached, load factor 0.034100") != std::string::npos);
  CHECK(r.out.find("tier uvm_caching, load factor 0.031500 (315 rows)") != std::string::npos);
  CHECK(r.out.find("cache state") != std::string::npos);
  CHECK(r.out.find("output gradients") != std::string::npos);
  // The whole table fits 1 GiB: hbm.
  r = run(table + " --hbm-budget-gib 1");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("tier hbm") != std::string::npos);
  // Bad input, each named by its flag.
  r = run(table + " --target-miss-ratio 0.01");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("'--target-miss-ratio' = 0.01: expected at least 0.0755") != std::string::npos);
  CHECK(r.out.empty());
  r = run(table + " --hbm-budget-gib 0.000001");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--hbm-budget-gib' = ") != std::string::npos);
  CHECK(r.err.find("at least 344008 (0.000 GiB)") != std::string::npos);
  r = run("size --rows 10 --dim 4 --reuse-hist 0.5,0.5 --target-miss-ratio 0.5");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--reuse-hist' = 2") != std::string::npos);
  r =
      run("size --rows 10 --dim 4 --reuse-hist 0.5,0.6,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0 "
          "--target-miss-ratio 0.5");
  CHECK(r.code == 2);
  CHECK(r.err.find("--reuse-hist.reuse_hist") != std::string::npos);
}

TEST_CASE("plan with a rowwise_ planner splits a table larger than any device by rows") {
  const auto big = rowwise_task("big-rowwise.json");
  auto r = run("plan --task " + big.string() + " --planner lookup_greedy");
  CHECK(r.code == 2);
  CHECK(r.err.find("huge") != std::string::npos);
  const auto plan = scratch() / "big-rowwise-plan.json";
  const auto tr = scratch() / "big-rowwise-torchrec.json";
  r = run("plan --task " + big.string() + " --planner rowwise_lookup_greedy --out " +
          plan.string() + " --torchrec " + tr.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("row-wise shards") != std::string::npos);
  const auto pj = nlohmann::json::parse(slurp(plan));
  std::size_t huge_pieces = 0;
  for (const auto& s : pj.at("shards"))
    huge_pieces += s.at("table_name") == "huge" ? 1 : 0;
  CHECK(huge_pieces == 4);
  const auto tj = nlohmann::json::parse(slurp(tr));
  CHECK(tj.at("huge").at("sharding_type") == "row_wise");
  CHECK(tj.at("huge").at("sharding_spec").at("shards").size() == 4);
}

TEST_CASE("compare: NeuroShard, local search and TorchRec-like rows; cache and gap columns") {
  const auto json = scratch() / "compare-search.json";
  const auto r =
      run("compare --devices 4 --max-dim 16 --count 2 --planners random,torchrec,neuroshard,"
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

TEST_CASE("train comm and train compute fit collected records and write a model file") {
  // Comm: analytic records (no MPI ranks), which the net can learn.
  const auto records = scratch() / "train-comm.jsonl";
  fs::remove(records);
  REQUIRE(run("collect comm --samples 60 --devices 4" + quick_collect + records.string()).code ==
          0);
  const auto model = scratch() / "comm-model.safetensors";
  fs::remove(model);
  const auto r =
      run("train comm --data " + records.string() + " --epochs 20 --out " + model.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("communication models on 60 records") != std::string::npos);
  CHECK(r.out.find("4 devices, meter analytic") != std::string::npos);
  CHECK(r.out.find("forward") != std::string::npos);
  CHECK(r.out.find("backward") != std::string::npos);
  CHECK(fs::file_size(model) > 1000);

  // Compute: 40 of the bundled CPU-meter records.
  const auto head = scratch() / "compute-head.jsonl";
  {
    std::ifstream in(std::string(EMBPLAN_SOURCE_DIR) + "/data/cost/cpu_compute_train_half.jsonl");
    std::ofstream out(head);
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i)
      out << line << '\n';
  }
  const auto cmodel = scratch() / "compute-model.safetensors";
  const auto c =
      run("train compute --data " + head.string() + " --epochs 3 --out " + cmodel.string());
  REQUIRE(c.code == 0);
  CHECK(c.out.find("compute-cost model on 40 records") != std::string::npos);
  CHECK(c.out.find("of the pool's 856 tables: all from its train half (split seed 0)") !=
        std::string::npos);
  // The file it writes is a model plan/compare take, judged on the other half.
  const auto p = run("compare --devices 4 --max-dim 16 --count 1 --planners neuroshard --model " +
                     cmodel.string());
  CHECK(p.code == 0);
  CHECK(p.out.find("planning model: compute-model.safetensors") != std::string::npos);
  CHECK(p.out.find("tasks from: the test half of the pool (split seed 0)") != std::string::npos);

  // Under another split, the same records hold tables of both halves: the
  // file says whole, and compare draws from the whole pool (and says why).
  const auto mixed = scratch() / "compute-mixed.safetensors";
  const auto m = run("train compute --data " + head.string() + " --epochs 1 --split-seed 5 --out " +
                     mixed.string());
  REQUIRE(m.code == 0);
  CHECK(m.out.find("not all from one half (split seed 5)") != std::string::npos);
  const auto w = run("compare --devices 4 --max-dim 16 --count 1 --planners neuroshard --model " +
                     mixed.string());
  CHECK(w.code == 0);
  CHECK(w.out.find("tasks from: the whole pool: the learned model's file does not record one "
                   "half") != std::string::npos);
  // --half overrides; --half train --split-seed 5 names the split.
  const auto o = run("compare --devices 4 --max-dim 16 --count 1 --planners neuroshard --model " +
                     mixed.string() + " --half train --split-seed 5");
  CHECK(o.code == 0);
  CHECK(o.out.find("tasks from: the train half of the pool (split seed 5), as --half says") !=
        std::string::npos);
}

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

TEST_CASE("train: a bad kind and a missing data file are named") {
  const auto kind = run("train bogus --data x.jsonl --out y.safetensors");
  CHECK(kind.code == 2);
  CHECK(kind.err.find("train.kind") != std::string::npos);
  CHECK(kind.err.find("bogus") != std::string::npos);
  const auto data = run("train comm --data /nonexistent/records.jsonl --out y.safetensors");
  CHECK(data.code == 2);
  CHECK(data.err.find("/nonexistent/records.jsonl") != std::string::npos);
}

namespace {
// A small task file (the first of 2 neuroshard tasks on 4 devices).
fs::path small_tasks() {
  static const fs::path path = [] {
    const auto p = scratch() / "small-tasks.json";
    const auto r = run("tasks --devices 4 --max-dim 32 --count 2 --seed 1 --out " + p.string());
    REQUIRE(r.code == 0);
    return p;
  }();
  return path;
}
}  // namespace

TEST_CASE("plan lists which table, and which piece of it, went to which device") {
  const auto json = scratch() / "plan-report.json";
  const auto r = run("plan --task " + small_tasks().string() + " --planner neuroshard --json " +
                     json.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (const char* column : {"table", "name", "piece", "device", "cost ms", "memory"})
    CHECK(r.out.find(column) != std::string::npos);
  CHECK(r.out.find("cost ms = the piece alone") != std::string::npos);
  CHECK(r.out.find("cost (max over devices)") != std::string::npos);  // the per-device summary
  const auto j = nlohmann::json::parse(slurp(json));
  const auto task = nlohmann::json::parse(slurp(small_tasks())).at("tasks").at(0);
  REQUIRE(j.at("tables").size() >= task.at("tables").size());  // column splits add pieces
  std::set<std::string> named;
  for (const auto& piece : j.at("tables")) {
    named.insert(piece.at("name").get<std::string>());
    CHECK(piece.at("device").get<std::size_t>() < 4);
    CHECK(piece.at("cost_ms").get<double>() >= 0.0);
    CHECK(piece.at("memory_bytes").get<std::uint64_t>() > 0);
    CHECK(r.out.find(piece.at("name").get<std::string>()) != std::string::npos);
  }
  CHECK(named.size() == task.at("tables").size());  // every table listed
  CHECK(j.at("devices").size() == 4);
  CHECK(j.at("cost_ms").get<double>() > 0.0);

  // A table split by rows: its pieces say which rows.
  const auto big = rowwise_task("big-rowwise.json");
  const auto rw = run("plan --task " + big.string() + " --planner rowwise_lookup_greedy");
  REQUIRE(rw.code == 0);
  CHECK(rw.out.find("rows [0, ") != std::string::npos);
  CHECK(rw.out.find("whole") != std::string::npos);  // the small table
  CHECK(rw.out.find("GiB") != std::string::npos);
}

TEST_CASE("a table that fits no device: the failure says GiB and suggests the rowwise_ planners") {
  const auto big = scratch() / "big-hint.json";
  write(big, R"({"name": "too-big",
                 "tables": [{"name": "huge", "rows": 2000000000, "dim": 128, "pooling_factor": 1}],
                 "cluster": {"count": 2, "device": {"memory_gib": 4}}})");
  for (const char* planner : {"lookup_greedy", "neuroshard", "torchrec"}) {
    const auto r = run("plan --task " + big.string() + " --planner " + planner);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("huge") != std::string::npos);
    CHECK(r.err.find("GiB") != std::string::npos);
    CHECK(r.err.find(" bytes") == std::string::npos);
    CHECK(r.err.find("rowwise_torchrec") != std::string::npos);
  }
  // A rowwise_ planner that still finds no room is not told to try itself.
  const auto r = run("plan --task " + big.string() + " --planner rowwise_lookup_greedy");
  CHECK(r.code == 2);
  CHECK(r.err.find("GiB") != std::string::npos);
  CHECK(r.err.find("try a rowwise_") == std::string::npos);
}

TEST_CASE("plan and compare take the same planner names, rowwise_ ones included") {
  auto r =
      run("compare --devices 4 --max-dim 16 --count 1 --planners rowwise_lookup_greedy,"
          "lookup_greedy,rowwise_neuroshard");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("rowwise_lookup_greedy") != std::string::npos);
  CHECK(r.out.find("rowwise_neuroshard") != std::string::npos);
  r = run("plan --task " + small_tasks().string() + " --planner rowwise_neuroshard");
  CHECK(r.code == 0);
  for (const char* command : {"plan --task x.json --planner", "compare --planners"}) {
    r = run(std::string(command) + " rowwise_bogus");
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find(std::string(command).find("compare") == 0 ? "'--planners'" : "'--planner'") !=
          std::string::npos);
    CHECK(r.err.find("\"rowwise_bogus\"") != std::string::npos);
    CHECK(r.err.find("rowwise_") != std::string::npos);
  }
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
    c = run("observe --repeatability --repeats 2 --batch-size 16 --warmup 0 --runs 3 --drop 1" +
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

// One bad-input class per check: exit 2, stderr names the flag and the value.
void check_refused(const std::string& args, const std::vector<std::string>& names) {
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

TEST_CASE("plan converts only the task --index picks, and bounds its devices") {
  // 3 tasks, the first two asking for 2^20 devices each: never converted.
  const auto one = [](const std::string& count) {
    return R"({"tables": [{"rows": 1000, "dim": 8, "pooling_factor": 1}], "cluster": {"count": )" +
           count + "}}";
  };
  const auto file = scratch() / "big-tasks.json";
  write(file, R"({"tasks": [)" + one("1048576") + "," + one("1048576") + "," + one("2") + "]}");
  auto r = run("plan --task " + file.string() + " --index 2 --model none");
  CHECK(r.code == 0);
  CHECK(r.out.find("on 2 devices") != std::string::npos);
  // The chosen one is bounded (the CLI's 65536, below the reader's 2^20).
  check_refused("plan --task " + file.string() + " --index 0 --model none",
                {"tasks[0].cluster.count", "1048576", "65536"});
  // An index past the file: named with the count, before any conversion.
  check_refused("plan --task " + file.string() + " --index 3", {"--index", "3", "3 tasks"});
  // A single-task file.
  const auto single = scratch() / "big-task.json";
  write(single, one("100000"));
  check_refused("plan --task " + single.string(), {"task.cluster.count", "100000"});
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

TEST_CASE("plan and compare refuse a table whose dim is not a multiple of 4") {
  const auto file = scratch() / "dim6.json";
  write(file, R"({"tables": [{"rows": 100, "dim": 8, "pooling_factor": 1},
                             {"name": "odd", "rows": 100, "dim": 6, "pooling_factor": 1}],
                 "cluster": {"count": 2}})");
  check_refused("plan --task " + file.string() + " --model none",
                {"task.tables[1].dim", "6", "'odd'", "multiple of 4"});
  const auto pool = scratch() / "pool-dim6.json";
  REQUIRE(run("pool --tables 20 --out " + pool.string()).code == 0);
  auto pj = nlohmann::json::parse(slurp(pool));
  pj["tables"][5]["dim"] = 6;
  write(pool, pj.dump());
  check_refused("compare --count 2 --devices 2 --max-dim 8 --pool " + pool.string(),
                {"pool.tables[5].dim", "6", "multiple of 4"});
}

TEST_CASE("collect refuses dims that are not multiples of 4") {
  check_refused("collect compute --out " + (scratch() / "c.jsonl").string() + " --dims 4,6",
                {"dims[1]", "6", "multiple of 4"});
}

namespace {
// Tiny DreamShard training tasks: 3 tasks of 8 dim-16 tables on 2 devices.
fs::path dreamshard_tasks() {
  static const fs::path path = [] {
    const auto p = scratch() / "dreamshard-tasks.json";
    const auto r =
        run("tasks --protocol dreamshard --devices 2 --tables 8 --count 3 --out " + p.string());
    REQUIRE(r.code == 0);
    return p;
  }();
  return path;
}

const std::string tiny_dreamshard =
    " --meter analytic --iterations 2 --collect 3 --cost-steps 4 --cost-batch 8 --rl-steps 2 "
    "--episodes 3 --quiet";
}  // namespace

TEST_CASE("train dreamshard writes a policy that plan --planner dreamshard --policy uses") {
  const auto policy = scratch() / "dreamshard-policy.safetensors";
  const auto checkpoint = scratch() / "dreamshard-checkpoint.safetensors";
  fs::remove(policy);
  const auto r = run("train dreamshard --tasks " + dreamshard_tasks().string() + tiny_dreamshard +
                     " --seed 7 --checkpoint " + checkpoint.string() + " --out " + policy.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("3 tasks") != std::string::npos);
  CHECK(r.out.find("train half of the pool (split seed 0)") != std::string::npos);
  CHECK(r.out.find("communication: the analytic all-to-all model") != std::string::npos);
  CHECK(r.out.find("mean measured ms") != std::string::npos);  // the learning curve table
  CHECK(r.out.find("cost loss") != std::string::npos);
  CHECK(r.out.find("mean RL reward") != std::string::npos);
  REQUIRE(fs::exists(policy));
  REQUIRE(fs::exists(checkpoint));

  // The file's metadata: meter, pool half, communication, hyperparameters, curve.
  const auto md = safetensors_metadata(policy);
  CHECK(md.at("embplan.kind") == "dreamshard_model");
  CHECK(md.at("embplan.meter") == "analytic");
  CHECK(md.at("embplan.pool_half") == "train");
  CHECK(md.at("communication") == "analytic");
  CHECK(md.at("embplan.hp.iterations") == "2");
  CHECK(md.at("embplan.hp.seed") == "7");
  CHECK(md.at("embplan.hp.episodes") == "3");
  CHECK(md.at("embplan.hp.head_init") == "zero");
  const std::string curve = md.at("embplan.learning_curve");
  CHECK(std::count(curve.begin(), curve.end(), ',') == 1);  // one entry per iteration

  // The policy plans a task (on another device count, too) into a valid plan.
  const auto plan = scratch() / "dreamshard-plan.json";
  const auto p = run("plan --task " + small_tasks().string() + " --planner dreamshard --policy " +
                     policy.string() + " --out " + plan.string());
  INFO(p.err);
  REQUIRE(p.code == 0);
  CHECK(p.out.find("planner dreamshard") != std::string::npos);
  CHECK(p.out.find("policy: dreamshard-policy.safetensors") != std::string::npos);
  const auto pj = nlohmann::json::parse(slurp(plan));
  const auto tj = nlohmann::json::parse(slurp(small_tasks()));
  const auto& tables = tj.at("tasks").at(0).at("tables");
  std::set<std::size_t> placed;
  for (const auto& s : pj.at("shards")) {
    placed.insert(s.at("table").get<std::size_t>());
    CHECK(s.at("device").get<std::size_t>() < 4);
  }
  CHECK(placed.size() == tables.size());
  CHECK(pj.at("shards").size() == tables.size());  // table-wise: one shard per table

  // rowwise_dreamshard and compare take it too.
  CHECK(run("plan --task " + small_tasks().string() + " --planner rowwise_dreamshard --policy " +
            policy.string())
            .code == 0);
  const auto c =
      run("compare --devices 4 --max-dim 16 --count 2 --planners random,dreamshard "
          "--quiet --policy " +
          policy.string());
  INFO(c.err);
  CHECK(c.code == 0);
  CHECK(c.out.find("dreamshard policy: dreamshard-policy.safetensors") != std::string::npos);
}

TEST_CASE("train dreamshard on the CPU meter names the communication once") {
  // The CPU meter's text (compare's) names its communication itself; the
  // training line names it once, after the meter.
  const auto policy = scratch() / "dreamshard-cpu-policy.safetensors";
  const auto r = run("train dreamshard --tasks " + dreamshard_tasks().string() +
                     " --meter cpu --iterations 1 --collect 2 --cost-steps 2 --cost-batch 2 "
                     "--rl-steps 1 --episodes 2 --quiet --out " +
                     policy.string());
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto at = r.out.find("meter: cpu, CPU meter");
  REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  std::size_t named = 0;
  for (auto p = line.find("communication"); p != std::string::npos;
       p = line.find("communication", p + 1))
    ++named;
  CHECK(named == 1);
  CHECK(line.ends_with("; communication: the analytic all-to-all model (not measured)"));
}

TEST_CASE("train dreamshard: the same seed gives the same file bytes, another seed another") {
  const auto a = scratch() / "dreamshard-a.safetensors";
  const auto b = scratch() / "dreamshard-b.safetensors";
  const auto c = scratch() / "dreamshard-c.safetensors";
  const std::string common =
      "train dreamshard --tasks " + dreamshard_tasks().string() + tiny_dreamshard + " --out ";
  REQUIRE(run(common + a.string() + " --seed 3").code == 0);
  REQUIRE(run(common + b.string() + " --seed 3").code == 0);
  CHECK(slurp(a) == slurp(b));
  REQUIRE(run(common + c.string() + " --seed 4").code == 0);
  CHECK(slurp(a) != slurp(c));

  // A finished run's checkpoint, resumed: nothing left to train, the same policy.
  const auto ckpt = scratch() / "dreamshard-ckpt.safetensors";
  const auto d = scratch() / "dreamshard-d.safetensors";
  REQUIRE(run(common + b.string() + " --seed 3 --checkpoint " + ckpt.string()).code == 0);
  const auto r = run(common + d.string() + " --seed 3 --resume " + ckpt.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("resumed from") != std::string::npos);
  CHECK(slurp(a) == slurp(d));
  // Other options than the checkpoint's: refused, naming the option.
  check_refused(common + d.string() + " --seed 5 --resume " + ckpt.string(), {"seed", "\"3\""});
}

TEST_CASE("train dreamshard and --policy: bad input names the flag or field and the value") {
  const auto tasks = dreamshard_tasks().string();
  const auto out = (scratch() / "unused.safetensors").string();
  check_refused("train dreamshard --tasks " + tasks + " --iterations 0 --out " + out,
                {"--iterations", "0"});
  check_refused("train dreamshard --tasks " + tasks + " --lr 0 --out " + out, {"--lr", "0"});
  check_refused("train dreamshard --tasks " + tasks + " --episodes -1 --out " + out,
                {"--episodes", "-1"});
  check_refused("train dreamshard --tasks /nonexistent/tasks.json --out " + out,
                {"--tasks", "/nonexistent/tasks.json"});
  check_refused("train dreamshard --tasks " + tasks + " --meter gpu --out " + out,
                {"--meter", "gpu"});
  check_refused("train dreamshard --tasks " + tasks + " --policy-head-init xavier --out " + out,
                {"--policy-head-init", "xavier"});

  // Mixed device counts: one policy per device count.
  const auto two = scratch() / "dreamshard-2dev.json";
  const auto four = scratch() / "dreamshard-4dev.json";
  REQUIRE(run("tasks --protocol dreamshard --devices 2 --tables 8 --count 1 --out " + two.string())
              .code == 0);
  REQUIRE(run("tasks --protocol dreamshard --devices 4 --tables 8 --count 1 --out " + four.string())
              .code == 0);
  auto mixed = nlohmann::json::parse(slurp(two));
  mixed.at("tasks").push_back(nlohmann::json::parse(slurp(four)).at("tasks").at(0));
  const auto mixed_path = scratch() / "dreamshard-mixed.json";
  write(mixed_path, mixed.dump());
  check_refused("train dreamshard --tasks " + mixed_path.string() + " --out " + out,
                {"tasks[1].cluster.size", "4", "tasks[0] (2)"});

  // A dim that is not a multiple of 4.
  auto odd = nlohmann::json::parse(slurp(two));
  odd.at("tasks").at(0).at("tables").at(2)["dim"] = 6;
  const auto odd_path = scratch() / "dreamshard-odd-dim.json";
  write(odd_path, odd.dump());
  check_refused("train dreamshard --tasks " + odd_path.string() + " --out " + out,
                {"tasks[0].tables[2].dim", "6"});

  // A policy file that is a cost model (another architecture), and a missing one.
  const std::string cost_model =
      std::string(EMBPLAN_SOURCE_DIR) + "/data/cost/cpu_compute_model.safetensors";
  check_refused(
      "plan --task " + small_tasks().string() + " --planner dreamshard --policy " + cost_model,
      {"cpu_compute_model.safetensors", "embplan.kind"});
  check_refused("plan --task " + small_tasks().string() +
                    " --planner dreamshard --policy /nonexistent/policy.safetensors",
                {"--policy", "/nonexistent/policy.safetensors"});
}

TEST_CASE("the bundled DreamShard policy plans by default; its metadata says how it was made") {
  const auto bundled =
      fs::path(EMBPLAN_SOURCE_DIR) / "data" / "rl" / "dreamshard_cpu_4dev.safetensors";
  REQUIRE(fs::exists(bundled));
  CHECK(fs::file_size(bundled) < 300 * 1024);
  const auto r = run("plan --task " + small_tasks().string() + " --planner dreamshard");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("policy: bundled dreamshard_cpu_4dev.safetensors") != std::string::npos);
  CHECK(r.out.find("cpu meter") != std::string::npos);
  CHECK(r.out.find("train half of the pool") != std::string::npos);
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
              "--planners random,torchrec --baseline random --json " +
              json.string())
              .code == 0);
  rows = nlohmann::json::parse(slurp(json)).at("settings").at(0).at("planners");
  CHECK(rows.at(0).at("ratio_to_baseline").at("geometric_mean") == 1.0);

  // The measured meter, two interleaved rounds per plan (tiny tasks).
  r = run(
      "compare --devices 2 --max-dim 16 --tables 3 --count 2 --meter measured --rounds 2 --quiet "
      "--planners random,torchrec --json " +
      json.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("measured 2 times, interleaved") != std::string::npos);
  rows = nlohmann::json::parse(slurp(json)).at("settings").at(0).at("planners");
  for (const auto& x : rows.at(0).at("ratio_to_baseline").at("per_task"))
    CHECK(x.get<double>() > 0.0);

  // Bad input.
  check_refused("compare --count 1 --planners random,torchrec --baseline nope", {"nope"});
  check_refused("compare --count 1 --planners random,torchrec --baseline lookup_greedy",
                {"--baseline", "lookup_greedy"});
  check_refused("compare --count 1 --meter analytic --rounds 3", {"--rounds", "3"});
  check_refused("compare --count 1 --meter measured --rounds 0", {"--rounds", "0"});
}

namespace {

// AutoShard protocol tasks from the train half: 3 devices, 12 tables.
fs::path autoshard_tasks() {
  static const fs::path path = [] {
    const auto p = scratch() / "autoshard-tasks.json";
    const auto r =
        run("tasks --protocol autoshard --devices 3 --tables 12 --count 3 --half train "
            "--out " +
            p.string());
    REQUIRE(r.code == 0);
    return p;
  }();
  return path;
}

const std::string tiny_autoshard =
    " --meter analytic --updates 3 --batch 4 --cost-updates 2 --cost-batch 8 --quiet";

}  // namespace

TEST_CASE("train autoshard writes a policy that plan --planner autoshard --autoshard-policy uses") {
  const auto policy = scratch() / "autoshard-policy.safetensors";
  const auto checkpoint = scratch() / "autoshard-checkpoint.safetensors";
  fs::remove(policy);
  const auto r = run("train autoshard --tasks " + autoshard_tasks().string() + tiny_autoshard +
                     " --seed 7 --checkpoint " + checkpoint.string() + " --out " + policy.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("3 tasks") != std::string::npos);
  CHECK(r.out.find("train half of the pool (split seed 0)") != std::string::npos);
  CHECK(r.out.find("IMPALA with V-trace") != std::string::npos);
  CHECK(r.out.find("running balance") != std::string::npos);  // the learning curve table
  CHECK(r.out.find("3 updates (12 episodes, 12 plans measured)") != std::string::npos);
  REQUIRE(fs::exists(policy));
  REQUIRE(fs::exists(checkpoint));

  const auto md = safetensors_metadata(policy);
  CHECK(md.at("embplan.policy") == "autoshard");
  CHECK(md.at("embplan.meter") == "analytic");
  CHECK(md.at("embplan.hp.updates") == "3");
  CHECK(md.at("embplan.hp.updates_done") == "3");
  CHECK(md.at("embplan.hp.batch") == "4");
  CHECK(md.at("embplan.hp.seed") == "7");
  CHECK(md.at("embplan.hp.pool_half") == "train");
  const std::string curve = md.at("embplan.learning_curve");
  CHECK(std::count(curve.begin(), curve.end(), ',') == 2);  // one entry per update

  // The policy plans a task of another device count (any count works).
  const auto plan = scratch() / "autoshard-plan.json";
  const auto p =
      run("plan --task " + small_tasks().string() + " --planner autoshard --autoshard-policy " +
          policy.string() + " --out " + plan.string());
  INFO(p.err);
  REQUIRE(p.code == 0);
  CHECK(p.out.find("planner autoshard") != std::string::npos);
  CHECK(p.out.find("policy: autoshard-policy.safetensors") != std::string::npos);
  const auto pj = nlohmann::json::parse(slurp(plan));
  const auto tj = nlohmann::json::parse(slurp(small_tasks()));
  CHECK(pj.at("shards").size() == tj.at("tasks").at(0).at("tables").size());
  CHECK(run("plan --task " + small_tasks().string() +
            " --planner rowwise_autoshard --autoshard-policy " + policy.string())
            .code == 0);
  const auto c =
      run("compare --protocol autoshard --devices 2 --count 2 --planners random,autoshard --quiet "
          "--autoshard-policy " +
          policy.string());
  INFO(c.err);
  CHECK(c.code == 0);
  CHECK(c.out.find("autoshard policy: autoshard-policy.safetensors") != std::string::npos);
}

TEST_CASE("train autoshard: the same seed gives the same bytes, whatever the actors; resumes") {
  const auto a = scratch() / "autoshard-a.safetensors";
  const auto b = scratch() / "autoshard-b.safetensors";
  const auto c = scratch() / "autoshard-c.safetensors";
  const std::string common =
      "train autoshard --tasks " + autoshard_tasks().string() + tiny_autoshard + " --out ";
  REQUIRE(run(common + a.string() + " --seed 3").code == 0);
  REQUIRE(run(common + b.string() + " --seed 3 --actors 3").code == 0);
  // The files differ only in the "actors" note; the networks are equal.
  auto ma = safetensors_metadata(a);
  auto mb = safetensors_metadata(b);
  CHECK(ma.at("embplan.hp.actors") == "1 threads");
  CHECK(mb.at("embplan.hp.actors") == "3 threads");
  REQUIRE(run(common + c.string() + " --seed 3").code == 0);
  CHECK(slurp(a) == slurp(c));
  const auto d = scratch() / "autoshard-d.safetensors";
  REQUIRE(run(common + d.string() + " --seed 4").code == 0);
  CHECK(slurp(a) != slurp(d));

  // A finished run's checkpoint, resumed: nothing left to train, the same policy.
  const auto ckpt = scratch() / "autoshard-ckpt.safetensors";
  const auto e = scratch() / "autoshard-e.safetensors";
  REQUIRE(run(common + e.string() + " --seed 3 --checkpoint " + ckpt.string()).code == 0);
  const auto r = run(common + e.string() + " --seed 3 --resume " + ckpt.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("resumed from") != std::string::npos);
  CHECK(slurp(a) == slurp(e));
  check_refused(common + e.string() + " --seed 5 --resume " + ckpt.string(), {"seed", "\"3\""});
}

TEST_CASE("train autoshard and --autoshard-policy: bad input names the flag or field and value") {
  const auto tasks = autoshard_tasks().string();
  const auto out = (scratch() / "unused.safetensors").string();
  check_refused("train autoshard --tasks " + tasks + " --updates 0 --out " + out,
                {"--updates", "0"});
  check_refused("train autoshard --tasks " + tasks + " --lr 0 --out " + out, {"--lr", "0"});
  check_refused("train autoshard --tasks " + tasks + " --batch 0 --out " + out, {"--batch", "0"});
  check_refused("train autoshard --tasks " + tasks + " --policy-lag -1 --out " + out,
                {"--policy-lag", "-1"});
  check_refused("train autoshard --tasks " + tasks + " --meter gpu --out " + out,
                {"--meter", "gpu"});
  check_refused("train autoshard --out " + out, {"--tasks", "(none)"});
  check_refused("train autoshard --tasks /nonexistent/tasks.json --out " + out,
                {"--tasks", "/nonexistent/tasks.json"});
  check_refused("train autoshard --tasks " + tasks + " --resume /nonexistent/ck --out " + out,
                {"--resume", "/nonexistent/ck"});
  // A DreamShard policy where an AutoShard one is expected, and a missing file.
  const std::string dreamshard =
      std::string(EMBPLAN_SOURCE_DIR) + "/data/rl/dreamshard_cpu_4dev.safetensors";
  check_refused("plan --task " + small_tasks().string() +
                    " --planner autoshard --autoshard-policy " + dreamshard,
                {"dreamshard_cpu_4dev.safetensors: metadata.embplan.policy", "\"dreamshard\""});
  check_refused("plan --task " + small_tasks().string() +
                    " --planner autoshard --autoshard-policy /nonexistent/p.safetensors",
                {"--autoshard-policy", "/nonexistent/p.safetensors"});
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
          "random,torchrec --unseen-share 0.25 --quiet");
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

TEST_CASE("plan --constraints: the rules are honoured, said, and bad ones named") {
  const auto task = scratch() / "constrained-task.json";
  write(task, R"({"name": "constrained",
                  "tables": [{"name": "a", "rows": 1000, "dim": 16, "pooling_factor": 2},
                             {"name": "b", "rows": 1000, "dim": 16, "pooling_factor": 2},
                             {"name": "c", "rows": 1000, "dim": 16, "pooling_factor": 2},
                             {"name": "d", "rows": 1000, "dim": 16, "pooling_factor": 2}],
                  "cluster": {"count": 4, "device": {"memory_gib": 1}}})");
  const auto rules = scratch() / "constraints.json";
  write(rules, R"({"tables": {"a": {"devices": [2]}, "b": {"sharding": ["table_wise"]}},
                   "colocate": [["a", "b"]],
                   "separate": [["c", "d"]]})");
  const auto report = scratch() / "constrained-report.json";
  for (const char* planner : {"lookup_greedy", "neuroshard_plus", "torchrec", "neuroshard_ls"}) {
    CAPTURE(planner);
    const auto r = run("plan --task " + task.string() + " --planner " + planner +
                       " --constraints " + rules.string() + " --json " + report.string());
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("constraints: user constraints (2 table rules, 1 co-location group, 1 "
                     "anti-affinity group) from " +
                     rules.string() + ", applied and the plan re-checked against them") !=
          std::string::npos);
    const auto j = nlohmann::json::parse(slurp(report));
    CHECK(j.at("constraints").at("file") == rules.string());
    std::map<std::string, std::set<std::size_t>> where;
    for (const auto& piece : j.at("tables"))
      where[piece.at("name").get<std::string>()].insert(piece.at("device").get<std::size_t>());
    CHECK(where["a"] == std::set<std::size_t>{2});
    CHECK(where["b"] == std::set<std::size_t>{2});
    for (const auto d : where["c"])
      CHECK(where["d"].count(d) == 0);
  }

  const auto refused = [&](const std::string& text, const std::string& expected) {
    write(rules, text);
    const auto r = run("plan --task " + task.string() + " --constraints " + rules.string());
    CAPTURE(text);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find(expected) != std::string::npos);
  };
  refused(R"({"tables": {"e": {"devices": [0]}}})",
          "field 'constraints.tables.e' = \"e\": expected the name of a table of task "
          "'constrained' or \"#<index>\"");
  refused(R"({"tables": {"a": {"devices": [4]}}})",
          "field 'constraints.tables.a.devices[0]' = 4: expected a device index below 4");
  refused(R"({"tables": {"a": {"devices": [0]}, "b": {"devices": [1]}}, "colocate": [["a", "b"]]})",
          "field 'constraints.colocate[0]' = \"a, b\": expected tables that can share a device");
  refused(R"({"colocate": [["a", "b"]], "separate": [["a", "b"]]})",
          "field 'constraints.separate[0]' = \"a, b\": expected tables not also co-located");
  refused(R"({"tables": {"a": {"pin": 0}}})", "field 'constraints.tables.a.pin' = 0");

  // An infeasible pin names the rule and the table, in GiB: two tables of
  // 0.715 GiB pinned to one device of 1 GiB.
  const auto two_big = scratch() / "two-big.json";
  write(two_big, R"({"name": "two-big",
                     "tables": [{"name": "big1", "rows": 3000000, "dim": 64, "pooling_factor": 2},
                                {"name": "big2", "rows": 3000000, "dim": 64, "pooling_factor": 2}],
                     "cluster": {"count": 4, "device": {"memory_gib": 1}}})");
  write(rules, R"({"tables": {"big1": {"devices": [3]}, "big2": {"devices": [3]}}})");
  const auto r = run("plan --task " + two_big.string() + " --planner lookup_greedy --constraints " +
                     rules.string());
  CHECK(r.code == 2);
  CHECK(r.err.find("): pinned to device 3, but device 3 has 0.285 GiB free and the table needs "
                   "0.715 GiB") != std::string::npos);
}

TEST_CASE("plan --constraints with dtype: the task is planned and checked at the rule's dtype") {
  // Two tables of 0.715 GiB in fp32, both pinned to device 3 of 1 GiB: they
  // fit only as fp16 (0.358 GiB each).
  const auto task = scratch() / "dtype-task.json";
  write(task, R"({"name": "dtype",
                  "tables": [{"name": "big1", "rows": 3000000, "dim": 64, "pooling_factor": 2},
                             {"name": "big2", "rows": 3000000, "dim": 64, "pooling_factor": 2}],
                  "cluster": {"count": 4, "device": {"memory_gib": 1}}})");
  const auto rules = scratch() / "dtype-constraints.json";
  write(rules, R"({"tables": {"big1": {"devices": [3], "dtype": "fp16"},
                              "big2": {"devices": [3], "dtype": "fp16"}}})");
  const auto plan = scratch() / "dtype-plan.json";
  const auto r = run("plan --task " + task.string() + " --planner lookup_greedy --constraints " +
                     rules.string() + " --out " + plan.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto c = run("plan --check " + plan.string() + " --task " + task.string() + " --constraints " +
               rules.string());
  INFO(c.out, c.err);
  CHECK(c.code == 0);
  CHECK(c.out.find("plan OK") != std::string::npos);
  // Without the file the task is fp32: device 3 over its memory, another hash.
  c = run("plan --check " + plan.string() + " --task " + task.string());
  CHECK(c.code == 3);
  CHECK(c.out.find("device 3") != std::string::npos);
  CHECK(c.out.find("content hash") != std::string::npos);
  write(rules, R"({"tables": {"big1": {"dtype": "fp8"}}})");
  const auto bad = run("plan --task " + task.string() + " --constraints " + rules.string());
  CHECK(bad.code == 2);
  CHECK(bad.err.find("field 'constraints.tables.big1.dtype' = \"fp8\": expected one of") !=
        std::string::npos);
}

TEST_CASE("plan records its content hash and version; plan --check re-validates it, exit codes") {
  const auto task_text = [](const std::string& pooling_d) {
    return R"({"name": "checked",
               "tables": [{"name": "a", "rows": 3000000, "dim": 64, "pooling_factor": 2},
                          {"name": "b", "rows": 3000000, "dim": 64, "pooling_factor": 2},
                          {"name": "c", "rows": 1000, "dim": 16, "pooling_factor": 2},
                          {"name": "d", "rows": 1000, "dim": 16, "pooling_factor": )" +
           pooling_d + R"(}],
               "cluster": {"count": 4, "device": {"memory_gib": 1}}})";
  };
  const auto task = scratch() / "check-task.json";
  write(task, task_text("2"));
  const auto plan = scratch() / "check-plan.json";
  const auto report = scratch() / "check-report.json";
  auto r = run("plan --task " + task.string() + " --planner lookup_greedy --seed 3 --out " +
               plan.string() + " --json " + report.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto pj = nlohmann::json::parse(slurp(plan));
  const auto hash = embplan::hash_hex(embplan::content_hash(
      embplan::io::task_from_json(nlohmann::json::parse(task_text("2"))), "lookup_greedy", 3));
  CHECK(pj.at("planner") == "lookup_greedy");
  CHECK(pj.at("seed") == 3);
  CHECK(pj.at("content_hash") == hash);
  CHECK(pj.at("embplan_version") == EMBPLAN_VERSION_STRING);
  CHECK(r.out.find("seed 3\ncontent hash: " + hash + " of (task, planner, seed), embplan " +
                   EMBPLAN_VERSION_STRING) != std::string::npos);
  const auto rj = nlohmann::json::parse(slurp(report));
  CHECK(rj.at("content_hash") == hash);
  CHECK(rj.at("seed") == 3);
  CHECK(rj.at("embplan_version") == EMBPLAN_VERSION_STRING);
  CHECK(rj.at("plan") == pj);
  // A second run: the same hash.
  const auto again = scratch() / "check-plan-again.json";
  REQUIRE(run("plan --task " + task.string() + " --planner lookup_greedy --seed 3 --out " +
              again.string())
              .code == 0);
  CHECK(nlohmann::json::parse(slurp(again)).at("content_hash") == hash);

  // The plan file and the --json report both check OK.
  for (const auto& file : {plan, report}) {
    r = run("plan --check " + file.string() + " --task " + task.string());
    INFO(r.out, r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("content hash: recorded " + hash + ", recomputed " + hash +
                     " from the task, planner lookup_greedy and seed 3: match") !=
          std::string::npos);
    CHECK(r.out.find("plan OK") != std::string::npos);
  }

  // The index in the plan of table `name`'s shard, and its device.
  const auto shard_of = [&](const std::string& name) {
    const auto& shards = pj.at("shards");
    for (std::size_t i = 0; i < shards.size(); ++i)
      if (shards[i].at("table_name") == name) return i;
    FAIL("no shard of " << name);
    return std::size_t{0};
  };
  const auto device_of = [&](const std::string& name) {
    return pj.at("shards")[shard_of(name)].at("device").get<std::size_t>();
  };
  const auto tampered = scratch() / "check-tampered.json";
  const auto rejected = [&](const nlohmann::json& j, const std::string& expected,
                            const std::string& extra = "") {
    write(tampered, j.dump());
    const auto x = run("plan --check " + tampered.string() + " --task " + task.string() + extra);
    CAPTURE(expected);
    INFO(x.out, x.err);
    CHECK(x.code == 3);
    CHECK(x.out.find(expected) != std::string::npos);
    CHECK(x.out.find("plan OK") == std::string::npos);
  };

  auto j = pj;
  j["shards"].erase(shard_of("a"));
  rejected(j,
           "1 problem:\n  table 0 'a': field 'tables[0]' = \"a\": expected a table covered "
           "by at least one shard");

  j = pj;
  j["shards"][shard_of("b")]["device"] = device_of("a");  // 2 x 768,000,000 bytes on one device
  rejected(j, "'cuda:" + std::to_string(device_of("a")) + "': field 'devices[" +
                  std::to_string(device_of("a")) +
                  "].memory_bytes' = 1536000000: expected at most the capacity 1073741824");

  j = pj;
  j["shards"][shard_of("c")]["device"] = 9;
  rejected(j, "table 2 'c': field 'shards[" + std::to_string(shard_of("c")) +
                  "].device' = 9: expected a device index below 4");

  j = pj;
  j["shards"][shard_of("d")]["columns"] = {0, 6};
  rejected(j, "table 3 'd': field 'shards[" + std::to_string(shard_of("d")) +
                  "].columns' = 6: expected a multiple of 4");

  const auto rules = scratch() / "check-constraints.json";
  const auto elsewhere = (device_of("c") + 1) % 4;
  write(rules, R"({"tables": {"c": {"devices": [)" + std::to_string(elsewhere) + "]}}}");
  rejected(pj,
           "table 2 'c': field 'shards[" + std::to_string(shard_of("c")) +
               "]' = \"table 2 'c' columns [0, 16) rows [0, 1000) on device " +
               std::to_string(device_of("c")) + "\": expected a placement that user constraints",
           " --constraints " + rules.string());
  write(rules, R"({"tables": {"c": {"devices": [)" + std::to_string(device_of("c")) + "]}}}");
  r = run("plan --check " + plan.string() + " --task " + task.string() + " --constraints " +
          rules.string());
  CHECK(r.code == 0);
  CHECK(r.out.find("from " + rules.string()) != std::string::npos);

  // Another task (one table's pooling factor): the hash says so.
  const auto changed = scratch() / "check-task-changed.json";
  write(changed, task_text("3"));
  r = run("plan --check " + plan.string() + " --task " + changed.string());
  CHECK(r.code == 3);
  CHECK(r.out.find("content hash: recorded " + hash) != std::string::npos);
  CHECK(r.out.find(": DIFFERENT (this task, planner or seed is not the one planned)") !=
        std::string::npos);
  CHECK(r.out.find("1 problem:\n  content hash differs") != std::string::npos);
  // Another seed recorded: the hash differs as well.
  j = pj;
  j["seed"] = 4;
  rejected(j, "content hash differs");

  // Another version: said, not a problem.
  j = pj;
  j["embplan_version"] = "0.0.1";
  write(tampered, j.dump());
  r = run("plan --check " + tampered.string() + " --task " + task.string());
  CHECK(r.code == 0);
  CHECK(r.out.find(std::string("embplan version: planned by 0.0.1, checked by ") +
                   EMBPLAN_VERSION_STRING + " (differ") != std::string::npos);
  // No provenance: said, the rest still checked.
  j = pj;
  for (const char* key : {"planner", "seed", "content_hash", "embplan_version"})
    j.erase(key);
  write(tampered, j.dump());
  r = run("plan --check " + tampered.string() + " --task " + task.string());
  CHECK(r.code == 0);
  CHECK(r.out.find("content hash: none recorded") != std::string::npos);

  // Bad input: exit 2, one line naming the file and the field.
  const auto bad = [&](const std::string& args, const std::string& expected) {
    const auto x = run("plan --task " + task.string() + " " + args);
    CAPTURE(args);
    INFO(x.err);
    CHECK(x.code == 2);
    CHECK(lines(x.err) == 1);
    CHECK(x.err.find(expected) != std::string::npos);
  };
  const auto missing = scratch() / "no-such-plan.json";
  bad("--check " + missing.string(), missing.string());
  j = pj;
  j["content_hash"] = "xyz";
  write(tampered, j.dump());
  bad("--check " + tampered.string(),
      tampered.string() + ": field 'plan.content_hash' = \"xyz\": expected 16 hex digits");
  j = pj;
  j.erase("seed");
  write(tampered, j.dump());
  bad("--check " + tampered.string(), tampered.string() + ": field 'plan.seed' is missing");
  j = pj;
  j["shards"][0]["device"] = "cuda:7";
  write(tampered, j.dump());
  bad("--check " + tampered.string(),
      tampered.string() + ": field 'shards[0].device' = \"cuda:7\": expected the name of a device");
  bad("--check " + plan.string() + " --planner size_greedy",
      "field '--planner' = \"given\": expected no --planner with --check");
}

TEST_CASE("plan prints the plan report: memory, critical path, imbalance, costliest pieces") {
  const auto json = scratch() / "plan-report-sections.json";
  auto r = run("plan --task " + small_tasks().string() + " --planner lookup_greedy --json " +
               json.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (const char* text : {"HBM used", "HBM free", "DRAM", "sharding", "table_wise",
                           "critical path: ", "-bound", "imbalance", "max/mean", "CV", "compute ms",
                           "what drives ", "costliest of", "tables split into pieces: "}) {
    CAPTURE(text);
    CHECK(r.out.find(text) != std::string::npos);
  }
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& devices = j.at("devices");
  // The device that finishes last, and the one that starts the forward
  // all-to-all last (the bottleneck: compute + backward comm).
  std::size_t worst = 0;
  std::size_t last_start = 0;
  const auto start = [&](std::size_t d) {
    const auto& x = devices[d];
    return x.at("fwd_compute_ms").get<double>() + x.at("bwd_compute_ms").get<double>() +
           x.at("bwd_comm_ms").get<double>();
  };
  for (std::size_t d = 0; d < devices.size(); ++d) {
    if (start(d) > start(last_start)) last_start = d;
    CHECK(devices[d].at("hbm_used_bytes").get<std::uint64_t>() +
              devices[d].at("hbm_free_bytes").get<std::uint64_t>() ==
          devices[d].at("hbm_capacity_bytes").get<std::uint64_t>());
    CHECK(devices[d].at("dram_used_bytes") == 0);
    if (devices[d].at("total_ms").get<double>() > devices[worst].at("total_ms").get<double>())
      worst = d;
  }
  const auto& report = j.at("report");
  const auto& path = report.at("critical_path");
  CHECK(path.at("last_to_finish") == worst);
  CHECK(path.at("bottleneck") == last_start);
  CHECK(path.at("bottleneck_start_ms").get<double>() == start(last_start));
  CHECK(path.at("cost_ms").get<double>() == j.at("cost_ms").get<double>());
  const auto bottleneck = path.at("bottleneck_name").get<std::string>();
  CHECK(r.out.find("critical path: " + bottleneck) != std::string::npos);
  CHECK(r.out.find("what drives " + bottleneck + ": ") != std::string::npos);
  // At most five pieces, all on the bottleneck device, costliest first.
  const auto& top = report.at("bottleneck_pieces");
  CHECK(!top.empty());
  CHECK(top.size() <= 5);
  for (std::size_t i = 0; i < top.size(); ++i) {
    CHECK(top[i].at("device") == last_start);
    if (i > 0) CHECK(top[i - 1].at("cost_ms").get<double>() >= top[i].at("cost_ms").get<double>());
  }
  for (const char* what : {"total_ms", "compute_ms", "hbm_used_bytes"}) {
    const auto& x = report.at("imbalance").at(what);
    CHECK(x.at("max_over_mean").get<double>() >= 1.0);
    CHECK(x.at("cv").get<double>() >= 0.0);
  }
  CHECK(report.at("imbalance").at("total_ms").at("max").get<double>() ==
        j.at("cost_ms").get<double>());
  const auto task = nlohmann::json::parse(slurp(small_tasks())).at("tasks").at(0);
  REQUIRE(report.at("tables").size() == task.at("tables").size());
  for (const auto& table : report.at("tables")) {
    CHECK(table.at("sharding") == "table_wise");  // lookup_greedy places whole tables
    CHECK(table.at("devices").size() == 1);
    CHECK(table.at("cost_ms").get<double>() > 0.0);
  }

  // --no-report: the per-piece and per-device tables only; --json the same.
  const auto quiet_json = scratch() / "plan-report-quiet.json";
  const auto quiet = run("plan --task " + small_tasks().string() +
                         " --planner lookup_greedy --no-report --json " + quiet_json.string());
  REQUIRE(quiet.code == 0);
  CHECK(quiet.out.find("HBM used") != std::string::npos);
  CHECK(quiet.out.find("critical path") == std::string::npos);
  CHECK(quiet.out.find("what drives") == std::string::npos);
  CHECK(nlohmann::json::parse(slurp(quiet_json)).at("report") == report);

  // A table split by rows is listed with its sharding and devices.
  const auto big = rowwise_task("report-rowwise.json");
  r = run("plan --task " + big.string() + " --planner rowwise_lookup_greedy --json " +
          json.string());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("tables split into pieces: 1 of 2") != std::string::npos);
  const auto split = nlohmann::json::parse(slurp(json)).at("report").at("tables").at(0);
  CHECK(split.at("name") == "huge");
  CHECK(split.at("sharding") == "row_wise");
  CHECK(split.at("pieces").get<std::size_t>() >= 2);
  CHECK(split.at("devices").size() >= 2);
  CHECK(r.out.find("row_wise") != std::string::npos);
  // --no-report is a planning flag: --check refuses it.
  r = run("plan --check " + json.string() + " --task " + big.string() + " --no-report");
  CHECK(r.code == 2);
  CHECK(r.err.find("'--no-report'") != std::string::npos);
}

TEST_CASE("plan --tiers auto: a task too big for HBM plans with tables moved off it, and checks") {
  // Four tables of 0.715 GiB on two devices of 1 GiB: 2.86 GiB of tables for 2 GiB of HBM.
  // a and b are read skewed (half their unique rows 33-64 times a batch), c and d uniformly.
  const auto task = scratch() / "tiers-task.json";
  write(task, R"({"name": "tiers",
                  "tables": [{"name": "a", "rows": 3000000, "dim": 64, "pooling_factor": 20,
                              "reuse_hist": [0.5,0,0,0,0,0,0.5,0,0,0,0,0,0,0,0,0,0]},
                             {"name": "b", "rows": 3000000, "dim": 64, "pooling_factor": 10,
                              "reuse_hist": [0.5,0,0,0,0,0,0.5,0,0,0,0,0,0,0,0,0,0]},
                             {"name": "c", "rows": 3000000, "dim": 64, "pooling_factor": 2},
                             {"name": "d", "rows": 3000000, "dim": 64, "pooling_factor": 1}],
                  "cluster": {"count": 2, "device": {"memory_gib": 1}}})");
  for (const char* planner : {"lookup_greedy", "neuroshard_plus"}) {
    CAPTURE(planner);
    const std::string common =
        " --task " + task.string() + " --planner " + std::string(planner) + " --model none";
    const auto none = run("plan" + common);
    CHECK(none.code != 0);
    const auto plan = scratch() / ("tiers-plan-" + std::string(planner) + ".json");
    const auto report = scratch() / ("tiers-report-" + std::string(planner) + ".json");
    const auto r = run("plan" + common + " --tiers auto --out " + plan.string() + " --json " +
                       report.string());
    INFO(r.out, r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("tiers: auto moved") != std::string::npos);
    const auto j = nlohmann::json::parse(slurp(report));
    REQUIRE(!j.at("tier_moves").empty());
    std::uint64_t dram = 0;
    for (const auto& d : j.at("devices"))
      dram += d.at("dram_used_bytes").get<std::uint64_t>();
    CHECK(dram > 0);
    auto c = run("plan --check " + plan.string() + " --task " + task.string() + " --tiers auto");
    INFO(c.out, c.err);
    CHECK(c.code == 0);
    CHECK(c.out.find("plan OK") != std::string::npos);
    // Without --tiers auto the tables are in HBM again: over memory, another hash.
    c = run("plan --check " + plan.string() + " --task " + task.string());
    CHECK(c.code == 3);
  }
  // A learned model refuses a table off hbm, naming it.
  const auto learned =
      run("plan --task " + task.string() + " --planner lookup_greedy --tiers auto");
  CHECK(learned.code != 0);
  CHECK(learned.err.find(".tier' = \"") != std::string::npos);
  // --tiers takes none or auto.
  CHECK(run("plan --task " + task.string() + " --tiers some").code != 0);
}

TEST_CASE("plan --row-layout: a split table inside one host or spread, named and priced so") {
  // 16 devices of 1 GiB in hosts of 8 with NVLink-class links inside; 'big'
  // (3,000,000 x 128 fp32, 1.4 GiB) fits no device.
  const auto task = scratch() / "layout-task.json";
  std::string tables = R"([{"name": "big", "rows": 3000000, "dim": 128, "pooling_factor": 20}])";
  for (int i = 0; i < 12; ++i) {
    tables.pop_back();
    tables += ", {\"name\": \"t" + std::to_string(i) +
              "\", \"rows\": 50000, \"dim\": 64, \"pooling_factor\": 10}]";
  }
  write(task, R"({"name": "layout", "batch_size": 65536, "cluster": {"count": 16, )"
              R"("devices_per_host": 8, "intra_host_bandwidth_gbps": 150, )"
              R"("inter_host_bandwidth_gbps": 12.5, "device": {"memory_gib": 1}}, "tables": )" +
                  tables + "}");
  const std::string common =
      " --task " + task.string() + " --planner rowwise_torchrec --model none --json ";
  const auto sharding_of_big = [](const nlohmann::json& j) {
    for (const auto& row : j.at("tables"))
      if (row.at("name") == "big") return row.at("sharding").get<std::string>();
    return std::string("missing");
  };
  std::map<std::string, nlohmann::json> out;
  std::map<std::string, std::string> text;
  for (const std::string layout : {"by_cost", "host_first", "row_wise"}) {
    CAPTURE(layout);
    const auto json = scratch() / ("layout-" + layout + ".json");
    const auto r = run("plan" + common + json.string() + " --row-layout " + layout);
    INFO(r.out, r.err);
    REQUIRE(r.code == 0);
    out[layout] = nlohmann::json::parse(slurp(json));
    text[layout] = r.out;
  }
  // Reduced inside its host, 'big' sends fewer columns than its pieces hold:
  // the report shows both; spread, it sends them all (no "sent dim" column).
  const auto columns = [](const nlohmann::json& j, const char* key) {
    std::int64_t sum = 0;
    for (const auto& d : j.at("devices"))
      sum += d.at(key).get<std::int64_t>();
    return sum;
  };
  CHECK(columns(out["by_cost"], "sent_dim") < columns(out["by_cost"], "dim"));
  CHECK(columns(out["row_wise"], "sent_dim") == columns(out["row_wise"], "dim"));
  CHECK(text["by_cost"].find("sent dim") != std::string::npos);
  CHECK(text["row_wise"].find("sent dim") == std::string::npos);
  CHECK(sharding_of_big(out["host_first"]) == "table_row_wise");
  CHECK(sharding_of_big(out["by_cost"]) == "table_row_wise");
  CHECK(sharding_of_big(out["row_wise"]) == "row_wise");
  CHECK(out["by_cost"].at("cost_ms").get<double>() < out["row_wise"].at("cost_ms").get<double>());
  // A layout other than the default is part of the planner's name (and hash).
  CHECK(out["by_cost"].at("planner") == "rowwise_torchrec");
  CHECK(out["row_wise"].at("planner") == "rowwise_torchrec+row_layout=row_wise");
  // Bad input names the flag and the value.
  const auto bad =
      run("plan" + common + (scratch() / "layout-bad.json").string() + " --row-layout spread");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("'--row-layout' = \"spread\"") != std::string::npos);
  CHECK(bad.err.find("one of by_cost, row_wise, host_first") != std::string::npos);
}

TEST_CASE("plan --data-parallel auto: small tables copied to every device, checked and exported") {
  // Four devices; s0-s2 have 64 rows (cheaper as copies than in the all-to-all), big0-big7
  // 400,000 rows (their gradients would take longer to all-reduce than their columns to send).
  const auto task = scratch() / "dp-task.json";
  std::string tables = R"([{"name": "s0", "rows": 64, "dim": 32, "pooling_factor": 20},
                           {"name": "s1", "rows": 64, "dim": 16, "pooling_factor": 20},
                           {"name": "s2", "rows": 64, "dim": 32, "pooling_factor": 5}])";
  for (int i = 0; i < 8; ++i) {
    tables.pop_back();
    tables += ", {\"name\": \"big" + std::to_string(i) +
              "\", \"rows\": 400000, \"dim\": 32, \"pooling_factor\": 4}]";
  }
  write(task, R"({"name": "dp", "cluster": {"count": 4}, "tables": )" + tables + "}");
  const auto plan = scratch() / "dp-plan.json";
  const auto report = scratch() / "dp-report.json";
  const auto tr = scratch() / "dp-torchrec.json";
  const std::string common = " --task " + task.string() + " --planner torchrec --model none";
  const auto r = run("plan" + common + " --data-parallel auto --out " + plan.string() + " --json " +
                     report.string() + " --torchrec " + tr.string());
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("planner torchrec+data_parallel") != std::string::npos);
  CHECK(r.out.find("data-parallel copy") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(report));
  CHECK(j.at("planner") == "torchrec+data_parallel");
  std::map<std::string, std::size_t> copies;
  for (const auto& row : j.at("tables"))
    if (row.at("sharding") == "data_parallel") ++copies[row.at("name").get<std::string>()];
  // Only small tables are replicated, each on all four devices.
  REQUIRE_FALSE(copies.empty());
  for (const auto& [name, count] : copies) {
    CHECK(name.starts_with("s"));
    CHECK(count == 4);
  }
  const auto exported = nlohmann::json::parse(slurp(tr));
  CHECK(exported.at(copies.begin()->first).at("sharding_type") == "data_parallel");
  CHECK(exported.at("big0").at("sharding_type") != "data_parallel");
  // Cheaper than the same planner without copies, under the same meter.
  const auto plain = run("plan" + common + " --json " + (scratch() / "dp-plain.json").string());
  REQUIRE(plain.code == 0);
  const auto p = nlohmann::json::parse(slurp(scratch() / "dp-plain.json"));
  CHECK(j.at("cost_ms").get<double>() < p.at("cost_ms").get<double>());
  // The plan checks, hash included; --data-parallel is a planning flag.
  auto c = run("plan --check " + plan.string() + " --task " + task.string());
  INFO(c.out, c.err);
  CHECK(c.code == 0);
  CHECK(c.out.find("content hash: recorded") != std::string::npos);
  CHECK(c.out.find("match") != std::string::npos);
  c = run("plan --check " + plan.string() + " --task " + task.string() + " --data-parallel auto");
  CHECK(c.code == 2);
  CHECK(c.err.find("'--data-parallel'") != std::string::npos);
  // A copy taken away: --check names the table and the device without one.
  auto broken = nlohmann::json::parse(slurp(plan));
  auto& shards = broken.at("shards");
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].value("data_parallel", false)) {
      shards.erase(i);
      break;
    }
  }
  const auto bad = scratch() / "dp-broken.json";
  write(bad, broken.dump());
  c = run("plan --check " + bad.string() + " --task " + task.string());
  CHECK(c.code == 3);
  CHECK(c.out.find("expected one data-parallel copy on every device, but device") !=
        std::string::npos);
  // --data-parallel takes none or auto, in plan and in compare.
  c = run("plan" + common + " --data-parallel some");
  CHECK(c.code == 2);
  CHECK(c.err.find("'--data-parallel' = \"some\"") != std::string::npos);
  c = run("compare --count 1 --devices 4 --max-dim 16 --planners torchrec --data-parallel x");
  CHECK(c.code == 2);
  c =
      run("compare --count 2 --devices 4 --max-dim 16 --planners torchrec,neuroshard_plus "
          "--model none --data-parallel auto");
  INFO(c.out, c.err);
  CHECK(c.code == 0);
  CHECK(c.out.find("data-parallel: auto") != std::string::npos);
}

TEST_CASE("plan --rows-by-cost auto: a narrow table of many lookups cut by rows, cheaper") {
  // Four devices; "clicks" (dim 4: no column split) has 50x the lookups of
  // each of the twelve others, so placed whole it makes its device the
  // bottleneck.
  const auto task = scratch() / "rbc-task.json";
  std::string tables = R"([{"name": "clicks", "rows": 50000, "dim": 4, "pooling_factor": 400}])";
  for (int i = 0; i < 12; ++i) {
    tables.pop_back();
    tables += ", {\"name\": \"t" + std::to_string(i) +
              "\", \"rows\": 20000, \"dim\": 16, \"pooling_factor\": 8}]";
  }
  write(task, R"({"name": "rbc", "cluster": {"count": 4}, "tables": )" + tables + "}");
  const auto plan = scratch() / "rbc-plan.json";
  const std::string common = " --task " + task.string() + " --planner neuroshard_ls --model none";
  const auto r = run("plan" + common + " --rows-by-cost auto --out " + plan.string() + " --json " +
                     (scratch() / "rbc-report.json").string());
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(slurp(scratch() / "rbc-report.json"));
  CHECK(j.at("planner") == "neuroshard_ls+rows_by_cost");
  std::string clicks;
  for (const auto& row : j.at("tables"))
    if (row.at("name") == "clicks") clicks = row.at("sharding").get<std::string>();
  CHECK(clicks == "row_wise");
  const auto plain = run("plan" + common + " --json " + (scratch() / "rbc-plain.json").string());
  REQUIRE(plain.code == 0);
  const auto p = nlohmann::json::parse(slurp(scratch() / "rbc-plain.json"));
  CHECK(j.at("cost_ms").get<double>() < 0.9 * p.at("cost_ms").get<double>());
  // The plan checks; --rows-by-cost is a planning flag.
  auto c = run("plan --check " + plan.string() + " --task " + task.string());
  INFO(c.out, c.err);
  CHECK(c.code == 0);
  c = run("plan --check " + plan.string() + " --task " + task.string() + " --rows-by-cost auto");
  CHECK(c.code == 2);
  CHECK(c.err.find("'--rows-by-cost'") != std::string::npos);
  // --rows-by-cost takes none or auto, in plan and in compare.
  c = run("plan" + common + " --rows-by-cost yes");
  CHECK(c.code == 2);
  CHECK(c.err.find("'--rows-by-cost' = \"yes\"") != std::string::npos);
  c = run("compare --count 1 --devices 4 --max-dim 16 --planners torchrec --rows-by-cost 1");
  CHECK(c.code == 2);
  CHECK(c.err.find("'--rows-by-cost' = \"1\"") != std::string::npos);
  c =
      run("compare --count 2 --devices 4 --max-dim 16 --planners torchrec --model none "
          "--rows-by-cost auto");
  CHECK(c.code == 0);
  CHECK(c.out.find("rows by cost: auto") != std::string::npos);
}

TEST_CASE("plan --planner portfolio says which member's plan it kept") {
  const auto task = scratch() / "pf-task.json";
  std::string tables = "[]";
  for (int i = 0; i < 10; ++i) {
    tables.pop_back();
    tables += std::string(i == 0 ? "" : ", ") + "{\"name\": \"t" + std::to_string(i) +
              "\", \"rows\": " + std::to_string(10000 * (i + 1)) +
              ", \"dim\": " + std::to_string(16 * (1 + i % 4)) + ", \"pooling_factor\": 8}]";
  }
  write(task, R"({"name": "pf", "cluster": {"count": 4}, "tables": )" + tables + "}");
  const std::string common = " --task " + task.string() + " --model none --json ";
  const auto r = run("plan --planner portfolio" + common + (scratch() / "pf-report.json").string());
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(slurp(scratch() / "pf-report.json"));
  const auto member = j.at("made_by").get<std::string>();
  CHECK((member == "#1 local_search(column_beam)" || member == "#2 torchrec_like"));
  CHECK(r.out.find("plan by portfolio member " + member + "\n") != std::string::npos);
  // Its plan is that member's own.
  const auto alone =
      run(std::string("plan --planner ") + (member[1] == '1' ? "neuroshard_ls" : "torchrec") +
          common + (scratch() / "pf-alone.json").string());
  REQUIRE(alone.code == 0);
  const auto a = nlohmann::json::parse(slurp(scratch() / "pf-alone.json"));
  CHECK(a.at("cost_ms").get<double>() == j.at("cost_ms").get<double>());
  // A planner that is no portfolio says nothing of members.
  CHECK_FALSE(a.contains("made_by"));
  CHECK(alone.out.find("portfolio member") == std::string::npos);
  // compare counts the portfolio's plans by member, per setting.
  const auto c =
      run("compare --count 3 --devices 4 --max-dim 16 --planners portfolio,torchrec --model none "
          "--json " +
          (scratch() / "pf-compare.json").string());
  INFO(c.out, c.err);
  REQUIRE(c.code == 0);
  CHECK(c.out.find("portfolio's plans by member: #") != std::string::npos);
  CHECK(c.out.find("torchrec's plans by member") == std::string::npos);
  const auto cj = nlohmann::json::parse(slurp(scratch() / "pf-compare.json"));
  const auto& rows = cj.at("settings").at(0).at("planners");
  std::size_t counted = 0;
  for (const auto& [member, count] : rows.at(0).at("made_by").items()) {
    CHECK(member.starts_with("#"));
    counted += count.get<std::size_t>();
  }
  CHECK(counted == 3);
  CHECK_FALSE(rows.at(1).contains("made_by"));
}
