// `embplan train compute`: fits NeuroShard's compute-cost network to the
// records of `embplan collect compute` (cost/train.hpp) and writes it as a
// neural_cost file (safetensors + metadata: feature set, meter, batch size,
// what it was trained on, and its metrics).
// `embplan train comm`: fits NeuroShard's forward and backward communication
// models to `embplan collect comm` records (cost/train_comm.hpp) and writes
// them as one neural_comm file (metadata: device count, meter, batch size).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/cost/train.hpp"
#include "embplan/cost/train_comm.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/io/json.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace embplan_cli {

namespace {

struct train_args {
  std::string kind;  // compute | comm
  std::string data;
  std::string out;
  std::string pool;  // the pool the records index (default: the synthetic pool, seed 0)
  std::string features = "embplan21";
  std::string trained_on;
  std::string eval;  // records to judge the model on (e.g. the other half of the pool)
  int epochs = 0;    // 0: the kind's default (train_options / comm_train_options)
  std::uint64_t seed = 0;
  std::uint64_t split_seed = 0;  // the pool split the records' half is told by
  bool quiet = false;            // no progress line
};

int run_train_comm(const train_args& a) {
  const auto records = embplan::cost::read_comm_records(a.data);
  embplan::cost::comm_train_options o;
  if (a.epochs != 0) o.epochs = a.epochs;
  o.seed = a.seed;
  // The forward model's epochs, then the backward model's.
  progress bar("train comm", "epochs", 2 * static_cast<std::size_t>(std::max(o.epochs, 0)),
               !a.quiet);
  o.on_epoch = [&bar] { bar.advance(); };
  const auto trained = embplan::cost::train_comm_models(records, o);
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
  const auto rows = [&](const char* name, const embplan::cost::comm_fit& fit) {
    for (const auto& [split, m] :
         {std::pair{"train", fit.train}, {"validation", fit.validation}, {"test", fit.test}}) {
      table.add({name, split, std::to_string(m.samples), fixed(m.mse, 4),
                 fixed(100.0 * m.mape, 1) + " %", fixed(m.r2, 3)});
    }
  };
  rows("forward", report.forward);
  rows("backward", report.backward);
  if (!a.eval.empty()) {
    const auto other = embplan::cost::read_comm_records(a.eval);
    const auto [f, b] = embplan::cost::evaluate_comm_models(model, other);
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
  if (a.kind != "compute" && a.kind != "comm") {
    embplan::detail::fail("train.kind", a.kind, "\"compute\" or \"comm\"");
  }
  check_output_path("--out", a.out);
  if (a.epochs < 0) embplan::detail::fail("--epochs", a.epochs, "a count >= 0 (0: the default)");
  if (a.kind == "comm") return run_train_comm(a);
  const auto pool = load_pool(a.pool);
  const auto records = embplan::cost::read_compute_records(a.data);
  embplan::cost::train_options o;
  o.features = embplan::cost::parse_feature_set(a.features, "train.features");
  if (a.epochs != 0) o.epochs = a.epochs;
  o.seed = a.seed;
  progress bar("train compute", "epochs", static_cast<std::size_t>(std::max(o.epochs, 0)),
               !a.quiet);
  o.on_epoch = [&bar] { bar.advance(); };
  const auto [net, report] = embplan::cost::train_compute_model(records, pool, o);
  bar.clear();

  text_table table({"split", "samples", "MSE (ms^2)", "MAPE", "R^2"});
  const auto row = [&](const char* name, const embplan::cost::regression_metrics& m) {
    table.add({name, std::to_string(m.samples), fixed(m.mse, 4), fixed(100.0 * m.mape, 1) + " %",
               fixed(m.r2, 3)});
  };
  row("train", report.train);
  row("validation", report.validation);
  row("test", report.test);
  if (!a.eval.empty()) {
    const auto other = embplan::cost::read_compute_records(a.eval);
    const auto m = embplan::cost::evaluate_compute_model(net, other, pool, o.features);
    row("eval", m);
  }
  std::cout << "compute-cost model on " << records.size() << " records of " << a.data << " (meter "
            << report.meter << ", " << report.batch_size << " bags per table), best epoch "
            << report.best_epoch + 1 << " of " << o.epochs << '\n';
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
  meta.extra["metrics.records"] = std::to_string(records.size());
  const embplan::neural_cost model(net, meta);
  model.save(a.out);
  std::cout << "wrote " << a.out << '\n';
  return 0;
}

}  // namespace

command add_train(CLI::App& app) {
  auto a = std::make_shared<train_args>();
  auto* sub = app.add_subcommand(
      "train",
      "Train the compute- or communication-cost models on `collect` records (NeuroShard §3.2)");
  sub->add_option("kind", a->kind, "compute | comm")->required();
  sub->add_option("--data", a->data, "JSON-lines records of `embplan collect compute|comm`")
      ->required();
  sub->add_option("--out", a->out, "model file (safetensors with metadata)")->required();
  add_pool_option(sub, a->pool);
  sub->add_option("--features", a->features, "embplan21 | neuroshard20")->capture_default_str();
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
  return {sub, [a] { return run_train(*a); }};
}

}  // namespace embplan_cli
