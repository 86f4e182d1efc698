// End-to-end tests of `embplan collect`: compute and communication records as
// JSON lines, resumable, scaled to a drift reference, and under mpirun -np 2
// where embplan is built with MPI; bad input named.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

TEST_CASE("collect compute: JSON lines, resumable") {
  const auto out = scratch() / "compute.jsonl";
  fs::remove(out);
  auto r = run("collect compute --samples 3" + quick_compute + out.string());
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
      run("collect compute --samples 5 --flush-mib 8 --batch-size 32 --max-weight-mib 8 --warmup 1 "
          "--runs 3 "
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
  auto r = run("collect compute --samples 2 --reference-ms 2.5" + quick_compute + out.string());
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
      run("collect compute --samples 2 --reference --flush-mib 8 --batch-size 32 --max-weight-mib "
          "8 --warmup 1 "
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

TEST_CASE("--reference: bad input names the flag or field and the value") {
  auto r = run("collect comm --reference --samples 1 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("'--reference' = true: expected only with collect compute") !=
        std::string::npos);
  r = run("collect comm --flush-mib 8 --samples 1 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("'--flush-mib' = 8: expected only with collect compute") != std::string::npos);
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
  const auto r = run("collect comm --samples 2 --devices 4" + quick_comm + out.string());
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
  // Named as the user typed them (the positional kind, the flags), not as
  // the library's collect_options fields.
  CHECK(r.err.find("field 'kind' = \"bogus\": expected") != std::string::npos);
  r = run("collect compute --samples -4 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("'--samples'") != std::string::npos);
  CHECK(r.err.find("-4") != std::string::npos);
  r = run("collect compute --runs 2 --drop 1 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("field '--drop' = 1: expected a count >= 0 leaving at least one of 2 runs") !=
        std::string::npos);
  r = run("collect compute --dims 6 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("field '--dims[0]' = 6: expected a positive multiple of 4") !=
        std::string::npos);
  r = run("collect compute --min-tables 5 --max-tables 3 --out " +
          (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("field '--max-tables' = 3: expected between") != std::string::npos);
  r = run("collect comm --min-place 20 --max-place 10 --out " + (scratch() / "x.jsonl").string());
  CHECK(r.code == 2);
  CHECK(r.err.find("field '--max-place' = 10: expected between") != std::string::npos);
  CHECK(r.err.find("collect.") == std::string::npos);
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

#if defined(EMBPLAN_MPIEXEC)
TEST_CASE(
    "collect under mpirun -np 2: ranks share the samples, rank 0 writes, all-to-all measured") {
  const auto out = scratch() / "mpi-compute.jsonl";
  fs::remove(out);
  auto r = run_mpi(2, "collect compute --samples 5" + quick_compute + out.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto ids = record_ids(out);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  // The same samples as one process would make: same tables and dims.
  const auto single = scratch() / "single-compute.jsonl";
  fs::remove(single);
  REQUIRE(run("collect compute --samples 5" + quick_compute + single.string()).code == 0);
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
  r = run_mpi(2, "collect compute --samples 4 --reference" + quick_compute + referenced.string());
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
  r = run_mpi(2, "collect comm --samples 2 --max-start-ms 2 --warmup 1 --runs 3 --drop 1" +
                     quick_comm + comm.string());
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

#else
TEST_CASE("collect under mpirun: skipped, embplan was built without MPI") {
  MESSAGE("SKIPPED: no MPI found at configure time; mpirun -np 2 collect test not run");
}

#endif

TEST_CASE("collect refuses dims that are not multiples of 4") {
  check_refused("collect compute --out " + (scratch() / "c.jsonl").string() + " --dims 4,6",
                {"dims[1]", "6", "multiple of 4"});
}

TEST_CASE("collect --out: a directory or device is refused before any work, naming it") {
  const auto dir = scratch() / "collect-out-dir";
  fs::create_directories(dir);
  check_refused("collect comm --samples 2" + quick_comm + dir.string(),
                {"'--out'", dir.string(), "not a directory"});
  check_refused("collect compute --samples 1" + quick_compute + dir.string(),
                {"'--out'", dir.string()});
  check_refused("collect comm --samples 2" + quick_comm + "/dev/full", {"'--out'", "/dev/full"});
}

TEST_CASE("collect: appending to records made with other settings is refused, naming both") {
  const auto comm = scratch() / "bound-comm.jsonl";
  fs::remove(comm);
  REQUIRE(run("collect comm --samples 2" + quick_comm + comm.string()).code == 0);
  // Another batch size: what a record means changes; refused, the file untouched.
  check_refused(
      "collect comm --samples 3 --batch-size 64 --quiet --out " + comm.string(),
      {"'--batch-size' = 64: expected 32, what the records of", comm.string(), "(line 1)"});
  CHECK(record_ids(comm) == std::vector<std::int64_t>{0, 1});
  // Compute records onto comm records, and the reverse.
  check_refused("collect compute --samples 3" + quick_compute + comm.string(),
                {"'collect.kind' = \"compute\": expected \"comm\""});
  const auto compute = scratch() / "bound-compute.jsonl";
  fs::remove(compute);
  REQUIRE(run("collect compute --samples 1" + quick_compute + compute.string()).code == 0);
  check_refused("collect comm --samples 3" + quick_comm + compute.string(),
                {"'collect.kind' = \"comm\": expected \"compute\""});
  // A drift reference the records were not scaled to.
  check_refused("collect compute --samples 2 --reference-ms 2.5" + quick_compute + compute.string(),
                {"'--reference-ms' = 2.5: expected no drift reference"});
  CHECK(record_ids(compute) == std::vector<std::int64_t>{0});
  // Options a record does not describe itself, recorded under "inputs": another
  // seed (ids would name other samples), another pool (indices into other
  // tables), another protocol.
  check_refused("collect comm --samples 3 --seed 3" + quick_comm + comm.string(),
                {"'--seed' = 3: expected 0, what the records of", comm.string()});
  const auto pool = scratch() / "bound-pool.json";
  REQUIRE(run("pool --tables 40 --out " + pool.string()).code == 0);
  check_refused("collect comm --samples 3 --pool " + pool.string() + quick_comm + comm.string(),
                {"'--pool' = ", "expected the synthetic pool, seed 0, what the records of"});
  check_refused("collect compute --samples 2 --dims 4,8" + quick_compute + compute.string(),
                {"'--dims' = 4,8: expected 4,8,16,32,64,128, what the records of"});
  CHECK(record_ids(comm) == std::vector<std::int64_t>{0, 1});
  // The same settings: appended.
  const auto r = run("collect comm --samples 3" + quick_comm + comm.string());
  CHECK(r.code == 0);
  CHECK(record_ids(comm) == std::vector<std::int64_t>{0, 1, 2});
  // A file from before records named their inputs cannot be checked: refused.
  const auto old = scratch() / "bound-old.jsonl";
  {
    std::ifstream in(comm);
    std::string line;
    std::getline(in, line);
    auto record = nlohmann::json::parse(line);
    record.erase("inputs");
    std::ofstream out(old);
    out << record.dump() << '\n';
  }
  check_refused("collect comm --samples 3" + quick_comm + old.string(),
                {"a record without \"inputs\"", "choose another --out"});
}

TEST_CASE("collect: an option the kind or mode ignores is refused, naming it and the kind") {
  const auto out = (scratch() / "unused.jsonl").string();
  check_refused("collect comm --max-weight-mib 8 --out " + out,
                {"'--max-weight-mib' = 8: expected only with collect compute (collect comm takes "
                 "no --max-weight-mib)"});
  check_refused("collect comm --min-tables 2 --out " + out, {"'--min-tables' = 2", "compute"});
  check_refused("collect comm --max-tables 2 --out " + out, {"'--max-tables' = 2", "compute"});
  check_refused("collect comm --reference-ms 2 --out " + out, {"'--reference-ms' = 2", "compute"});
  check_refused("collect compute --devices 4 --out " + out,
                {"'--devices' = 4: expected only with collect comm"});
  check_refused("collect compute --min-place 4 --out " + out, {"'--min-place' = 4", "comm"});
  check_refused("collect compute --max-place 4 --out " + out, {"'--max-place' = 4", "comm"});
  check_refused("collect compute --max-start-ms 4 --out " + out, {"'--max-start-ms' = 4", "comm"});
  check_refused("collect compute --memory-gib 2 --out " + out, {"'--memory-gib' = 2", "comm"});
  // Without MPI ranks the analytic model prices comm samples: nothing is timed.
  check_refused("collect comm --runs 3 --out " + out,
                {"'--runs' = 3: expected only with collect compute, or collect comm under mpirun"});
  check_refused("collect comm --warmup 1 --out " + out, {"'--warmup' = 1"});
  check_refused("collect comm --drop 0 --out " + out, {"'--drop' = 0"});
}
