// End-to-end tests of `embplan plan`: the plan, its report and exports, the
// measured meter (also under mpirun -np 2, built with MPI), the rowwise_ and
// learned planners, user constraints, tiers, row layouts, data-parallel
// copies, rows by cost, portfolios, and `plan --check` with its content hash
// and exit codes.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "embplan/core/content_hash.hpp"
#include "embplan/io/json_plan.hpp"
#include "embplan/io/json_task.hpp"
#include "embplan/version.hpp"

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

namespace {

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

TEST_CASE("an infeasible task names the table that does not fit") {
  const auto big = scratch() / "big.json";
  write(big, R"({"name": "too-big",
                 "tables": [{"name": "huge", "rows": 2000000000, "dim": 128, "pooling_factor": 1}],
                 "cluster": {"count": 2, "device": {"memory_gib": 4}}})");
  const auto r = run("plan --task " + big.string() + " --planner lookup_greedy");
  CHECK(r.code == 1);  // valid input: the planner found no plan (docs/cli.md, "Exit codes")
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("embplan: no plan: ") == 0);
  CHECK(r.err.find("huge") != std::string::npos);
}

TEST_CASE("plan --meter measured --reference-ms: the plan measured on the scaled meter") {
  const auto task = small_measured_task("reference-plan-task.json");
  const auto r = run("plan --task " + task.string() +
                     " --planner lookup_greedy --meter measured --reference-ms 1.5" + small_flush);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("drift reference") != std::string::npos);
  CHECK(r.out.find("takes 1.500 ms") != std::string::npos);
  CHECK(r.out.find("cost (max over devices)") != std::string::npos);
}

TEST_CASE("plan --meter measured: the meter's batch follows a CPU-meter model, or --meter-batch") {
  const auto task = small_measured_task("meter-batch-task.json");
  const std::string plan =
      "plan --task " + task.string() + " --planner lookup_greedy" + small_flush;
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
  // --flush-mib sizes the measured meter's cache flush: with another meter, or
  // out of range, refused naming it.
  r = run(plan + " --meter analytic");
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("analytic") != std::string::npos);
  CHECK(r.err.find("--flush-mib") != std::string::npos);
  check_refused("plan --task " + task.string() + " --meter measured --flush-mib -1",
                {"--flush-mib", "-1"});
  check_refused("plan --task " + task.string() + " --meter measured --flush-mib 2097152",
                {"--flush-mib", "2097152"});
}

#if defined(EMBPLAN_MPIEXEC)
TEST_CASE("plan --meter measured under mpirun -np 2: a real all-to-all, rank 0 reports") {
  const auto task = scratch() / "mpi-plan-task.json";
  write(task, R"({"name": "two-devices", "batch_size": 256,
                  "tables": [{"name": "a", "rows": 2000, "dim": 16, "pooling_factor": 4},
                             {"name": "b", "rows": 3000, "dim": 32, "pooling_factor": 2},
                             {"name": "c", "rows": 1000, "dim": 8, "pooling_factor": 6}],
                  "cluster": {"count": 2, "device": {"memory_gib": 1}}})");
  auto r = run_mpi(2, "plan --task " + task.string() + " --planner lookup_greedy --meter measured" +
                          small_flush);
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

#endif

TEST_CASE("plan with a rowwise_ planner splits a table larger than any device by rows") {
  const auto big = rowwise_task("big-rowwise.json");
  auto r = run("plan --task " + big.string() + " --planner lookup_greedy");
  CHECK(r.code == 1);  // no plan: valid input this planner cannot place
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
  for (const char* planner : {"lookup_greedy", "neuroshard", "torchrec_like"}) {
    const auto r = run("plan --task " + big.string() + " --planner " + planner);
    CHECK(r.code == 1);
    CHECK(lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("huge") != std::string::npos);
    CHECK(r.err.find("GiB") != std::string::npos);
    CHECK(r.err.find(" bytes") == std::string::npos);
    CHECK(r.err.find("rowwise_torchrec_like") != std::string::npos);
  }
  // A rowwise_ planner that still finds no room is not told to try itself.
  const auto r = run("plan --task " + big.string() + " --planner rowwise_lookup_greedy");
  CHECK(r.code == 1);
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

TEST_CASE("plan --planner torchrec_like: the TorchRec-style greedy runs under its own name") {
  // torchrec_like is a TorchRec-style greedy (NeuroShard App. E.3), not
  // TorchRec's planner: its plans, report and listing say torchrec_like.
  const auto out = scratch() / "torchrec-like-plan.json";
  const auto report = scratch() / "torchrec-like-report.json";
  const auto r =
      run("plan --task " + small_tasks().string() + " --planner torchrec_like --model none --out " +
          out.string() + " --json " + report.string());
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find(", planner torchrec_like (search ") != std::string::npos);
  CHECK(nlohmann::json::parse(slurp(report)).at("planner") == "torchrec_like");
  CHECK(nlohmann::json::parse(slurp(out)).at("planner") == "torchrec_like");
  // The accepted names, as a bad name lists them, include it.
  const auto bad = run("plan --task " + small_tasks().string() + " --planner bogus");
  CHECK(bad.code == 2);
  CHECK(bad.err.find(" torchrec_like, ") != std::string::npos);
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
  // The chosen one is bounded (65536, the reader's bound and the CLI's).
  check_refused("plan --task " + file.string() + " --index 0 --model none",
                {"tasks[0].cluster.count", "1048576", "65536"});
  // An index past the file: named with the count, before any conversion.
  check_refused("plan --task " + file.string() + " --index 3", {"--index", "3", "3 tasks"});
  // A single-task file.
  const auto single = scratch() / "big-task.json";
  write(single, one("100000"));
  check_refused("plan --task " + single.string(), {"task.cluster.count", "100000"});
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

TEST_CASE("plan: a policy or model file of another kind is named as what it is, exit 2") {
  const auto data = fs::path(EMBPLAN_SOURCE_DIR) / "data";
  const auto dreamshard = (data / "rl" / "dreamshard_cpu_4dev.safetensors").string();
  const auto autoshard = (data / "rl" / "autoshard_cpu_8dev.safetensors").string();
  const auto compute = (data / "cost" / "cpu_compute_model.safetensors").string();
  const auto task = small_tasks().string();
  check_refused("plan --task " + task + " --planner autoshard --autoshard-policy " + dreamshard,
                {dreamshard + ": this is a DreamShard policy, expected an AutoShard policy"});
  check_refused("plan --task " + task + " --planner dreamshard --policy " + autoshard,
                {autoshard + ": this is an AutoShard policy, expected a DreamShard policy"});
  check_refused("plan --task " + task + " --planner dreamshard --policy " + compute,
                {compute + ": this is a compute cost model, expected a DreamShard policy"});
  check_refused("plan --task " + task + " --model " + autoshard,
                {autoshard + ": this is an AutoShard policy, expected a compute cost model"});
}

TEST_CASE("plan: numbers that would price a device at NaN are refused at the reader") {
  const auto file = scratch() / "nan-task.json";
  const auto task = [&](const std::string& pooling, const std::string& bandwidth) {
    write(file, R"({"tables": [{"rows": 1000, "dim": 8, "pooling_factor": )" + pooling +
                    R"(}], "cluster": {"count": 2, "device": {"memory_bandwidth_gbps": )" +
                    bandwidth + "}}}");
    return "plan --task " + file.string() + " --model none";
  };
  check_refused(task("1e300", "616"), {"task.tables[0].pooling_factor", "1e+300", "at most 1e6"});
  check_refused(task("2", "1e-320"), {"task.cluster.device.memory_bandwidth_gbps", "1e-320",
                                      "a bandwidth from 0.001 to 1e6 GB/s"});
  CHECK(run(task("2", "616")).code == 0);
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
  for (const char* planner :
       {"lookup_greedy", "neuroshard_plus", "torchrec_like", "neuroshard_ls"}) {
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
  CHECK(r.code == 1);
  CHECK(r.err.find("embplan: no plan: ") == 0);
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
  // The hash of the task, planner, seed and the plan's shards.
  const auto checked_task = embplan::io::task_from_json(nlohmann::json::parse(task_text("2")));
  const auto hash = embplan::hash_hex(embplan::content_hash(
      checked_task, embplan::io::plan_from_json(pj, checked_task), "lookup_greedy", 3));
  CHECK(pj.at("planner") == "lookup_greedy");
  CHECK(pj.at("seed") == 3);
  CHECK(pj.at("content_hash") == hash);
  CHECK(pj.at("embplan_version") == EMBPLAN_VERSION_STRING);
  CHECK(r.out.find("seed 3\ncontent hash: " + hash + " of (task, planner, seed, shards), embplan " +
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
                     " from the task, planner lookup_greedy, seed 3 and the plan's shards: "
                     "match") != std::string::npos);
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
    CHECK(x.out.find("plan valid") == std::string::npos);
    return x.out;
  };
  // Valid, but not the plan the planner made: exit 0, said on stdout.
  const auto not_the_planners = [&](const nlohmann::json& j, const fs::path& against) {
    write(tampered, j.dump());
    const auto x = run("plan --check " + tampered.string() + " --task " + against.string());
    INFO(x.out, x.err);
    CHECK(x.code == 0);
    CHECK(x.out.find(": DIFFERENT (the plan was edited, or made for another task, planner or "
                     "seed)") != std::string::npos);
    CHECK(x.out.find("\nplan valid, but not the plan planner lookup_greedy made (content hash "
                     "recorded " +
                     hash + ", this plan's ") != std::string::npos);
    CHECK(x.out.find("plan OK") == std::string::npos);
    CHECK(x.out.find("problem") == std::string::npos);
  };

  // A table moved by hand to another device where it fits: the plan is
  // valid, and the hash tells it from the planner's.
  auto j = pj;
  const auto moved_to = (device_of("c") + 1) % 4;
  j["shards"][shard_of("c")]["device"] = moved_to;
  not_the_planners(j, task);
  // Moved by hand so that it breaks the task: exit 3, the hash said too.
  j = pj;
  j["shards"][shard_of("b")]["device"] = device_of("a");
  CHECK(rejected(j, "memory_bytes' = 1536000000")
            .find("\nand not the plan planner lookup_greedy made (content hash recorded " + hash) !=
        std::string::npos);

  j = pj;
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

  // Another task (one table's pooling factor) the plan is valid for: the hash
  // says it is not the plan made for it.
  const auto changed = scratch() / "check-task-changed.json";
  write(changed, task_text("3"));
  not_the_planners(pj, changed);
  // Another seed recorded: the hash differs as well.
  j = pj;
  j["seed"] = 4;
  not_the_planners(j, task);

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
      " --task " + task.string() + " --planner rowwise_torchrec_like --model none --json ";
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
  CHECK(out["by_cost"].at("planner") == "rowwise_torchrec_like");
  CHECK(out["row_wise"].at("planner") == "rowwise_torchrec_like+row_layout=row_wise");
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
  const std::string common = " --task " + task.string() + " --planner torchrec_like --model none";
  const auto r = run("plan" + common + " --data-parallel auto --out " + plan.string() + " --json " +
                     report.string() + " --torchrec " + tr.string());
  INFO(r.out, r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("planner torchrec_like+data_parallel") != std::string::npos);
  CHECK(r.out.find("data-parallel copy") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(report));
  CHECK(j.at("planner") == "torchrec_like+data_parallel");
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
  c = run("compare --count 1 --devices 4 --max-dim 16 --planners torchrec_like --data-parallel x");
  CHECK(c.code == 2);
  c =
      run("compare --count 2 --devices 4 --max-dim 16 --planners torchrec_like,neuroshard_plus "
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
  c = run("compare --count 1 --devices 4 --max-dim 16 --planners torchrec_like --rows-by-cost 1");
  CHECK(c.code == 2);
  CHECK(c.err.find("'--rows-by-cost' = \"1\"") != std::string::npos);
  c =
      run("compare --count 2 --devices 4 --max-dim 16 --planners torchrec_like --model none "
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
      run(std::string("plan --planner ") + (member[1] == '1' ? "neuroshard_ls" : "torchrec_like") +
          common + (scratch() / "pf-alone.json").string());
  REQUIRE(alone.code == 0);
  const auto a = nlohmann::json::parse(slurp(scratch() / "pf-alone.json"));
  CHECK(a.at("cost_ms").get<double>() == j.at("cost_ms").get<double>());
  // A planner that is no portfolio says nothing of members.
  CHECK_FALSE(a.contains("made_by"));
  CHECK(alone.out.find("portfolio member") == std::string::npos);
  // compare counts the portfolio's plans by member, per setting.
  const auto c = run(
      "compare --count 3 --devices 4 --max-dim 16 --planners portfolio,torchrec_like --model none "
      "--json " +
      (scratch() / "pf-compare.json").string());
  INFO(c.out, c.err);
  REQUIRE(c.code == 0);
  CHECK(c.out.find("portfolio's plans by member: #") != std::string::npos);
  CHECK(c.out.find("torchrec_like's plans by member") == std::string::npos);
  const auto cj = nlohmann::json::parse(slurp(scratch() / "pf-compare.json"));
  const auto& rows = cj.at("settings").at(0).at("planners");
  std::size_t counted = 0;
  for (const auto& [label, count] : rows.at(0).at("made_by").items()) {
    CHECK(label.starts_with("#"));
    counted += count.get<std::size_t>();
  }
  CHECK(counted == 3);
  CHECK_FALSE(rows.at(1).contains("made_by"));
}
