// embplan — the command-line face of the library (DESIGN.md, "The CLI"; the
// main job is `embplan compare`). Every error becomes one line on stderr and
// exit code 2.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "collect.hpp"  // first: under EMBPLAN_WITH_MPI it includes <mpi.h> (MPI's C API)
#include "compare.hpp"
#include "embplan/bench/cpu_meter.hpp"
#include "embplan/embplan.hpp"
#include "measure_options.hpp"
#include "models.hpp"
#include "observe.hpp"
#include "row_shards.hpp"
#include "size.hpp"
#include "skew.hpp"
#include "text_table.hpp"
#include "train.hpp"

namespace {

using embplan_cli::fixed;
using embplan_cli::text_table;

constexpr int exit_bad_input = 2;

std::vector<embplan::table_spec> load_pool(const std::string& path, std::uint64_t seed) {
  if (path.empty()) return embplan::data::synthetic_pool({.seed = seed});
  return embplan::io::pool_from_json(embplan::io::read_json_file(path));
}

std::string preset_list() {
  std::string out;
  for (auto n : embplan::preset_names())
    out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

std::string gib_text(std::uint64_t bytes) {
  return fixed(static_cast<double>(bytes) / static_cast<double>(embplan::gib), 3);
}

// ------------------------------------------------------------------ pool
struct pool_args {
  std::uint64_t seed = 0;
  std::size_t tables = 856;
  std::string out;
};

int run_pool(const pool_args& a) {
  const auto pool = embplan::data::synthetic_pool({.tables = a.tables, .seed = a.seed});
  const auto stats = embplan::data::compute_statistics(pool);
  std::cout << "synthetic MetaSyn-like pool, seed " << a.seed << ", " << pool.size() << " tables\n"
            << embplan::data::format_statistics(stats);
  if (!a.out.empty()) {
    embplan::io::write_json_file(a.out, embplan::io::pool_to_json(pool));
    std::cout << "wrote " << a.out << '\n';
  }
  return 0;
}

// ------------------------------------------------------------------ tasks
struct tasks_args {
  std::string protocol = "neuroshard";
  std::size_t devices = 4;
  std::int32_t max_dim = 128;
  std::size_t count = 100;
  std::uint64_t seed = 0;
  double memory_gib = 4.0;
  std::string pool;
  std::string out;
  std::string half = "default";  // default | whole | train | test
  std::uint64_t split_seed = 0;
};

embplan::data::pool_half pool_half_of(const std::string& text) {
  return embplan::data::parse_pool_half(text, "--half");
}

std::uint64_t memory_bytes_of(double gib_value) {
  if (!(gib_value > 0.0) || gib_value > 1e9) {
    embplan::detail::fail("--memory-gib", gib_value, "a positive number of GiB");
  }
  return static_cast<std::uint64_t>(gib_value * static_cast<double>(embplan::gib));
}

embplan::data::task_options task_options_of(const tasks_args& a) {
  embplan::data::task_options o;
  o.proto = embplan::data::parse_protocol(a.protocol);
  o.devices = a.devices;
  o.max_dim = a.max_dim;
  o.count = a.count;
  o.seed = a.seed;
  o.device_memory_bytes = memory_bytes_of(a.memory_gib);
  o.half = pool_half_of(a.half);
  o.split_seed = a.split_seed;
  return o;
}

int run_tasks(const tasks_args& a) {
  const auto pool = load_pool(a.pool, 0);
  const auto tasks = embplan::data::generate_tasks(pool, task_options_of(a));
  embplan::io::write_json_file(a.out, embplan::io::tasks_to_json(tasks));
  std::size_t min_t = ~std::size_t{0};
  std::size_t max_t = 0;
  for (const auto& t : tasks) {
    min_t = std::min(min_t, t.tables.size());
    max_t = std::max(max_t, t.tables.size());
  }
  std::cout << "wrote " << tasks.size() << " " << a.protocol << " tasks (" << min_t << "-" << max_t
            << " tables on " << a.devices << " devices) to " << a.out << '\n';
  return 0;
}

// ------------------------------------------------------------------ plan
// --reference / --reference-ms of `plan` and `compare`: the measured meter's
// drift reference (bench::meter_options::reference), its time given or, with
// --reference alone, measured once before the first plan.
struct reference_args {
  bool on = false;
  double ms = 0.0;
};

void add_reference_options(CLI::App* app, reference_args& r) {
  app->add_flag("--reference", r.on,
                "--meter measured: pair every timed run with a fixed reference shard and "
                "scale by it (cancels a shared machine's slow and fast spells)");
  app->add_option("--reference-ms", r.ms,
                  "--meter measured: the reference shard's time to scale to (implies "
                  "--reference; default: measured once at the start)");
}

// The meter that prices every plan, and how the output names it.
// (--meter simulated is the learned model when one is loaded, else the
// analytic one; see models.hpp.)
constexpr const char* analytic_meter_text = "analytic cost model (bandwidth roofline + all-to-all)";
constexpr const char* learned_meter_text =
    "the learned compute model (see planning model) + the analytic all-to-all model";
constexpr const char* measured_meter_text =
    "CPU meter (each device's shard run as one fused embedding bag and timed, "
    "AutoShard protocol); communication from the analytic all-to-all model";
constexpr const char* measured_mpi_meter_text =
    "CPU meter (each device's shard run as one fused embedding bag and timed, "
    "AutoShard protocol, one MPI rank per device); communication measured: MPI_Alltoallv between "
    "the ranks with the plan's per-device byte counts and start skews";

struct plan_args {
  std::string task;
  std::size_t index = 0;
  std::string planner = "lookup_greedy";
  std::uint64_t seed = 0;
  std::string out;
  std::string torchrec;
  std::string trace;
  std::string model;  // empty: the bundled learned model
  std::string meter = "simulated";
  reference_args reference;
};

template <class Model>
int run_plan_with(const plan_args& a, const embplan_cli::any_meter& meter,
                  const std::string& meter_text, const Model& model, const std::string& model_text);

// The meter of `plan` and `compare` (models.hpp), and how the output names it.
std::pair<embplan_cli::any_meter, std::string> meter_of(const std::string& name,
                                                        const embplan_cli::planning_model& pm,
                                                        const reference_args& reference = {}) {
  embplan_cli::check_meter(name);
  if (!(reference.ms >= 0.0) || !std::isfinite(reference.ms)) {
    embplan::detail::fail("--reference-ms", reference.ms,
                          "a finite time >= 0 (0: measured, with --reference)");
  }
  const bool referenced = reference.on || reference.ms > 0.0;
  if (referenced && name != "measured") {
    embplan::detail::fail("--meter", name,
                          "\"measured\" with --reference (the drift reference scales the CPU "
                          "meter)");
  }
  if (name == "measured") {
    embplan::bench::cpu_meter_cost meter;
    if (!referenced) return {embplan_cli::any_meter(meter), measured_meter_text};
    meter.options.reference = true;
    meter.options.reference_ms =
        reference.ms > 0.0 ? reference.ms : embplan::bench::calibrate_reference(meter.options);
    return {embplan_cli::any_meter(meter),
            std::string(measured_meter_text) +
                "; drift reference: times scaled to the machine state where the reference "
                "shard takes " +
                fixed(meter.options.reference_ms, 3) + " ms"};
  }
  if (name == "simulated" && pm.compute) {
    return {embplan_cli::any_meter(*pm.compute), learned_meter_text};
  }
  return {embplan_cli::any_meter(embplan::analytic_cost{}), analytic_meter_text};
}

int run_plan(const plan_args& a) {
  embplan_cli::check_meter(a.meter);
  const auto pm = embplan_cli::load_planning_model(a.model);
  const auto [meter, text] = meter_of(a.meter, pm, a.reference);
  if (pm.compute) return run_plan_with(a, meter, text, *pm.compute, pm.text);
  return run_plan_with(a, meter, text, embplan::analytic_cost{}, pm.text);
}

template <class Model>
int run_plan_with(const plan_args& a, const embplan_cli::any_meter& meter,
                  const std::string& meter_text, const Model& model,
                  const std::string& model_text) {
  const auto tasks = embplan::io::tasks_from_json(embplan::io::read_json_file(a.task));
  if (a.index >= tasks.size()) {
    embplan::detail::fail(
        "--index", a.index,
        "an index below the " + std::to_string(tasks.size()) + " tasks in " + a.task);
  }
  const auto& t = tasks[a.index];
  const auto result = embplan::run_preset(a.planner, t, a.seed, model);
  if (!result.ok)
    throw embplan::error("planner '" + a.planner + "' found no plan: " + result.failure);

  // Under mpirun with one rank per device, --meter measured times the
  // all-to-all for real (bench/mpi/plan_meter.hpp); rank 0 reports.
  std::string used_meter_text = meter_text;
  embplan::plan_cost cost;
#if defined(EMBPLAN_WITH_MPI)
  const embplan_cli::world w;
  if (a.meter == "measured" && w.size() > 1) {
    if (a.reference.on || a.reference.ms > 0.0) {
      embplan::detail::fail("--reference", true,
                            "off under mpirun (the MPI plan meter has no drift reference)");
    }
    cost = embplan::bench::mpi::measure_plan(MPI_COMM_WORLD, t, result.placement);
    used_meter_text = measured_mpi_meter_text;
    if (w.rank() != 0) return 0;
  } else {
    cost = embplan::evaluate(t, result.placement, meter);
  }
#else
  cost = embplan::evaluate(t, result.placement, meter);
#endif
  std::vector<std::size_t> shard_count(t.cluster.size(), 0);
  for (const auto& s : result.placement.shards)
    ++shard_count[s.device];

  std::cout << "task '" << t.name << "': " << t.tables.size() << " tables on " << t.cluster.size()
            << " devices, planner " << a.planner << " (search " << fixed(result.sharding_ms, 3)
            << " ms)\nmeter: " << a.meter << ", " << used_meter_text
            << "\nplanning model: " << model_text << '\n';
  text_table table({"device", "shards", "dim", "memory GiB", "fwd comp", "bwd comp", "fwd comm",
                    "bwd comm", "total ms"});
  for (std::size_t d = 0; d < t.cluster.size(); ++d) {
    const auto& c = cost.devices[d];
    table.add({t.cluster.devices[d].name.empty() ? std::to_string(d) : t.cluster.devices[d].name,
               std::to_string(shard_count[d]), std::to_string(cost.dim_sum[d]),
               gib_text(cost.memory_bytes[d]), fixed(c.fwd_compute_ms), fixed(c.bwd_compute_ms),
               fixed(c.fwd_comm_ms), fixed(c.bwd_comm_ms), fixed(c.total_ms())});
  }
  table.print(std::cout);
  std::cout << "cost (max over devices): " << fixed(cost.max_ms()) << " ms, degree of balance "
            << fixed(cost.balance(), 3) << " (min/max compute)\n";
  embplan_cli::print_row_shards(std::cout, t, result.placement);

  if (!a.out.empty()) {
    embplan::io::write_json_file(a.out, embplan::io::to_json(result.placement, t));
    std::cout << "wrote " << a.out << '\n';
  }
  if (!a.torchrec.empty()) {
    embplan::io::write_json_file(a.torchrec, embplan::io::torchrec_sharding(t, result.placement));
    std::cout << "wrote " << a.torchrec << '\n';
  }
  if (!a.trace.empty()) {
    embplan::io::write_json_file(a.trace, embplan::io::chrome_trace(t, cost));
    std::cout << "wrote " << a.trace << " (open in Perfetto or chrome://tracing)\n";
  }
  return 0;
}

// ------------------------------------------------------------------ compare
struct compare_args {
  std::string protocol = "neuroshard";
  std::vector<std::size_t> devices{4, 8};
  std::vector<std::int32_t> max_dims{4, 8, 16, 32, 64, 128};
  std::size_t count = 100;
  std::uint64_t seed = 0;
  double memory_gib = 4.0;
  std::string pool;
  std::vector<std::string> planners;
  std::string json;
  std::string meter = "simulated";
  std::string model;  // empty: the bundled learned model
  reference_args reference;
  std::string half = "auto";  // auto | default | whole | train | test
  std::uint64_t split_seed = 0;
};

// Where compare's tasks draw their tables from. --half auto: the half of the
// pool the planning model did not train on (its file records which, with the
// split's seed), so the learned model is judged on tables it never saw; the
// whole pool where no learned model is used or its file does not say.
struct task_source {
  std::string half;
  std::uint64_t split_seed = 0;
  std::string text;  // what the output says
};

task_source task_source_of(const compare_args& a, const embplan_cli::planning_model& pm) {
  if (a.half != "auto") {
    const auto half = pool_half_of(a.half);
    std::string text = "the whole pool, as --half says";
    if (half == embplan::data::pool_half::protocol_default) {
      text = "the part of the pool the protocol draws from, as --half says";
    } else if (half != embplan::data::pool_half::whole) {
      text = "the " + a.half + " half of the pool (split seed " + std::to_string(a.split_seed) +
             "), as --half says";
    }
    return {a.half, a.split_seed, std::move(text)};
  }
  if (!pm.compute) return {"whole", 0, "the whole pool (no learned model plans)"};
  const auto& m = pm.compute->metadata();
  if (m.pool_half.empty() || m.pool_half == "whole") {
    return {"whole", 0,
            "the whole pool: the learned model's file does not record one half of it as "
            "its training tables, so tasks may hold tables it was trained on"};
  }
  const auto other = std::string(embplan::data::to_string(embplan::data::other_half(
      embplan::data::parse_pool_half(m.pool_half, "neural_cost.pool_half"))));
  return {other, m.split_seed,
          "the " + other + " half of the pool (split seed " + std::to_string(m.split_seed) +
              "): tables the learned model, trained on the " + m.pool_half + " half, never saw"};
}

template <class Model>
int run_compare_with(const compare_args& a, const embplan_cli::any_meter& meter,
                     const std::string& meter_text, const Model& model,
                     const std::string& model_text, const task_source& source) {
  const auto pool = load_pool(a.pool, 0);
  std::vector<std::string_view> names;
  if (a.planners.empty()) {
    for (auto n : embplan::preset_names())
      names.push_back(n);
  } else {
    const auto known = embplan::preset_names();
    for (const auto& n : a.planners) {
      const auto it = std::find(known.begin(), known.end(), std::string_view(n));
      if (it == known.end()) embplan::detail::fail("--planners", n, "one of " + preset_list());
      names.push_back(*it);
    }
  }
  nlohmann::json report;
  report["protocol"] = a.protocol;
  report["meter"] = a.meter + ", " + meter_text;
  report["planning_model"] = model_text;
  report["settings"] = nlohmann::json::array();

  report["tasks_from"] = {{"half", source.half}, {"split_seed", source.split_seed}};
  std::cout << "meter: " << a.meter << ", " << meter_text << "\nplanning model: " << model_text
            << "\ntasks from: " << source.text << "\n"
            << "cost = max over devices of fwd+bwd compute + fwd+bwd comm (ms); \"-\" = a task "
               "did not fit memory\n";
  // NeuroShard Table 1 shape: one row per planner, one column per setting.
  std::vector<std::string> summary_header{"planner"};
  std::vector<std::vector<std::string>> summary(names.size());
  for (std::size_t p = 0; p < names.size(); ++p)
    summary[p].push_back(std::string(names[p]));
  for (const std::size_t devices : a.devices) {
    for (const std::int32_t max_dim : a.max_dims) {
      tasks_args ta;
      ta.protocol = a.protocol;
      ta.devices = devices;
      ta.max_dim = max_dim;
      ta.count = a.count;
      ta.seed = a.seed;
      ta.memory_gib = a.memory_gib;
      ta.half = source.half;
      ta.split_seed = source.split_seed;
      const auto tasks = embplan::data::generate_tasks(pool, task_options_of(ta));
      const auto rows = embplan_cli::compare_planners(std::span<const embplan::task>(tasks),
                                                      std::span<const std::string_view>(names),
                                                      meter, model, a.seed);
      std::cout << "\n"
                << a.protocol << ": " << devices << " devices, max dim " << max_dim << ", "
                << tasks.size() << " tasks (seed " << a.seed << ")\n";
      text_table table({"planner", "cost ms", "success", "speedup/random", "time ms/task",
                        "cache hit", "gap to LB", "balance"});
      nlohmann::json setting;
      setting["devices"] = devices;
      setting["max_dim"] = max_dim;
      setting["tasks"] = tasks.size();
      setting["planners"] = nlohmann::json::array();
      summary_header.push_back(std::to_string(devices) + "dev/" + std::to_string(max_dim));
      for (std::size_t p = 0; p < rows.size(); ++p) {
        const auto& r = rows[p];
        const std::string cost = r.all_succeeded() ? fixed(r.mean_cost_ms) : "-";
        table.add({r.planner, cost, fixed(100.0 * r.success_rate(), 1) + "%",
                   r.speedup_tasks ? fixed(r.mean_speedup, 3) + "x" : "-",
                   fixed(r.mean_sharding_ms, 3),
                   r.has_cache() ? fixed(100.0 * r.cache_hit_rate(), 1) + "%" : "-",
                   r.succeeded ? fixed(100.0 * r.mean_gap, 1) + "%" : "-",
                   r.succeeded ? fixed(r.mean_balance, 3) : "-"});
        summary[p].push_back(cost);
        setting["planners"].push_back(embplan_cli::to_json(r));
      }
      table.print(std::cout);
      report["settings"].push_back(setting);
    }
  }
  if (summary_header.size() > 2) {
    std::cout << "\nmean cost (ms) per setting, devices/max dim (NeuroShard Table 1 shape):\n";
    text_table table(summary_header);
    for (auto& row : summary)
      table.add(std::move(row));
    table.print(std::cout);
  }
  std::cout << "\nspeedup/random = mean of cost(random)/cost(planner) over tasks both solved; "
               "time = search wall time per task; cache hit = cost-cache hits / lookups "
               "(NeuroShard §3.3: device sets, or single pieces where the model folds "
               "per-piece terms); gap to LB = cost / additive lower bound - 1, the bound being "
               "the larger of the costliest table and the sum of all tables' costs / devices, "
               "each table priced alone by the same meter (a true bound for table-wise plans "
               "on an additive meter; column splits, and meters that price a device unlike "
               "the sum of its tables alone, e.g. the learned one, can go below it: a negative "
               "gap); balance = min/max device compute (AutoShard)\n";
  if (!a.json.empty()) {
    embplan::io::write_json_file(a.json, report);
    std::cout << "wrote " << a.json << '\n';
  }
  return 0;
}

int run_compare(const compare_args& a) {
  embplan_cli::check_meter(a.meter);
  const auto pm = embplan_cli::load_planning_model(a.model);
  const auto [meter, text] = meter_of(a.meter, pm, a.reference);
  const auto source = task_source_of(a, pm);
  if (pm.compute) return run_compare_with(a, meter, text, *pm.compute, pm.text, source);
  return run_compare_with(a, meter, text, embplan::analytic_cost{}, pm.text, source);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"embplan: plan where embedding tables live across devices"};
  app.require_subcommand(1);

  pool_args pa;
  auto* pool = app.add_subcommand(
      "pool", "Generate the synthetic MetaSyn-like pool and print its statistics");
  pool->add_option("--seed", pa.seed, "random seed")->capture_default_str();
  pool->add_option("--tables", pa.tables, "number of tables")->capture_default_str();
  pool->add_option("--out", pa.out, "write the pool as JSON");

  tasks_args ta;
  auto* tasks = app.add_subcommand("tasks", "Generate sharding tasks by a paper's protocol");
  tasks->add_option("--protocol", ta.protocol, "neuroshard | dreamshard | autoshard")
      ->capture_default_str();
  tasks->add_option("--devices", ta.devices, "devices per task")->capture_default_str();
  tasks->add_option("--max-dim", ta.max_dim, "largest table dimension (power of two)")
      ->capture_default_str();
  tasks->add_option("--count", ta.count, "number of tasks")->capture_default_str();
  tasks->add_option("--seed", ta.seed, "random seed")->capture_default_str();
  tasks->add_option("--memory-gib", ta.memory_gib, "memory per device for embeddings, GiB")
      ->capture_default_str();
  tasks->add_option("--pool", ta.pool, "table pool JSON (default: the synthetic pool, seed 0)");
  tasks
      ->add_option("--half", ta.half,
                   "default (the protocol's) | whole | train | test half of the pool")
      ->capture_default_str();
  tasks->add_option("--split-seed", ta.split_seed, "seed of the pool's split into halves")
      ->capture_default_str();
  tasks->add_option("--out", ta.out, "output tasks JSON")->required();

  plan_args pl;
  auto* plan = app.add_subcommand("plan", "Plan one task and print the per-device costs");
  plan->add_option("--task", pl.task, "task JSON (one task or {\"tasks\": [...]})")->required();
  plan->add_option("--index", pl.index, "which task of the file")->capture_default_str();
  plan->add_option("--planner", pl.planner,
                   "planner name (see `embplan compare --help`); prefix rowwise_ "
                   "(e.g. rowwise_lookup_greedy) to split tables that fit no device by rows")
      ->capture_default_str();
  plan->add_option("--seed", pl.seed, "random seed")->capture_default_str();
  plan->add_option("--out", pl.out, "write the plan as JSON");
  plan->add_option("--torchrec", pl.torchrec,
                   "write a TorchRec-style ParameterSharding description");
  plan->add_option("--trace", pl.trace, "write the per-device timeline as Chrome trace-event JSON");
  plan->add_option("--model", pl.model,
                   "learned compute-cost model neuroshard plans on: a file of `embplan train "
                   "compute`, or none (analytic); default: the bundled CPU-meter model");
  plan->add_option("--meter", pl.meter,
                   "simulated (the learned model, else analytic) | analytic | measured (CPU meter)")
      ->capture_default_str();
  add_reference_options(plan, pl.reference);

  compare_args ca;
  const std::string planner_list = preset_list();
  auto* compare = app.add_subcommand(
      "compare", "Run every planner on the same tasks (NeuroShard Table 1 shape)");
  compare->add_option("--protocol", ca.protocol, "neuroshard | dreamshard | autoshard")
      ->capture_default_str();
  compare->add_option("--devices", ca.devices, "device counts, one table each")
      ->capture_default_str();
  compare->add_option("--max-dim", ca.max_dims, "largest table dimensions, one table each")
      ->capture_default_str();
  compare->add_option("--count", ca.count, "tasks per setting")->capture_default_str();
  compare->add_option("--seed", ca.seed, "random seed")->capture_default_str();
  compare->add_option("--memory-gib", ca.memory_gib, "memory per device, GiB")
      ->capture_default_str();
  compare->add_option("--pool", ca.pool, "table pool JSON (default: the synthetic pool, seed 0)");
  compare
      ->add_option("--half", ca.half,
                   "tables from: auto (the half the learned model did not train on; else the "
                   "whole pool) | default | whole | train | test")
      ->capture_default_str();
  compare->add_option("--split-seed", ca.split_seed, "with --half train|test: the split's seed")
      ->capture_default_str();
  compare
      ->add_option("--planners", ca.planners,
                   "planners to run (default: all: " + planner_list + ")")
      ->delimiter(',');
  compare->add_option("--json", ca.json, "also write the results as JSON");
  compare
      ->add_option("--meter", ca.meter,
                   "simulated (the learned model, else analytic) | analytic | measured (CPU "
                   "meter; slow: use a small --count)")
      ->capture_default_str();
  compare->add_option("--model", ca.model,
                      "learned compute-cost model neuroshard plans on: a file of `embplan train "
                      "compute`, or none (analytic); default: the bundled CPU-meter model");
  add_reference_options(compare, ca.reference);

  embplan_cli::collect_args co;
  auto* collect = app.add_subcommand(
      "collect", "Measure cost data (NeuroShard Alg. 3-5) as JSON lines; resumable; MPI-aware");
  collect->add_option("kind", co.kind, "compute | comm")->required();
  collect->add_option("--out", co.out, "JSON-lines file (appended; ids on file are skipped)")
      ->required();
  collect->add_option("--samples", co.samples, "sample ids 0..N-1 to have on file")
      ->capture_default_str();
  collect->add_option("--seed", co.seed, "random seed")->capture_default_str();
  collect->add_option("--pool", co.pool, "table pool JSON (default: the synthetic pool, seed 0)");
  collect->add_option("--half", co.half, "whole | train | test half of the pool (DreamShard split)")
      ->capture_default_str();
  collect->add_option("--split-seed", co.split_seed, "seed of the pool's split into halves")
      ->capture_default_str();
  collect->add_option("--dims", co.dims, "augmentation dims (Alg. 3)")
      ->delimiter(',')
      ->capture_default_str();
  collect->add_option("--min-tables", co.min_tables, "compute: fewest tables per combination")
      ->capture_default_str();
  collect->add_option("--max-tables", co.max_tables, "compute: most tables per combination")
      ->capture_default_str();
  collect->add_option("--devices", co.devices, "comm: devices (default: MPI ranks, else 4)");
  collect->add_option("--min-place", co.min_place, "comm: fewest tables per placement")
      ->capture_default_str();
  collect->add_option("--max-place", co.max_place, "comm: most tables per placement")
      ->capture_default_str();
  collect->add_option("--max-start-ms", co.max_start_ms, "comm: start times in [0, this]")
      ->capture_default_str();
  collect->add_option("--memory-gib", co.memory_gib, "comm: memory per device, GiB")
      ->capture_default_str();
  collect
      ->add_option("--batch-size", co.batch_size, "bags per table (compute) / global batch (comm)")
      ->capture_default_str();
  collect
      ->add_option("--max-weight-mib", co.max_weight_mib,
                   "compute: weights materialised per sample (rows scaled down to fit)")
      ->capture_default_str();
  embplan_cli::add_protocol_options(collect, co.warmup, co.runs, co.drop);
  collect->add_flag("--reference", co.reference,
                    "compute: pair every timed run with a fixed reference shard and scale by it "
                    "(cancels a shared machine's slow and fast spells)");
  collect->add_option("--reference-ms", co.reference_ms,
                      "compute: the reference shard's time to scale to (implies --reference; "
                      "default: measured once by rank 0); recorded in every record");
  collect->add_flag("--quiet", co.quiet, "no progress bar");

  embplan_cli::skew_args sk;
  auto* skew = app.add_subcommand(
      "skew", "Row-wise hash sharding of one table: load skew, hot-row replication, gather check");
  skew->add_option("--rows", sk.rows, "table rows N")->capture_default_str();
  skew->add_option("--dim", sk.dim, "embedding dimension d")->capture_default_str();
  skew->add_option("--shards", sk.shards, "shards S")->capture_default_str();
  skew->add_option("--requests", sk.requests, "requested IDs in the batch")->capture_default_str();
  skew->add_option("--zipf", sk.zipf, "Zipf exponent of the requests")->capture_default_str();
  skew->add_option("--seed", sk.seed, "random seed")->capture_default_str();
  skew->add_option("--multiplier", sk.multiplier, "hash multiplier A: shard = (id * A) mod S")
      ->capture_default_str();
  skew->add_option("--replicate", sk.replicate,
                   "replicate the k hottest IDs; prints the skew for k = 0, 1, 2, 5, ... K");
  skew->add_option("--target-skew", sk.target_skew, "print the smallest k reaching this skew");
  skew->add_option("--routing", sk.routing,
                   "reads of replicated IDs: balanced (least-loaded holder) | random")
      ->capture_default_str();
  skew->add_option("--replicas", sk.replicas, "shards holding each hot row (0 = all)")
      ->capture_default_str();
  skew->add_option("--workers", sk.workers, "workers the batch is split over (gradient pushes)")
      ->capture_default_str();
  skew->add_option("--top", sk.top, "hottest IDs listed")->capture_default_str();

  embplan_cli::size_args sz;
  auto* size = app.add_subcommand(
      "size", "Table bytes per dtype and optimizer, shards per server budget, QR compression");
  size->add_option("--rows", sz.rows, "table rows N")->required();
  size->add_option("--dim", sz.dim, "embedding dimension d")->required();
  size->add_option("--dtype", sz.dtype, "fp32 | fp16 | int8")->capture_default_str();
  size->add_option("--optimizer", sz.optimizer, "none | sgd | adam | rowwise_adagrad")
      ->capture_default_str();
  size->add_option("--budget-gib", sz.budget_gib, "per-server memory budget, GiB");
  size->add_option("--qr-m", sz.qr_m, "remainder-table size m (default: the optimal m)");

  embplan_cli::observe_args ob;
  auto* observe =
      app.add_subcommand("observe", "Measure the papers' three cost observations on the CPU meter");
  embplan_cli::add_observe_options(observe, ob);
  observe->add_flag("--repeatability", ob.repeatability,
                    "only (0): CV of --repeats measurements of one 10-table shard under six "
                    "meter configurations (wall / thread CPU clock; protocol / median of 3 / "
                    "drift reference)");
  observe->add_option("--reference-ms", ob.reference_ms,
                      "--repeatability: the drift-reference rows' reference time (default: "
                      "each meter measures it at its start)");
  observe->add_flag("--separate", ob.separate,
                    "(1): also time forward and backward alone, and compare each fused with "
                    "its sum (three times the measuring)");
  observe
      ->add_option("--max-weight-mib", ob.max_weight_mib,
                   "largest shard materialised, MiB (rows scaled down to fit)")
      ->capture_default_str();

  embplan_cli::train_args tr;
  auto* train = app.add_subcommand(
      "train",
      "Train the compute- or communication-cost models on `collect` records (NeuroShard §3.2)");
  train->add_option("kind", tr.kind, "compute | comm")->required();
  train->add_option("--data", tr.data, "JSON-lines records of `embplan collect compute|comm`")
      ->required();
  train->add_option("--out", tr.out, "model file (safetensors with metadata)")->required();
  train->add_option("--pool", tr.pool, "the pool the records index (default: synthetic, seed 0)");
  train->add_option("--features", tr.features, "embplan21 | neuroshard20")->capture_default_str();
  train
      ->add_option("--epochs", tr.epochs,
                   "training epochs, the best validation epoch kept (0: compute 60, comm 1000)")
      ->capture_default_str();
  train->add_option("--seed", tr.seed, "random seed")->capture_default_str();
  train->add_option("--trained-on", tr.trained_on, "recorded in the model file");
  train
      ->add_option("--split-seed", tr.split_seed,
                   "compute: the pool split by which the file records which half trained it")
      ->capture_default_str();
  train->add_option("--eval", tr.eval,
                    "also judge the model on these records (e.g. the pool's other half)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "embplan: error: " << e.what() << " (see --help)\n";
    return exit_bad_input;
  }

  try {
    if (*pool) return run_pool(pa);
    if (*tasks) return run_tasks(ta);
    if (*plan) return run_plan(pl);
    if (*compare) return run_compare(ca);
    if (*observe) return embplan_cli::run_observe(ob);
    if (*train) return embplan_cli::run_train(tr);
    if (*skew) return embplan_cli::run_skew(sk);
    if (*size) return embplan_cli::run_size(sz);
    if (*collect) {
      const embplan_cli::world w;
      try {
        return embplan_cli::run_collect(co, w);
      } catch (const embplan::error& e) {
        std::cerr << "embplan: error: " << e.what() << '\n';
        w.abort(exit_bad_input);
      } catch (const std::exception& e) {
        std::cerr << "embplan: internal error: " << e.what() << '\n';
        w.abort(1);
      }
    }
  } catch (const embplan::error& e) {
    std::cerr << "embplan: error: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << "embplan: internal error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
