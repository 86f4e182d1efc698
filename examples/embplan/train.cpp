// `embplan train compute`: fits NeuroShard's compute-cost network to the
// records of `embplan collect compute` (learn/train.hpp) and writes it as a
// neural_cost file (safetensors + metadata: feature set, meter, batch size,
// what it was trained on, and its metrics).
// `embplan train comm`: fits NeuroShard's forward and backward communication
// models to `embplan collect comm` records (learn/train_comm.hpp) and writes
// them as one neural_comm file (metadata: device count, meter, batch size).
// `embplan train dreamshard`: DreamShard's Algorithm 1 (NeurIPS'22 §3,
// rl/dreamshard_train.hpp) on a tasks file: the cost network learns from
// placements the meter measures, the policy from the cost network's estimate;
// writes both networks as one rl::dreamshard_policy file (metadata: features,
// meter, pool half, hyperparameters, learning curve). Communication is the
// analytic all-to-all model, or, under `mpirun -np D` (one rank per device of
// the tasks) with --meter cpu, measured: every rank runs the same training,
// each placement measured by meter::mpi::measure_plan (each rank times its own
// device's shard, the all-to-alls run for real between the ranks, every rank
// gets the same figures), so the ranks stay identical; rank 0 prints and
// writes the files.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/io/json.hpp"
#include "embplan/io/json_task.hpp"
#include "embplan/learn/train.hpp"
#include "embplan/learn/train_comm.hpp"
#include "embplan/rl/dreamshard_train.hpp"
#include "models.hpp"
#include "options.hpp"
#include "planners.hpp"
#include "progress.hpp"
#include "text_table.hpp"
#include "train.hpp"
#include "world.hpp"

namespace embplan_cli {

std::vector<embplan::task> load_training_tasks(const std::string& path, bool one_device_count) {
  if (!std::filesystem::exists(path)) {
    embplan::detail::fail("--tasks", path, "a tasks JSON file (embplan tasks)");
  }
  auto tasks = embplan::io::read_tasks_file(path);
  if (tasks.empty()) embplan::detail::fail("--tasks", path, "a file of at least one task");
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const std::string where = "tasks[" + std::to_string(i) + "]";
    if (one_device_count && tasks[i].cluster.size() != tasks[0].cluster.size()) {
      embplan::detail::fail(where + ".cluster.size", tasks[i].cluster.size(),
                            "the device count of tasks[0] (" +
                                std::to_string(tasks[0].cluster.size()) +
                                "): one policy is trained per device count");
    }
    check_dim_multiple(tasks[i].tables, where + ".tables");
  }
  return tasks;
}

// By table name: `embplan tasks` keeps the pool's names ("#2" after a copy's).
std::string pool_half_of_tasks(std::span<const embplan::task> tasks,
                               std::span<const embplan::table_spec> pool,
                               std::uint64_t split_seed) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < pool.size(); ++i)
    index.emplace(pool[i].name, i);
  std::vector<std::size_t> seen;
  for (const auto& t : tasks) {
    for (const auto& spec : t.tables) {
      const auto it = index.find(spec.name.substr(0, spec.name.find('#')));
      if (it == index.end()) return "whole";
      seen.push_back(it->second);
    }
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  return std::string(
      embplan::data::to_string(embplan::data::half_holding(seen, pool.size(), split_seed)));
}

namespace {

// --meter cpu|analytic as compare's meter: cpu is its measured meter (models.cpp),
// drift reference included.
meter_args library_meter_args(const train_args& a) {
  meter_args m;
  m.name = a.meter == "cpu" ? "measured" : "analytic";
  m.reference = a.reference;
  m.reference_ms = a.reference_ms;
  m.flush_mib = a.meter == "cpu" ? a.flush_mib : 0;
  return m;
}

}  // namespace

void check_training_meter(const train_args& a, std::string_view kind) {
  const bool own = a.own && a.meter == a.own->name;
  if (a.meter != "cpu" && a.meter != "analytic" && !own) {
    embplan::detail::fail("--meter", a.meter,
                          a.own ? "\"cpu\", \"analytic\" or \"" + a.own->name + "\""
                                : std::string("\"cpu\" or \"analytic\""));
  }
  if (a.flush_mib != 0 && a.meter != "cpu") {
    embplan::detail::fail("--flush-mib", a.flush_mib,
                          "0 unless --meter cpu (it sizes the CPU meter's cache flush)");
  }
  if (own && (a.reference || a.reference_ms > 0.0)) {
    embplan::detail::fail("--reference", true,
                          "only with --meter cpu (the drift reference scales the CPU meter)");
  }
  if (own && kind == "autoshard" && a.autoshard.actors > 1) {
    embplan::detail::fail("--actors", a.autoshard.actors,
                          "1 with --meter " + a.own->name + " (it measures one plan at a time)");
  }
  if (!own) check_meter(library_meter_args(a));
}

meter_choice training_meter(const train_args& a) {
  if (a.own && a.meter == a.own->name) {
    if (!a.own->make) embplan::detail::fail("--meter", a.meter, "a meter this program has");
    return a.own->make();
  }
  return meter_of(library_meter_args(a), planning_model{});
}

embplan::rl::train_inputs training_inputs(const train_args& a,
                                          const std::map<std::string, std::string>& options) {
  // The library's option names and the flags that set them.
  static constexpr std::pair<std::string_view, std::string_view> flags[] = {
      {"iterations", "--iterations"},
      {"collect", "--collect"},
      {"cost_steps", "--cost-steps"},
      {"cost_batch", "--cost-batch"},
      {"rl_steps", "--rl-steps"},
      {"episodes", "--episodes"},
      {"lr", "--lr"},
      {"learning_rate", "--lr"},
      {"entropy_weight", "--entropy-weight"},
      {"entropy_cost", "--entropy-weight"},
      {"max_grad_norm", "--max-grad-norm"},
      {"seed", "--seed"},
      {"head_init", "--policy-head-init"},
      {"updates", "--updates"},
      {"batch", "--batch"},
      {"policy_lag", "--policy-lag"},
      {"baseline_cost", "--baseline-cost"},
      {"cost_updates", "--cost-updates"},
      {"cost_buffer", "--cost-buffer"},
  };
  embplan::rl::train_inputs in;
  for (const auto& [key, value] : options) {
    if (key == "iterations_done") continue;  // the progress, not an input
    std::string field = "options." + key;    // one no flag sets
    for (const auto& [name, flag] : flags)
      if (name == key) field = flag;
    in[field] = value;
  }
  in["--tasks"] = embplan::rl::content_fingerprint(a.tasks);
  in["--pool"] =
      a.pool.empty() ? "the synthetic pool (seed 0)" : embplan::rl::content_fingerprint(a.pool);
  in["--split-seed"] = std::to_string(a.split_seed);
  in["--meter"] = a.meter;
  if (a.own && a.meter == a.own->name) {
    for (const auto& [flag, value] : a.own->options)
      in[flag] = value();
  }
  in["--reference"] = a.reference || a.reference_ms > 0.0 ? "true" : "false";
  in["--reference-ms"] = embplan::rl::detail::mdp_number_text(a.reference_ms);
  in["--flush-mib"] = std::to_string(a.flush_mib);
  return in;
}

namespace {

// The kinds of `train` each option applies to (one not listed: every kind).
// An option given for another kind is refused: it would be ignored.
constexpr std::pair<std::string_view, std::string_view> train_option_kinds[] = {
    {"--data", "compute comm"},
    {"--tasks", "dreamshard autoshard"},
    {"--pool", "compute dreamshard autoshard"},
    {"--features", "compute"},
    {"--target", "compute"},
    {"--loss", "compute"},
    {"--epochs", "compute comm"},
    {"--split-seed", "compute dreamshard autoshard"},
    {"--eval", "compute comm"},
    {"--meter", "dreamshard autoshard"},
    {"--reference", "dreamshard autoshard"},
    {"--reference-ms", "dreamshard autoshard"},
    {"--flush-mib", "dreamshard autoshard"},
    {"--iterations", "dreamshard"},
    {"--collect", "dreamshard"},
    {"--cost-steps", "dreamshard"},
    {"--cost-batch", "dreamshard autoshard"},
    {"--rl-steps", "dreamshard"},
    {"--episodes", "dreamshard"},
    {"--lr", "dreamshard autoshard"},
    {"--entropy-weight", "dreamshard autoshard"},
    {"--max-grad-norm", "dreamshard autoshard"},
    {"--policy-head-init", "dreamshard"},
    {"--updates", "autoshard"},
    {"--batch", "autoshard"},
    {"--actors", "autoshard"},
    {"--policy-lag", "autoshard"},
    {"--cost-updates", "autoshard"},
    {"--cost-buffer", "autoshard"},
    {"--baseline-cost", "autoshard"},
    {"--checkpoint", "dreamshard autoshard"},
    {"--resume", "dreamshard autoshard"},
};

void check_options_apply(const train_args& a) {
  for (const auto& [flag, value] : a.given) {
    for (const auto& [name, kinds] : train_option_kinds) {
      if (name != flag) continue;
      std::string words(kinds);
      bool applies = false;
      std::string listed;
      for (std::size_t at = 0; at < words.size();) {
        const auto end = std::min(words.find(' ', at), words.size());
        const std::string kind = words.substr(at, end - at);
        applies = applies || kind == a.kind;
        listed += (listed.empty() ? "" : " or ") + kind;
        at = end + 1;
      }
      if (!applies) {
        throw embplan::error(embplan::detail::field_message(
            flag, value,
            "only with train " + listed + " (train " + a.kind + " takes no " + flag + ")"));
      }
    }
  }
}

constexpr const char* dreamshard_comm_text =
    "communication: the analytic all-to-all model (not measured)";
constexpr const char* dreamshard_mpi_comm_text =
    "communication: measured, MPI_Alltoallv between the ranks (one per device) with the "
    "plan's per-device byte counts and start skews";
constexpr const char* dreamshard_mpi_meter_text =
    "CPU meter (each device's shard run as one fused embedding bag and timed, AutoShard "
    "protocol, one MPI rank per device, the ranks in turn)";

// The measuring meters' texts (`compare`'s) name their communication; the
// training line names it once, after the meter.
std::string without_comm(std::string text) {
  constexpr std::string_view named = "; communication from the analytic all-to-all model";
  if (const auto at = text.find(named); at != std::string::npos) text.erase(at, named.size());
  return text;
}

int run_train_dreamshard(const train_args& a, const world& w) {
  namespace rl = embplan::rl;
  rl::dreamshard_train_options o = a.rl;
  o.seed = a.seed;
  if (a.lr >= 0.0) o.lr = a.lr;
  if (a.max_grad_norm >= 0.0) o.max_grad_norm = a.max_grad_norm;
  if (a.entropy >= 0.0) o.entropy_weight = a.entropy;
  if (a.cost_batch > 0) o.cost_batch = a.cost_batch;
  o.head_init = rl::parse_policy_head_init(a.head_init, "--policy-head-init");
  // Every option checked before the first line of output.
  if (a.tasks.empty()) embplan::detail::fail("--tasks", "(none)", "a tasks file for dreamshard");
  check_training_meter(a, "dreamshard");
  if (!(o.lr > 0.0)) embplan::detail::fail("--lr", o.lr, "a learning rate > 0");
  if (!a.resume.empty() && !std::filesystem::exists(a.resume)) {
    embplan::detail::fail("--resume", a.resume, "a checkpoint file (--checkpoint)");
  }
  const auto tasks = load_training_tasks(a.tasks, /*one_device_count=*/true);
  const auto pool = load_pool(a.pool);
  // Under mpirun: one rank per device, the CPU meter, no drift reference (the
  // MPI plan meter has none).
  const bool mpi = w.size() > 1;
  if (mpi) {
    if (a.meter != "cpu") {
      embplan::detail::fail("--meter", a.meter, "\"cpu\" under mpirun (the ranks measure)");
    }
    if (a.reference || a.reference_ms > 0.0) {
      embplan::detail::fail("--reference", true,
                            "off under mpirun (the MPI plan meter has no drift reference)");
    }
    if (tasks[0].cluster.size() != static_cast<std::size_t>(w.size())) {
      embplan::detail::fail("tasks[0].cluster.size", tasks[0].cluster.size(),
                            "one device per MPI rank (" + std::to_string(w.size()) + " ranks)");
    }
  }
  // What the run is bound to: a checkpoint records it, a resume must match it.
  auto inputs = training_inputs(a, rl::dreamshard_hyperparameters(o, 0));
  inputs["mpirun ranks"] = std::to_string(w.size());
  auto state =
      a.resume.empty() ? rl::dreamshard_train_start(o) : rl::load_checkpoint(a.resume, o, inputs);
  const auto chosen = training_meter(a);
  const auto& meter = chosen.meter;
  const std::string meter_text = mpi ? dreamshard_mpi_meter_text : without_comm(chosen.text);
  const std::string comm_text = mpi ? dreamshard_mpi_comm_text : dreamshard_comm_text;
  const rl::cost_model_meter<any_meter> modelled{&meter};
  const auto measure = [&](const embplan::task& t, const embplan::plan& p) {
    if (mpi) {
      // The ranks train in lockstep: each must be measuring rank 0's placement.
      std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over the devices in shard order
      for (const auto& s : p.shards)
        h = (h ^ (std::uint64_t{s.table} << 32 | s.device)) * 1099511628211ULL;
      const auto mine = static_cast<double>(h >> 11);  // exact in a double
      if (w.broadcast(mine) != mine) {
        embplan::detail::fail("train dreamshard.rank", w.rank(),
                              "the placement of rank 0 (the ranks' training diverged)");
      }
      return rl::dreamshard_measurement_of(
          measure_plan_on_ranks(w, t, p, flush_bytes_of(a.flush_mib)));
    }
    return modelled(t, p);
  };

  // Rank 0 speaks and writes; the others train the same policy silently.
  const bool speaks = w.rank() == 0;
  std::ostream out(speaks ? std::cout.rdbuf() : nullptr);
  const std::string half = pool_half_of_tasks(tasks, pool, a.split_seed);
  out << "DreamShard training (Algorithm 1) on " << tasks.size() << " tasks of " << a.tasks << " ("
      << tasks[0].cluster.size() << " devices; tables from the "
      << (half == "whole"
              ? "whole pool or not one half of it"
              : half + " half of the pool (split seed " + std::to_string(a.split_seed) + ")")
      << ")\nmeter: " << a.meter << ", " << meter_text << "; " << comm_text << '\n';
  if (state.iteration > 0) {
    out << "resumed from " << a.resume << " after " << state.iteration << " of " << o.iterations
        << " iterations\n";
  }

  progress bar("train dreamshard", "iterations", static_cast<std::size_t>(o.iterations),
               !a.quiet && speaks, static_cast<std::size_t>(state.iteration));
  bar.advance(0);
  std::vector<rl::dreamshard_progress> rows;
  const auto on_iteration = [&](const rl::dreamshard_progress& p) {
    rows.push_back(p);
    bar.note("last " + fixed(p.mean_measured_ms, 3) + " ms measured");
  };
  const auto started = progress::clock::now();
  while (state.iteration < o.iterations) {
    rl::dreamshard_train(tasks, measure, o, state, embplan::memory_capacity{}, on_iteration, 1);
    if (!a.checkpoint.empty() && speaks) rl::save_checkpoint(a.checkpoint, state, o, inputs);
    bar.advance();
  }
  bar.clear();
  const double seconds = std::chrono::duration<double>(progress::clock::now() - started).count();

  text_table table({"iteration", "mean measured ms", "cost loss", "mean RL reward"});
  const auto first_here = state.learning_curve.size() - rows.size();
  for (std::size_t i = 0; i < state.learning_curve.size(); ++i) {
    const bool here = i >= first_here;
    table.add({std::to_string(i + 1), fixed(state.learning_curve[i], 3),
               here ? fixed(rows[i - first_here].cost_loss, 4) : "(resumed)",
               here ? fixed(rows[i - first_here].mean_reward, 3) : "(resumed)"});
  }
  table.print(out);
  out << "learning curve: mean measured ms of each iteration's " << o.collect
      << " sampled placements; cost loss: the cost network's MSE sum (ms^2); reward: minus the "
         "estimated overall ms\n"
      << rows.size() << " iterations in " << progress::duration_text(seconds) << '\n';

  embplan::dreamshard_cost_metadata meta;
  meta.features = embplan::feature_set::embplan21;
  meta.meter = a.meter;
  meta.trained_on = a.trained_on.empty() ? a.tasks : a.trained_on;
  meta.pool_half = half;
  meta.split_seed = a.split_seed;
  // Plain keys: the library keeps every non-"embplan." key as extra metadata.
  meta.extra["meter_description"] = meter_text + "; " + comm_text;
  meta.extra["communication"] = mpi ? "mpi" : "analytic";
  meta.extra["tasks"] = std::to_string(tasks.size());
  meta.extra["devices"] = std::to_string(tasks[0].cluster.size());
  if (mpi) meta.extra["mpi_ranks"] = std::to_string(w.size());
  if (!speaks) return 0;
  const auto policy = rl::dreamshard_trained_policy(state, o, std::move(meta));
  policy.save(a.out);
  out << "wrote " << a.out << '\n';
  if (!a.checkpoint.empty()) out << "checkpoint: " << a.checkpoint << '\n';
  return 0;
}

int run_train_comm(const train_args& a) {
  const auto records = embplan::learn::read_comm_records(a.data);
  embplan::learn::comm_train_options o;
  if (a.epochs != 0) o.epochs = a.epochs;
  o.seed = a.seed;
  // The forward model's epochs, then the backward model's.
  progress bar("train comm", "epochs", 2 * static_cast<std::size_t>(std::max(o.epochs, 0)),
               !a.quiet);
  o.on_epoch = [&bar] { bar.advance(); };
  const auto trained = embplan::learn::train_comm_models(records, o);
  bar.clear();
  const auto& report = trained.report;

  embplan::neural_comm_metadata meta;
  meta.devices = report.devices;
  meta.meter = report.meter;
  meta.batch_size = report.batch_size;
  meta.trained_on = a.trained_on.empty() ? a.data : a.trained_on;
  meta.extra["metrics.records"] = std::to_string(records.size());
  meta.extra["metrics.forward_test_r2"] = fixed(report.forward.test.r2, 4);
  meta.extra["metrics.forward_test_mape"] = fixed(report.forward.test.mape, 4);
  meta.extra["metrics.backward_test_r2"] = fixed(report.backward.test.r2, 4);
  meta.extra["metrics.backward_test_mape"] = fixed(report.backward.test.mape, 4);
  const embplan::neural_comm model(trained.forward, trained.backward, meta);

  text_table table({"model", "split", "samples", "MSE (ms^2)", "MAPE", "R^2"});
  const auto rows = [&](const char* name, const embplan::learn::comm_fit& fit) {
    for (const auto& [split, m] :
         {std::pair{"train", fit.train}, {"validation", fit.validation}, {"test", fit.test}}) {
      table.add({name, split, std::to_string(m.samples), fixed(m.mse, 4),
                 fixed(100.0 * m.mape, 1) + " %", fixed(m.r2, 3)});
    }
  };
  rows("forward", report.forward);
  rows("backward", report.backward);
  if (!a.eval.empty()) {
    const auto other = embplan::learn::read_comm_records(a.eval);
    const auto [f, b] = embplan::learn::evaluate_comm_models(model, other);
    table.add({"forward", "eval", std::to_string(f.samples), fixed(f.mse, 4),
               fixed(100.0 * f.mape, 1) + " %", fixed(f.r2, 3)});
    table.add({"backward", "eval", std::to_string(b.samples), fixed(b.mse, 4),
               fixed(100.0 * b.mape, 1) + " %", fixed(b.r2, 3)});
  }
  std::cout << "communication models on " << records.size() << " records of " << a.data << " ("
            << report.devices << " devices, meter " << report.meter << ", batch "
            << report.batch_size << "), best epochs " << report.forward.best_epoch + 1
            << " (forward) and " << report.backward.best_epoch + 1 << " (backward) of " << o.epochs
            << "; metrics over all device outputs\n";
  table.print(std::cout);
  if (!a.eval.empty()) std::cout << "eval: " << a.eval << '\n';
  model.save(a.out);
  std::cout << "wrote " << a.out << '\n';
  return 0;
}

int run_train(const train_args& a) {
  if (a.kind != "compute" && a.kind != "comm" && a.kind != "dreamshard" && a.kind != "autoshard") {
    embplan::detail::fail("train.kind", a.kind,
                          "\"compute\", \"comm\", \"dreamshard\" or \"autoshard\"");
  }
  check_options_apply(a);
  // Every file the run writes, before any work.
  check_output_paths({{"--out", &a.out}, {"--checkpoint", &a.checkpoint}});
  if (a.kind == "dreamshard" || a.kind == "autoshard") {
    const world w;
    const auto run = [&] {
      return a.kind == "dreamshard" ? run_train_dreamshard(a, w) : run_train_autoshard(a, w);
    };
    if (w.size() == 1) return run();
    return w.run_or_abort(run, exit_bad_input);
  }
  if (a.data.empty()) embplan::detail::fail("--data", "(none)", "a records file for " + a.kind);
  if (a.epochs < 0) embplan::detail::fail("--epochs", a.epochs, "a count >= 0 (0: the default)");
  if (a.kind == "comm") return run_train_comm(a);
  const auto pool = load_pool(a.pool);
  const auto records = embplan::learn::read_compute_records(a.data);
  embplan::learn::train_options o;
  o.features = embplan::parse_feature_set(a.features, "train.features");
  o.target = embplan::learn::parse_train_target(a.target, "--target");
  o.loss = embplan::learn::parse_train_loss(a.loss, "--loss");
  if (a.epochs != 0) o.epochs = a.epochs;
  o.seed = a.seed;
  progress bar("train compute", "epochs", static_cast<std::size_t>(std::max(o.epochs, 0)),
               !a.quiet);
  o.on_epoch = [&bar] { bar.advance(); };
  const auto [net, report] = embplan::learn::train_compute_model(records, pool, o);
  bar.clear();

  text_table table({"split", "samples", "MSE (ms^2)", "MAPE", "R^2", "Spearman"});
  const auto row = [&](const char* name, const embplan::learn::regression_metrics& m) {
    table.add({name, std::to_string(m.samples), fixed(m.mse, 4), fixed(100.0 * m.mape, 1) + " %",
               fixed(m.r2, 3), std::isnan(m.spearman) ? "-" : fixed(m.spearman, 3)});
  };
  row("train", report.train);
  row("validation", report.validation);
  row("test", report.test);
  if (!a.eval.empty()) {
    const auto other = embplan::learn::read_compute_records(a.eval);
    const auto m = embplan::learn::evaluate_compute_model(net, other, pool, o.features, o.target);
    row("eval", m);
  }
  std::cout << "compute-cost model on " << records.size() << " records of " << a.data << " (meter "
            << report.meter << ", " << report.batch_size << " bags per table; target "
            << embplan::learn::to_string(o.target) << ", loss " << embplan::learn::to_string(o.loss)
            << "), best epoch " << report.best_epoch + 1 << " of " << o.epochs << '\n';
  table.print(std::cout);
  if (!a.eval.empty()) std::cout << "eval: " << a.eval << '\n';

  embplan::neural_cost_metadata meta;
  meta.features = o.features;
  meta.meter = report.meter;
  meta.batch_size = report.batch_size;
  meta.forward_share = report.forward_share;
  meta.trained_on = a.trained_on.empty() ? a.data : a.trained_on;
  // Which half of the pool every record's tables come from, for `compare`.
  std::vector<std::size_t> seen;
  for (const auto& r : records)
    seen.insert(seen.end(), r.tables.begin(), r.tables.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  const auto half = embplan::data::half_holding(seen, pool.size(), a.split_seed);
  meta.pool_half = std::string(embplan::data::to_string(half));
  meta.split_seed = a.split_seed;
  std::cout << "the records use " << seen.size() << " of the pool's " << pool.size() << " tables: "
            << (half == embplan::data::pool_half::whole
                    ? std::string("not all from one half")
                    : "all from its " + meta.pool_half + " half")
            << " (split seed " << a.split_seed << ")\n";
  meta.extra["metrics.test_mape"] = fixed(report.test.mape, 4);
  meta.extra["metrics.test_r2"] = fixed(report.test.r2, 4);
  if (!std::isnan(report.test.spearman))
    meta.extra["metrics.test_spearman"] = fixed(report.test.spearman, 4);
  meta.extra["metrics.records"] = std::to_string(records.size());
  meta.extra["train.target"] = std::string(embplan::learn::to_string(o.target));
  meta.extra["train.loss"] = std::string(embplan::learn::to_string(o.loss));
  const embplan::neural_cost model(net, meta);
  model.save(a.out);
  std::cout << "wrote " << a.out << '\n';
  return 0;
}

}  // namespace

command add_train(CLI::App& app, std::shared_ptr<const program_meter> own) {
  auto a = std::make_shared<train_args>();
  a->own = own;
  if (own) a->meter = own->name;
  auto* sub = app.add_subcommand(
      "train",
      "Train the compute- or communication-cost models on `collect` records (NeuroShard §3.2), "
      "or DreamShard's cost and policy networks on a tasks file (DreamShard Alg. 1), or "
      "AutoShard's policy-value network with IMPALA against the meter (AutoShard Alg. 1)");
  sub->add_option("kind", a->kind, "compute | comm | dreamshard | autoshard")->required();
  sub->add_option("--data", a->data,
                  "compute, comm: JSON-lines records of `embplan collect compute|comm`");
  sub->add_option("--tasks", a->tasks,
                  "dreamshard, autoshard: training tasks JSON (`embplan tasks --protocol "
                  "dreamshard|autoshard`); dreamshard: all on one device count");
  sub->add_option("--out", a->out, "model file (safetensors with metadata)")->required();
  add_pool_option(sub, a->pool);
  sub->add_option("--features", a->features, "embplan21 | neuroshard20")->capture_default_str();
  sub->add_option("--target", a->target,
                  "compute: what the model predicts: total (forward + backward timed in one run, "
                  "NeuroShard's) | parts (timed apart and summed: what the meters price a device "
                  "with)")
      ->capture_default_str();
  sub->add_option("--loss", a->loss,
                  "compute: mse (squared ms, NeuroShard's) | relative (squared relative error: "
                  "every shard weighs alike)")
      ->capture_default_str();
  add_int_option(sub, "--epochs", a->epochs,
                 "training epochs, the best validation epoch kept (0: compute 60, comm 1000)", 0,
                 100000)
      ->capture_default_str();
  add_seed_option(sub, a->seed);
  sub->add_option("--trained-on", a->trained_on, "recorded in the model file");
  add_split_seed_option(sub, a->split_seed);
  sub->add_option("--eval", a->eval,
                  "also judge the model on these records (e.g. the pool's other half)");
  add_quiet_option(sub, a->quiet);

  auto& o = a->rl;
  sub->add_option("--meter", a->meter,
                  "dreamshard, autoshard: what measures the collected placements: cpu (compute "
                  "measured on this CPU; slow) | analytic (the analytic model; fast)" +
                      (own ? " | " + own->name + " (" + own->help + ")" : std::string()) +
                      ". dreamshard: communication is the analytic all-to-all, or measured under "
                      "mpirun -np <devices> with cpu; autoshard: under mpirun the ranks are "
                      "actors, each measuring its episodes")
      ->capture_default_str();
  sub->add_flag("--reference", a->reference,
                "--meter cpu: pair every timed run with a fixed reference shard and "
                "scale by it (cancels a shared machine's slow and fast spells)");
  add_real_option(sub, "--reference-ms", a->reference_ms,
                  "--meter cpu: the reference shard's time to scale to (implies "
                  "--reference; default: measured once at the start)",
                  0, 1e6);
  add_flush_option(sub, a->flush_mib, "--meter cpu: ");
  add_int_option(sub, "--iterations", o.iterations, "dreamshard: training iterations", 1, 100000)
      ->capture_default_str();
  add_int_option(sub, "--collect", o.collect,
                 "dreamshard: placements measured per iteration (N_collect)", 1, 100000)
      ->capture_default_str();
  add_int_option(sub, "--cost-steps", o.cost_steps,
                 "dreamshard: cost-network updates per iteration (N_cost)", 1, 1000000)
      ->capture_default_str();
  add_int_option(sub, "--cost-batch", a->cost_batch,
                 "dreamshard: placements (and devices) per cost update (N_batch, default 64); "
                 "autoshard: measured shards per cost update (default 512)",
                 1, 65536);
  add_int_option(sub, "--rl-steps", o.rl_steps, "dreamshard: policy updates per iteration (N_RL)",
                 1, 1000000)
      ->capture_default_str();
  add_int_option(sub, "--episodes", o.episodes,
                 "dreamshard: episodes per policy update (N_episode)", 1, 100000)
      ->capture_default_str();
  add_real_option(sub, "--lr", a->lr,
                  "Adam learning rate (> 0; dreamshard default 5e-4, autoshard 1e-3), decayed "
                  "linearly to 0",
                  0, 10);
  add_real_option(sub, "--entropy-weight", a->entropy,
                  "weight of the policy's entropy bonus (dreamshard default 0.001, autoshard "
                  "0.001)",
                  0, 1000);
  add_real_option(sub, "--max-grad-norm", a->max_grad_norm,
                  "clip each update's gradient to this global norm (0: no clipping; dreamshard "
                  "default 0, autoshard 40)",
                  0, 1e9);
  sub->add_option("--policy-head-init", a->head_init,
                  "dreamshard: how the policy's scoring head starts: zero (embplan's: the "
                  "untrained policy places uniformly at random) | torch (PyTorch's default, the "
                  "authors': can pile every table onto one device and not recover)")
      ->capture_default_str();
  auto& x = a->autoshard;
  add_int_option(sub, "--updates", x.updates, "autoshard: learner updates", 1, 10000000)
      ->capture_default_str();
  add_int_option(sub, "--batch", x.batch, "autoshard: episodes per learner update (B)", 1, 100000)
      ->capture_default_str();
  add_int_option(sub, "--actors", x.actors,
                 "autoshard: actor threads playing the episodes (the policy does not depend on "
                 "it; with --meter cpu they share this CPU's cores and disturb each other's "
                 "timings: keep 1, or spread over mpirun ranks)",
                 1, 1024)
      ->capture_default_str();
  add_int_option(sub, "--policy-lag", x.policy_lag,
                 "autoshard: updates the actors' policy lags the learner's (IMPALA; 0: "
                 "on-policy); with lag >= 1 the actors play while the learner learns",
                 0, 1000)
      ->capture_default_str();
  add_int_option(sub, "--cost-updates", x.cost_updates,
                 "autoshard: cost-head updates per learner update (N_cost)", 0, 1000000)
      ->capture_default_str();
  add_int_option(sub, "--cost-buffer", x.cost_buffer,
                 "autoshard: measured shards the cost buffer keeps", 1, 100000000)
      ->capture_default_str();
  add_real_option(sub, "--baseline-cost", x.learner.impala.baseline_cost,
                  "autoshard: weight of the value loss", 0, 1000)
      ->capture_default_str();
  sub->add_option("--checkpoint", a->checkpoint,
                  "dreamshard, autoshard: write the training state here after every iteration "
                  "(update)");
  sub->add_option("--resume", a->resume,
                  "dreamshard, autoshard: continue from a --checkpoint file, with the same options "
                  "(bit-equal to "
                  "an uninterrupted run)");
  return {sub, [a, sub] {
            a->given.clear();
            for (const CLI::Option* opt : sub->get_options()) {
              if (opt->count() == 0) continue;
              std::string shown;
              for (const auto& r : opt->results())
                shown += (shown.empty() ? "" : ",") + r;
              a->given.emplace_back(opt->get_name(), shown.empty() ? "true" : shown);
            }
            return run_train(*a);
          }};
}

}  // namespace embplan_cli
