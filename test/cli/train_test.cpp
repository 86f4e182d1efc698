// End-to-end tests of `embplan train`: the cost models (comm, compute) and the
// DreamShard and AutoShard policies, the files they write and plan with,
// reproducible by seed and resumable, also under mpirun -np 2 where embplan is
// built with MPI; bad input named.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <ios>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "embplan/io/safetensors.hpp"

#include "cli/cli_support.hpp"

using namespace embplan_cli_test;

namespace {

// The "__metadata__" of a safetensors file's JSON header.
nlohmann::json safetensors_metadata(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  return nlohmann::json::parse(header).at("__metadata__");
}

}  // namespace

TEST_CASE("train comm and train compute fit collected records and write a model file") {
  // Comm: analytic records (no MPI ranks), which the net can learn.
  const auto records = scratch() / "train-comm.jsonl";
  fs::remove(records);
  REQUIRE(run("collect comm --samples 60 --devices 4" + quick_comm + records.string()).code == 0);
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
                     " --meter cpu --flush-mib 8 --iterations 1 --collect 2 --cost-steps 2 "
                     "--cost-batch 2 --rl-steps 1 --episodes 2 --quiet --out " +
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
  check_refused(
      "train dreamshard --tasks " + tasks + " --meter analytic --flush-mib 8 --out " + out,
      {"--flush-mib", "8"});
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
      {cost_model + ": this is a compute cost model, expected a DreamShard policy"});
  check_refused("plan --task " + small_tasks().string() +
                    " --planner dreamshard --policy /nonexistent/policy.safetensors",
                {"--policy", "/nonexistent/policy.safetensors"});
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
                {dreamshard + ": this is a DreamShard policy, expected an AutoShard policy"});
  check_refused("plan --task " + small_tasks().string() +
                    " --planner autoshard --autoshard-policy /nonexistent/p.safetensors",
                {"--autoshard-policy", "/nonexistent/p.safetensors"});
}

#if defined(EMBPLAN_MPIEXEC)
TEST_CASE("train dreamshard under mpirun -np 2: communication measured, rank 0 writes the policy") {
  const auto tasks = scratch() / "mpi-dreamshard-tasks.json";
  REQUIRE(
      run("tasks --protocol dreamshard --devices 2 --tables 6 --count 2 --out " + tasks.string())
          .code == 0);
  const auto policy = scratch() / "mpi-dreamshard.safetensors";
  const auto checkpoint = scratch() / "mpi-dreamshard-ckpt.safetensors";
  fs::remove(policy);
  const std::string tiny =
      " --meter cpu --flush-mib 8 --iterations 2 --collect 2 --cost-steps 3 --cost-batch 4 "
      "--rl-steps 1 --episodes 2 --quiet --seed 5";
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

#endif

TEST_CASE("train dreamshard --resume: bound to the tasks, meter and options it started with") {
  const std::string tasks = dreamshard_tasks().string();
  const auto ckpt = scratch() / "dreamshard-bound-ckpt.safetensors";
  const auto out = scratch() / "dreamshard-bound.safetensors";
  fs::remove(ckpt);
  const std::string run_args =
      " --quiet --iterations 2 --collect 3 --cost-steps 4 --cost-batch 8 "
      "--rl-steps 2 --episodes 3 --seed 3 --out " +
      out.string();
  REQUIRE(run("train dreamshard --tasks " + tasks + " --meter analytic" + run_args +
              " --checkpoint " + ckpt.string())
              .code == 0);
  const std::string resume = " --resume " + ckpt.string();
  // Another meter: refused, naming the flag and both values, before any work.
  check_refused("train dreamshard --tasks " + tasks + " --meter cpu" + run_args + resume,
                {"'--meter' = \"cpu\"", "expected \"analytic\"", ckpt.string()});
  // Another tasks file (other content): refused, both contents' fingerprints named.
  const auto other = scratch() / "dreamshard-other-tasks.json";
  REQUIRE(run("tasks --protocol dreamshard --devices 2 --tables 8 --count 3 --seed 9 --out " +
              other.string())
              .code == 0);
  check_refused(
      "train dreamshard --tasks " + other.string() + " --meter analytic" + run_args + resume,
      {"'--tasks' = \"fnv1a64:", "expected \"fnv1a64:"});
  // Another learning rate or head: refused under its flag.
  check_refused(
      "train dreamshard --tasks " + tasks + " --meter analytic --lr 0.001" + run_args + resume,
      {"'--lr' = \"0.001\"", "expected \"0.00050000000000000001\""});
  check_refused("train dreamshard --tasks " + tasks + " --meter analytic --policy-head-init torch" +
                    run_args + resume,
                {"'--policy-head-init' = \"torch\"", "expected \"zero\""});
  // The same content under another name: the same run, resumed.
  const auto copy = scratch() / "dreamshard-tasks-copy.json";
  fs::copy_file(tasks, copy, fs::copy_options::overwrite_existing);
  const auto r =
      run("train dreamshard --tasks " + copy.string() + " --meter analytic" + run_args + resume);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("resumed from") != std::string::npos);
}

TEST_CASE("train autoshard --resume: bound to the tasks, meter and options it started with") {
  const std::string tasks = autoshard_tasks().string();
  const auto ckpt = scratch() / "autoshard-bound-ckpt.safetensors";
  const auto out = scratch() / "autoshard-bound.safetensors";
  fs::remove(ckpt);
  const std::string common =
      "train autoshard --tasks " + tasks + tiny_autoshard + " --out " + out.string();
  REQUIRE(run(common + " --checkpoint " + ckpt.string()).code == 0);
  const std::string resume = " --resume " + ckpt.string();
  check_refused("train autoshard --tasks " + tasks + " --meter cpu --updates 3 --batch 4 " +
                    "--cost-updates 2 --cost-batch 8 --quiet --out " + out.string() + resume,
                {"'--meter' = \"cpu\"", "expected \"analytic\""});
  check_refused(common + " --split-seed 4" + resume, {"'--split-seed' = \"4\"", "expected \"0\""});
  check_refused(common + " --baseline-cost 0.25" + resume,
                {"'--baseline-cost' = \"0.25\"", "expected \"0.5\""});
  const auto other = scratch() / "autoshard-other-tasks.json";
  REQUIRE(run("tasks --protocol autoshard --devices 3 --tables 12 --count 3 --half train --seed 9 "
              "--out " +
              other.string())
              .code == 0);
  check_refused("train autoshard --tasks " + other.string() + tiny_autoshard + " --out " +
                    out.string() + resume,
                {"'--tasks' = \"fnv1a64:", "expected \"fnv1a64:"});
  // The actors are not bound: the policy does not depend on them.
  const auto r = run(common + " --actors 2" + resume);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("resumed from") != std::string::npos);
}

TEST_CASE("train: an option the kind ignores is refused, naming the option and the kind") {
  const auto out = (scratch() / "unused.safetensors").string();
  const std::string tasks = dreamshard_tasks().string();
  check_refused("train compute --data x.jsonl --checkpoint c.safetensors --out " + out,
                {"'--checkpoint' = c.safetensors",
                 "expected only with train dreamshard or autoshard (train compute takes no "
                 "--checkpoint)"});
  check_refused("train dreamshard --tasks " + tasks + " --updates 3 --out " + out,
                {"'--updates' = 3", "expected only with train autoshard"});
  check_refused("train autoshard --tasks " + tasks + " --iterations 2 --out " + out,
                {"'--iterations' = 2", "expected only with train dreamshard"});
  check_refused("train autoshard --tasks " + tasks + " --policy-head-init torch --out " + out,
                {"'--policy-head-init' = torch", "only with train dreamshard"});
  check_refused("train dreamshard --tasks " + tasks + " --features neuroshard20 --out " + out,
                {"'--features' = neuroshard20", "only with train compute"});
  check_refused("train dreamshard --tasks " + tasks + " --epochs 3 --out " + out,
                {"'--epochs' = 3", "only with train compute or comm"});
  check_refused("train dreamshard --tasks " + tasks + " --eval e.jsonl --out " + out,
                {"'--eval' = e.jsonl", "only with train compute or comm"});
  check_refused("train dreamshard --tasks " + tasks + " --data d.jsonl --out " + out,
                {"'--data' = d.jsonl", "only with train compute or comm"});
  check_refused("train comm --data x.jsonl --pool p.json --out " + out,
                {"'--pool' = p.json", "only with train compute or dreamshard or autoshard"});
  check_refused("train comm --data x.jsonl --split-seed 2 --out " + out,
                {"'--split-seed' = 2", "train comm takes no --split-seed"});
  check_refused("train compute --data x.jsonl --meter analytic --out " + out,
                {"'--meter' = analytic", "only with train dreamshard or autoshard"});
  check_refused("train comm --data x.jsonl --target parts --out " + out,
                {"'--target' = parts", "only with train compute"});
  check_refused("train compute --data x.jsonl --reference --out " + out,
                {"'--reference' = true", "only with train dreamshard or autoshard"});
  check_refused("train compute --data x.jsonl --tasks " + tasks + " --out " + out,
                {"'--tasks'", "only with train dreamshard or autoshard"});
  check_refused("train dreamshard --tasks " + tasks + " --actors 2 --out " + out,
                {"'--actors' = 2", "only with train autoshard"});
}

TEST_CASE("train: --out and --checkpoint are checked before any work") {
  const std::string tasks = dreamshard_tasks().string();
  const auto dir = scratch() / "train-out-dir";
  fs::create_directories(dir);
  // A directory, a device, one file named twice: refused before the first line of output.
  check_refused("train dreamshard --tasks " + tasks + tiny_dreamshard + " --out " + dir.string(),
                {"'--out'", dir.string(), "not a directory"});
  check_refused("train dreamshard --tasks " + tasks + tiny_dreamshard +
                    " --checkpoint /dev/full --out " + (dir / "p.safetensors").string(),
                {"'--checkpoint'", "/dev/full"});
  check_refused("train autoshard --tasks " + autoshard_tasks().string() + tiny_autoshard +
                    " --checkpoint " + dir.string() + " --out " + (dir / "p.safetensors").string(),
                {"'--checkpoint'", dir.string()});
  check_refused("train autoshard --tasks " + autoshard_tasks().string() + tiny_autoshard +
                    " --checkpoint " + (dir / "p.safetensors").string() + " --out " +
                    (dir / "p.safetensors").string(),
                {"'--checkpoint'", "a file other than --out's"});
  check_refused("train comm --data /nonexistent/r.jsonl --out " + dir.string(),
                {"'--out'", dir.string()});
  check_refused("train compute --data /nonexistent/r.jsonl --out /dev/full",
                {"'--out'", "/dev/full"});
}
