#include "embplan/cost/neural.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/features.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/learn/train.hpp"
#include "support/message_of.hpp"

namespace fs = std::filesystem;

namespace {
using embplan::test::message_of;

const std::vector<embplan::table_spec>& pool() {
  static const auto p = embplan::data::synthetic_pool({.tables = 60, .seed = 4});
  return p;
}

// Records whose cost is an additive function of the pieces plus a fixed part,
// the structure the network's sum over tables can represent exactly.
std::vector<embplan::learn::compute_record> synthetic_records(std::size_t n, std::uint64_t seed) {
  embplan::rng gen(seed);
  const std::vector<std::int32_t> dims{4, 8, 16, 32, 64};
  std::vector<embplan::learn::compute_record> out;
  for (std::size_t i = 0; i < n; ++i) {
    embplan::learn::compute_record r;
    r.id = static_cast<std::int64_t>(i);
    r.batch_size = 1024;
    r.meter = "synthetic";
    const auto count = static_cast<std::size_t>(gen.between(1, 8));
    double ms = 0.05;
    for (std::size_t k = 0; k < count; ++k) {
      const auto t = static_cast<std::size_t>(gen.below(pool().size()));
      const auto d = dims[static_cast<std::size_t>(gen.below(dims.size()))];
      r.tables.push_back(t);
      r.dims.push_back(d);
      ms += 0.002 * d * (1.0 + pool()[t].pooling_factor) / 4.0;
    }
    r.forward_ms = ms / 3.0;
    r.backward_ms = 2.0 * ms / 3.0;
    r.total_ms = ms;
    out.push_back(std::move(r));
  }
  return out;
}
}  // namespace

TEST_CASE("compute model: the parts target, the relative loss, and their names") {
  // Records whose one-run total is 90 % of the parts, costs over two decades.
  auto records = synthetic_records(300, 3);
  for (auto& r : records) {
    r.forward_ms *= r.tables.size() == 1 ? 0.1 : 1.0;  // a few very cheap shards
    r.backward_ms *= r.tables.size() == 1 ? 0.1 : 1.0;
    r.total_ms = 0.9 * (r.forward_ms + r.backward_ms);
  }
  embplan::learn::train_options o;
  o.epochs = 25;
  o.batch_size = 64;
  o.learning_rate = 3e-3f;
  o.target = embplan::learn::train_target::parts;
  const auto [net, report] = embplan::learn::train_compute_model(records, pool(), o);
  // Judged against the parts, the same net is 1/0.9 off the totals.
  const auto parts = embplan::learn::evaluate_compute_model(net, records, pool(), o.features,
                                                            embplan::learn::train_target::parts);
  const auto totals = embplan::learn::evaluate_compute_model(net, records, pool(), o.features);
  CHECK(parts.mape < totals.mape);
  CHECK(parts.r2 > 0.8);
  CHECK(parts.spearman > 0.9);
  CHECK(parts.relative_mse > 0.0);

  // The relative loss weighs the cheap shards as much as the dear ones: its
  // relative error is below the squared-ms loss's, on the training records.
  o.loss = embplan::learn::train_loss::relative;
  const auto [rel_net, rel_report] = embplan::learn::train_compute_model(records, pool(), o);
  MESSAGE("train MAPE: mse " << report.train.mape << ", relative " << rel_report.train.mape);
  CHECK(rel_report.train.relative_mse < report.train.relative_mse);
  CHECK(rel_report.train.mape < report.train.mape);
  // Same seed, same model.
  CHECK(embplan::learn::train_compute_model(records, pool(), o).second.test.mse ==
        rel_report.test.mse);

  CHECK(embplan::learn::parse_train_target("parts", "--target") ==
        embplan::learn::train_target::parts);
  CHECK(embplan::learn::parse_train_loss("relative", "--loss") ==
        embplan::learn::train_loss::relative);
  CHECK(message_of([] { (void)embplan::learn::parse_train_target("both", "--target"); }) ==
        "field '--target' = \"both\": expected \"total\" (forward + backward in one run) or "
        "\"parts\" (forward and backward timed apart, summed)");
  CHECK(message_of([] { (void)embplan::learn::parse_train_loss("mae", "--loss"); }) ==
        "field '--loss' = \"mae\": expected \"mse\" or \"relative\"");
}

TEST_CASE("feature sets: names, counts and order") {
  using embplan::feature_set;
  CHECK(embplan::feature_count(feature_set::embplan21) == 21);
  CHECK(embplan::feature_count(feature_set::neuroshard20) == 20);
  const auto ns = embplan::feature_names(feature_set::neuroshard20);
  CHECK(ns.front() == "bin_0");
  CHECK(ns.back() == "row");
  embplan::table_spec t = pool()[0];
  t.dim = 16;
  std::vector<float> f(21);
  embplan::table_features(t, feature_set::embplan21, f);
  CHECK(f[0] == 16.0f);
  CHECK(f[1] == static_cast<float>(t.rows));
  CHECK(f[4] == static_cast<float>(t.reuse_hist[0]));
  embplan::table_features(t, feature_set::neuroshard20, f);
  CHECK(f[17] == 16.0f);
  CHECK(f[19] == static_cast<float>(t.rows));
  CHECK(message_of([] {
          (void)embplan::parse_feature_set("bogus", "train.features");
        }).find("train.features") != std::string::npos);
}

TEST_CASE("train_compute_model learns an additive cost; neural_cost saves, loads and prices") {
  const auto records = synthetic_records(300, 1);
  embplan::learn::train_options o;
  o.epochs = 25;
  o.batch_size = 64;
  o.learning_rate = 3e-3f;
  const auto [net, report] = embplan::learn::train_compute_model(records, pool(), o);
  CHECK(report.train.samples == 240);
  CHECK(report.validation.samples == 30);
  CHECK(report.test.samples == 30);
  CHECK(report.validation_mse.size() == 25);
  CHECK(report.forward_share == doctest::Approx(1.0 / 3.0));
  MESSAGE("test R2 " << report.test.r2 << ", MAPE " << report.test.mape);
  CHECK(report.test.r2 > 0.8);
  // Judged on other records (here: fresh draws of the same cost law).
  const auto other = synthetic_records(100, 9);
  const auto judged = embplan::learn::evaluate_compute_model(net, other, pool(), o.features);
  CHECK(judged.samples == 100);
  CHECK(judged.r2 > 0.8);
  // Same seed, same model.
  const auto again = embplan::learn::train_compute_model(records, pool(), o);
  CHECK(again.second.test.mse == report.test.mse);

  embplan::neural_cost_metadata meta;
  meta.meter = report.meter;
  meta.batch_size = report.batch_size;
  meta.forward_share = report.forward_share;
  meta.trained_on = "synthetic records";
  const embplan::neural_cost model(net, meta);

  embplan::task t;
  t.tables = {pool()[3], pool()[7]};
  t.tables[0].dim = 16;
  t.tables[1].dim = 32;
  t.cluster = embplan::uniform_topology(2);
  t.batch_size = 2048;  // twice the measured batch: twice the cost
  std::vector<embplan::shard> group{embplan::whole_table(t, 0, 0), embplan::whole_table(t, 1, 0)};
  const auto c = model.compute(t, group, 0);
  CHECK(c.fwd_ms > 0.0);
  CHECK(c.bwd_ms == doctest::Approx(2.0 * c.fwd_ms));
  {  // the prediction is the network at the task's batch, scaled
    embplan::nn::matrix x(2, 21);
    std::vector<float> row(21);
    for (int i = 0; i < 2; ++i) {
      embplan::table_features(t.tables[static_cast<std::size_t>(i)],
                              embplan::feature_set::embplan21, row);
      for (int j = 0; j < 21; ++j)
        x(i, j) = row[static_cast<std::size_t>(j)];
    }
    CHECK(c.total_ms() == doctest::Approx(2.0 * net(x)).epsilon(1e-5));
  }

  const auto dir = fs::temp_directory_path() / ("embplan-neural-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / "model.safetensors";
  model.save(path);
  const auto loaded = embplan::neural_cost::load(path);
  CHECK(loaded.metadata().meter == "synthetic");
  CHECK(loaded.metadata().batch_size == 1024);
  CHECK(loaded.metadata().trained_on == "synthetic records");
  CHECK(loaded.metadata().pool_half.empty());  // not recorded: no keys written
  CHECK(loaded.compute(t, group, 0).fwd_ms == doctest::Approx(c.fwd_ms).epsilon(1e-6));

  // Which half of the pool trained it: saved, loaded, and checked.
  auto halved = meta;
  halved.pool_half = "test";
  halved.split_seed = 9;
  embplan::neural_cost(net, halved).save(path);
  CHECK(embplan::neural_cost::load(path).metadata().pool_half == "test");
  CHECK(embplan::neural_cost::load(path).metadata().split_seed == 9);
  halved.pool_half = "left";
  const auto half_msg = message_of([&] { (void)embplan::neural_cost(net, halved); });
  CHECK(half_msg.find("field 'neural_cost.pool_half' = \"left\"") != std::string::npos);

  // A file that is a safetensors but not a neural_cost says which key is missing.
  embplan::nn::save_state_dict(dir / "bare.safetensors", net);
  const auto msg = message_of([&] { (void)embplan::neural_cost::load(dir / "bare.safetensors"); });
  CHECK(msg.find("metadata.embplan.kind") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("records and training: bad input names the field and value") {
  const auto dir = fs::temp_directory_path() / ("embplan-records-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto path = dir / "r.jsonl";
  std::ofstream(path) << R"({"id":0,"tables":[1],"dims":[4],"forward_ms":1,"backward_ms":1,)"
                      << R"("total_ms":2,"batch_size":64,"meter":"cpu"})" << '\n'
                      << R"({"id":1,"tables":[1,2],"dims":[4],"forward_ms":1,"backward_ms":1,)"
                      << R"("total_ms":2,"batch_size":64,"meter":"cpu"})" << '\n';
  auto msg = message_of([&] { (void)embplan::learn::read_compute_records(path); });
  CHECK(msg.find("r.jsonl:2.dims") != std::string::npos);
  std::ofstream(path) << "not json\n";
  msg = message_of([&] { (void)embplan::learn::read_compute_records(path); });
  CHECK(msg.find("r.jsonl:1") != std::string::npos);
  CHECK(msg.find("not json") != std::string::npos);
  fs::remove_all(dir);

  auto records = synthetic_records(20, 2);
  records[5].batch_size = 99;
  msg = message_of([&] { (void)embplan::learn::train_compute_model(records, pool()); });
  CHECK(msg.find("records[5].batch_size") != std::string::npos);
  CHECK(msg.find("99") != std::string::npos);
  records = synthetic_records(20, 2);
  records[3].tables[0] = 5000;
  msg = message_of([&] { (void)embplan::learn::train_compute_model(records, pool()); });
  CHECK(msg.find("records[3].tables[0]") != std::string::npos);
  CHECK(msg.find("5000") != std::string::npos);
  embplan::learn::train_options bad;
  bad.epochs = 0;
  msg = message_of(
      [&] { (void)embplan::learn::train_compute_model(synthetic_records(20, 2), pool(), bad); });
  CHECK(msg.find("train.epochs") != std::string::npos);
  CHECK(message_of([&] {
          (void)embplan::learn::train_compute_model(synthetic_records(5, 2), pool());
        }).find("train.records") != std::string::npos);
}

namespace {

// A committed model (data/cost/) and its metrics on committed records of the
// pool's half it never saw.
struct committed_model {
  embplan::neural_cost model;
  std::size_t records = 0;
  embplan::learn::regression_metrics unseen;
};

committed_model load_committed(const char* model_file, const char* records_file) {
  const fs::path dir = fs::path(EMBPLAN_SOURCE_DIR) / "data" / "cost";
  committed_model out;
  out.model = embplan::neural_cost::load(dir / model_file);
  const auto records = embplan::learn::read_compute_records(dir / records_file);
  out.records = records.size();
  out.unseen = embplan::learn::evaluate_compute_model(out.model.network(), records,
                                                      embplan::data::synthetic_pool({.seed = 0}),
                                                      out.model.metadata().features);
  return out;
}

}  // namespace

TEST_CASE("the bundled CPU-meter model is as accurate on the unseen half as reported") {
  const auto [model, records, m] =
      load_committed("cpu_compute_model.safetensors", "cpu_compute_test_half.jsonl");
  CHECK(model.metadata().meter == "cpu");
  CHECK(model.metadata().batch_size == 1024);
  CHECK(model.metadata().pool_half == "train");
  // 200 records of the pool's test half, on the same reference scale (README:
  // R^2 0.976, MAPE 9.7 %, Spearman 0.992 against forward + backward, the
  // target it was trained on: train compute --target parts --loss relative).
  CHECK(records == 200);
  CHECK(model.metadata().extra.at("train.target") == "parts");
  const auto parts = embplan::learn::evaluate_compute_model(
      model.network(),
      embplan::learn::read_compute_records(fs::path(EMBPLAN_SOURCE_DIR) / "data" / "cost" /
                                           "cpu_compute_test_half.jsonl"),
      embplan::data::synthetic_pool({.seed = 0}), model.metadata().features,
      embplan::learn::train_target::parts);
  CHECK(parts.r2 == doctest::Approx(0.976).epsilon(0.002));
  CHECK(parts.mape == doctest::Approx(0.097).epsilon(0.03));
  CHECK(parts.mape <= 0.10);
  CHECK(parts.spearman >= 0.99);
  // Against the one-run totals (NeuroShard's target) it is ~9 % high: those
  // run faster than the parts (README).
  CHECK(m.mape > parts.mape);
}

TEST_CASE("the committed GPU-meter model loads and is as accurate on the unseen half as reported") {
  const auto [model, records, m] =
      load_committed("gpu_compute_model.safetensors", "gpu_compute_test_half.jsonl");
  CHECK(model.metadata().meter == "cuda");
  CHECK(model.metadata().batch_size == 65536);
  CHECK(model.metadata().pool_half == "train");  // so compare judges it on the test half
  CHECK(model.metadata().split_seed == 0);
  // Records of the pool's other half (tables the model never saw), measured on
  // the same H100 (README: R^2 0.979 there).
  CHECK(records == 200);
  CHECK(m.r2 == doctest::Approx(0.979).epsilon(0.002));
}

TEST_CASE("a model file declaring sizes its tensors do not hold is refused before allocating") {
  const auto dir = fs::temp_directory_path() / ("embplan-declared-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const embplan::nn::compute_cost_net net(embplan::nn::compute_cost_net_options{}, 1);
  embplan::neural_cost_metadata meta;
  meta.features = embplan::feature_set::neuroshard20;
  meta.batch_size = 64;
  embplan::neural_cost(net, meta).save(dir / "good.safetensors");
  const auto base = embplan::io::read_safetensors(dir / "good.safetensors");
  CHECK(base.metadata.at("embplan.table_mlp_sizes") == "20,128,32");
  const auto load_with = [&](const std::string& key, const std::string& value) {
    auto f = base;
    f.metadata[key] = value;
    embplan::io::write_safetensors(dir / "bad.safetensors", f);
    return message_of([&] { (void)embplan::neural_cost::load(dir / "bad.safetensors"); });
  };
  // A layer 1e9 wide (80 GB of weights) in a file of a few KB: refused by its size.
  auto msg = load_with("embplan.table_mlp_sizes", "20,1000000000,32");
  CHECK(msg.find("metadata.embplan.table_mlp_sizes' = \"20,1000000000,32\"") != std::string::npos);
  CHECK(msg.find("at most 1048576") != std::string::npos);
  // Within the limit, but not what the file's tensors hold.
  msg = load_with("embplan.table_mlp_sizes", "20,1000000,32");
  CHECK(msg.find("metadata.embplan.table_mlp_sizes' = \"20,1000000,32\"") != std::string::npos);
  CHECK(msg.find("tensors[\"t_hidden.0.weight\"] has shape [128, 20], not [1000000, 20]") !=
        std::string::npos);
  msg = load_with("embplan.pred_mlp_sizes", "32,500000,1");
  CHECK(msg.find("metadata.embplan.pred_mlp_sizes' = \"32,500000,1\"") != std::string::npos);
  CHECK(msg.find("tensors[\"c_hidden.0.weight\"] has shape [64, 32], not [500000, 32]") !=
        std::string::npos);
  msg = load_with("embplan.table_mlp_sizes", "20,128,32,32");
  CHECK(msg.find("metadata.embplan.table_mlp_sizes' = \"20,128,32,32\"") != std::string::npos);
  CHECK(msg.find("tensors[\"t_hidden.2.weight\"], shape [32, 32], is missing") !=
        std::string::npos);
  fs::remove_all(dir);
}
