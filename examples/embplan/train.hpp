#pragma once
// `embplan train compute`: fits NeuroShard's compute-cost network to the
// records of `embplan collect compute` (cost/train.hpp) and writes it as a
// neural_cost file (safetensors + metadata: feature set, meter, batch size,
// what it was trained on, and its metrics).
#include <cstdint>
#include <iostream>
#include <string>

#include "embplan/cost/neural.hpp"
#include "embplan/cost/train.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/io/json.hpp"
#include "text_table.hpp"

namespace embplan_cli {

struct train_args {
  std::string kind;  // compute
  std::string data;
  std::string out;
  std::string pool;  // the pool the records index (default: the synthetic pool, seed 0)
  std::string features = "embplan21";
  std::string trained_on;
  std::string eval;  // records to judge the model on (e.g. the other half of the pool)
  int epochs = embplan::cost::train_options{}.epochs;
  std::uint64_t seed = 0;
};

inline int run_train(const train_args& a) {
  if (a.kind != "compute") {
    embplan::detail::fail("train.kind", a.kind,
                          "\"compute\" (communication models are not trained by this build)");
  }
  const auto pool = a.pool.empty()
                        ? embplan::data::synthetic_pool({.seed = 0})
                        : embplan::io::pool_from_json(embplan::io::read_json_file(a.pool));
  const auto records = embplan::cost::read_compute_records(a.data);
  embplan::cost::train_options o;
  o.features = embplan::cost::parse_feature_set(a.features, "train.features");
  o.epochs = a.epochs;
  o.seed = a.seed;
  const auto [net, report] = embplan::cost::train_compute_model(records, pool, o);

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
  meta.extra["metrics.test_mape"] = fixed(report.test.mape, 4);
  meta.extra["metrics.test_r2"] = fixed(report.test.r2, 4);
  meta.extra["metrics.records"] = std::to_string(records.size());
  const embplan::neural_cost model(net, meta);
  model.save(a.out);
  std::cout << "wrote " << a.out << '\n';
  return 0;
}

}  // namespace embplan_cli
