#pragma once
// Training the learned compute-cost model from collected cost data
// (meter/collect.hpp records), as NeuroShard trains its ComputeCostNet
// (MLSys'23 §3.2 and App. C): samples split 80/10/10 into train / validation
// / test, features normalised with statistics of the training pieces, MSE,
// Adam (lr 1e-3), mini-batches of 512 samples, and the epoch with the best
// validation loss kept. Reports MSE, MAPE and R² on each split.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/cost/detail/json_lines.hpp"
#include "embplan/cost/features.hpp"
#include "embplan/data/detail/rank_correlation.hpp"
#include "embplan/data/split.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/minibatch.hpp"
#include "embplan/nn/normalizer.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::learn {

// One compute record of `embplan collect compute` (docs/measuring.md, cost
// data).
struct compute_record {
  std::int64_t id = 0;
  std::vector<std::size_t> tables;  // pool indices
  std::vector<std::int32_t> dims;
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double total_ms = 0.0;
  std::int64_t batch_size = 0;
  std::string meter;
};

namespace detail {

// Every key `embplan collect compute` writes (meter/collect.hpp and the CLI's
// "reference_ms" and "inputs"); "cv", "reference_ms" and "inputs" are kept by
// the file, not read here.
inline constexpr std::string_view compute_record_keys[] = {
    "id",         "tables", "dims", "forward_ms",   "backward_ms", "total_ms",
    "batch_size", "meter",  "cv",   "reference_ms", "inputs"};

}  // namespace detail

inline std::vector<compute_record> read_compute_records(const std::filesystem::path& path) {
  return cost::detail::read_json_lines<compute_record>(
      path, "compute record", detail::compute_record_keys,
      [](const nlohmann::json& j, const std::string& where) {
        compute_record r;
        constexpr auto int64_max = std::numeric_limits<std::int64_t>::max();
        r.id = cost::detail::record_int(j, "id", where, 0, int64_max, "a non-negative integer");
        for (const auto t : cost::detail::record_ints(j, "tables", where, 0, int64_max,
                                                      "a non-negative integer (a pool index)")) {
          r.tables.push_back(static_cast<std::size_t>(t));
        }
        for (const auto d : cost::detail::record_ints(j, "dims", where, 1,
                                                      std::numeric_limits<std::int32_t>::max(),
                                                      "a positive 32-bit integer")) {
          r.dims.push_back(static_cast<std::int32_t>(d));
        }
        r.forward_ms = cost::detail::record_time(j, "forward_ms", where);
        r.backward_ms = cost::detail::record_time(j, "backward_ms", where);
        r.total_ms = cost::detail::record_time(j, "total_ms", where, true);
        r.batch_size =
            cost::detail::record_int(j, "batch_size", where, 1, int64_max, "a positive integer");
        r.meter = cost::detail::record_string(j, "meter", where);
        if (r.tables.size() != r.dims.size() || r.tables.empty()) {
          embplan::detail::fail(where + ".dims", r.dims.size(),
                                "one dim per table (" + std::to_string(r.tables.size()) + ")");
        }
        return r;
      });
}

// What the compute model learns to predict: a record's forward + backward
// timed in one run (`total_ms`, NeuroShard's target and the default), or the
// sum of the two timed apart (`forward_ms + backward_ms`), which is what the
// meters' cost models price a device with (meter::cpu_meter_cost and the GPU
// meter's: separate on, together off). On the CPU meter the two differ
// noticeably (the backward finds the forward's rows in cache when they run
// together); on the GPU meter they nearly agree
// (docs/design/learned-cost-models.md).
enum class train_target : std::uint8_t { total, parts };
// The loss: NeuroShard's mean squared error in ms², which lets the largest
// shards decide, or the mean squared *relative* error ((p - y) / y)², which
// weighs every shard alike (the metric MAPE reports). The best epoch is
// picked by the same loss on the validation split.
enum class train_loss : std::uint8_t { mse, relative };

inline train_target parse_train_target(std::string_view s, std::string_view field) {
  if (s == "total") return train_target::total;
  if (s == "parts") return train_target::parts;
  embplan::detail::fail(field, s,
                        "\"total\" (forward + backward in one run) or \"parts\" "
                        "(forward and backward timed apart, summed)");
}
inline train_loss parse_train_loss(std::string_view s, std::string_view field) {
  if (s == "mse") return train_loss::mse;
  if (s == "relative") return train_loss::relative;
  embplan::detail::fail(field, s, "\"mse\" or \"relative\"");
}
inline std::string_view to_string(train_target t) {
  return t == train_target::total ? "total" : "parts";
}
inline std::string_view to_string(train_loss l) {
  return l == train_loss::mse ? "mse" : "relative";
}

struct train_options {
  feature_set features = feature_set::embplan21;
  train_target target = train_target::total;
  train_loss loss = train_loss::mse;
  int epochs = 60;
  std::size_t batch_size = 512;
  float learning_rate = 1e-3f;
  std::uint64_t seed = 0;
  double train_fraction = 0.8;
  double validation_fraction = 0.1;
  // Called after each epoch (a progress display); may be empty.
  std::function<void()> on_epoch{};
};

struct regression_metrics {
  std::size_t samples = 0;
  double mse = 0.0;           // ms^2
  double relative_mse = 0.0;  // mean ((prediction - y) / y)^2
  double mape = 0.0;          // mean |prediction - y| / y
  double r2 = 0.0;            // 1 - SS_res / SS_tot
  // Spearman's rank correlation of predictions and targets (how well the model
  // orders shards, which is what a search needs); NaN below two samples.
  double spearman = std::numeric_limits<double>::quiet_NaN();
};

struct train_report {
  regression_metrics train, validation, test;
  int best_epoch = 0;
  std::vector<double> validation_mse;  // per epoch
  double forward_share = 0.5;          // of the training data
  std::int64_t batch_size = 0;         // of the measurements
  std::string meter;
};

namespace detail {

// The pieces (table, dim) the records use, as feature rows, and each record's
// rows.
struct piece_table {
  nn::matrix features;
  std::vector<std::vector<std::int64_t>> samples;
};

inline piece_table pieces_of(std::span<const compute_record> records,
                             std::span<const table_spec> pool, feature_set f) {
  std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> row_of;
  std::vector<std::pair<std::size_t, std::int32_t>> order;
  piece_table out;
  for (std::size_t r = 0; r < records.size(); ++r) {
    std::vector<std::int64_t> rows;
    for (std::size_t i = 0; i < records[r].tables.size(); ++i) {
      const auto t = records[r].tables[i];
      if (t >= pool.size()) {
        embplan::detail::fail(
            "records[" + std::to_string(r) + "].tables[" + std::to_string(i) + "]", t,
            "a table of the pool (below " + std::to_string(pool.size()) + ")");
      }
      const auto key = std::make_pair(t, records[r].dims[i]);
      auto [it, fresh] = row_of.emplace(key, static_cast<std::int64_t>(order.size()));
      if (fresh) order.push_back(key);
      rows.push_back(it->second);
    }
    out.samples.push_back(std::move(rows));
  }
  const auto n = static_cast<Eigen::Index>(feature_count(f));
  out.features.resize(static_cast<Eigen::Index>(order.size()), n);
  std::vector<float> row(static_cast<std::size_t>(n));
  for (std::size_t p = 0; p < order.size(); ++p) {
    table_spec t = pool[order[p].first];
    t.dim = order[p].second;
    table_features(t, f, row);
    for (Eigen::Index c = 0; c < n; ++c)
      out.features(static_cast<Eigen::Index>(p), c) = row[static_cast<std::size_t>(c)];
  }
  return out;
}

inline float target_of(const compute_record& r, train_target target) {
  return static_cast<float>(target == train_target::total ? r.total_ms
                                                          : r.forward_ms + r.backward_ms);
}

// One Adam step on the mean squared relative error (train_loss::relative):
// d/dp ((p - y) / y)^2 / n = 2 (p - y) / (y^2 n).
inline void relative_step(nn::compute_cost_net& net, const nn::compute_cost_batch& batch,
                          nn::adam& optimizer, nn::compute_cost_net& grad,
                          nn::compute_cost_tape& tape) {
  nn::set_zero(grad);
  net.forward(batch.features, batch.group, batch.targets.rows(), tape);
  const auto n = static_cast<float>(batch.targets.rows());
  tape.doutput.resize(batch.targets.rows(), 1);
  for (Eigen::Index i = 0; i < batch.targets.rows(); ++i) {
    const float y = batch.targets(i, 0);
    tape.doutput(i, 0) = 2.0f * (tape.output()(i, 0) - y) / (y * y * n);
  }
  net.backward(tape, tape.doutput, grad);
  optimizer.step(net, grad);
}

inline regression_metrics metrics(const nn::compute_cost_net& net, const piece_table& pieces,
                                  std::span<const float> costs,
                                  std::span<const std::size_t> which) {
  regression_metrics m;
  m.samples = which.size();
  if (which.empty()) return m;
  nn::compute_cost_batch batch;
  nn::gather_batch(pieces.features, pieces.samples, costs, which, batch);
  nn::compute_cost_tape tape;
  net.forward(batch.features, batch.group, batch.targets.rows(), tape);
  double mean = 0.0;
  for (Eigen::Index i = 0; i < batch.targets.rows(); ++i)
    mean += batch.targets(i, 0) / static_cast<double>(which.size());
  double ss_res = 0.0;
  double ss_tot = 0.0;
  std::vector<double> predicted;
  std::vector<double> measured;
  for (Eigen::Index i = 0; i < batch.targets.rows(); ++i) {
    const double y = batch.targets(i, 0);
    const double p = tape.output()(i, 0);
    ss_res += (p - y) * (p - y);
    ss_tot += (y - mean) * (y - mean);
    m.mape += std::abs(p - y) / y / static_cast<double>(which.size());
    m.relative_mse += (p - y) * (p - y) / (y * y) / static_cast<double>(which.size());
    predicted.push_back(p);
    measured.push_back(y);
  }
  m.mse = ss_res / static_cast<double>(which.size());
  m.r2 = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : 0.0;
  m.spearman = data::detail::spearman(predicted, measured);
  return m;
}

}  // namespace detail

// Metrics of a trained net on other records (e.g. measured on the other half
// of the pool: tables the model never saw).
inline regression_metrics evaluate_compute_model(const nn::compute_cost_net& net,
                                                 std::span<const compute_record> records,
                                                 std::span<const table_spec> pool, feature_set f,
                                                 train_target target = train_target::total) {
  const auto pieces = detail::pieces_of(records, pool, f);
  std::vector<float> costs;
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < records.size(); ++i) {
    costs.push_back(detail::target_of(records[i], target));
    all.push_back(i);
  }
  return detail::metrics(net, pieces, costs, all);
}

// Trains a compute-cost net (NeuroShard's sizes: table MLP 128-32, head
// 32-64-1) on `records` measured on tables of `pool`.
inline std::pair<nn::compute_cost_net, train_report> train_compute_model(
    std::span<const compute_record> records, std::span<const table_spec> pool,
    const train_options& o = {}) {
  if (records.size() < 10) {
    embplan::detail::fail("train.records", records.size(), "at least 10 records");
  }
  if (o.epochs < 1) embplan::detail::fail("train.epochs", o.epochs, "a count >= 1");
  if (o.batch_size < 1) embplan::detail::fail("train.batch_size", o.batch_size, "a count >= 1");
  if (!(o.learning_rate > 0.0f)) {
    embplan::detail::fail("train.learning_rate", o.learning_rate, "a positive rate");
  }
  if (!(o.train_fraction > 0.0 && o.validation_fraction > 0.0 &&
        o.train_fraction + o.validation_fraction < 1.0)) {
    embplan::detail::fail("train.train_fraction", o.train_fraction,
                          "train and validation fractions > 0 leaving a test split");
  }
  train_report report;
  report.batch_size = records.front().batch_size;
  report.meter = records.front().meter;
  double fwd = 0.0;
  double all = 0.0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].batch_size != report.batch_size || records[i].meter != report.meter) {
      embplan::detail::fail("records[" + std::to_string(i) + "].batch_size", records[i].batch_size,
                            "the batch size and meter of the first record (" +
                                std::to_string(report.batch_size) + ", " + report.meter +
                                "): one model, one kind of measurement");
    }
    fwd += records[i].forward_ms;
    all += records[i].forward_ms + records[i].backward_ms;
  }
  report.forward_share = all > 0.0 ? fwd / all : 0.5;

  const auto pieces = detail::pieces_of(records, pool, o.features);
  std::vector<float> costs;
  for (const auto& r : records)
    costs.push_back(detail::target_of(r, o.target));

  // The 80/10/10 split of a seeded permutation; parts in shuffled order.
  const auto split =
      embplan::data::seeded_split(records.size(), {.train_fraction = o.train_fraction,
                                                   .validation_fraction = o.validation_fraction,
                                                   .seed = o.seed,
                                                   .stream = 0x5917});
  const auto& train = split.train;
  const auto& val = split.validation;
  const auto& test = split.test;

  nn::compute_cost_net_options arch;
  arch.table_features = static_cast<Eigen::Index>(feature_count(o.features));
  nn::compute_cost_net net(arch, derive_seed(o.seed, 1));
  {
    // Normalise with the statistics of the pieces the training samples use.
    std::vector<char> used(static_cast<std::size_t>(pieces.features.rows()), 0);
    for (const auto s : train)
      for (const auto r : pieces.samples[s])
        used[static_cast<std::size_t>(r)] = 1;
    nn::matrix x(static_cast<Eigen::Index>(std::count(used.begin(), used.end(), 1)),
                 pieces.features.cols());
    Eigen::Index k = 0;
    for (std::size_t r = 0; r < used.size(); ++r)
      if (used[r] != 0) x.row(k++) = pieces.features.row(static_cast<Eigen::Index>(r));
    net.feature_norm = nn::normalizer::fit(x);
  }
  nn::compute_cost_net grad(arch);
  nn::compute_cost_net best = net;
  nn::adam optimizer(nn::adam_options{.lr = o.learning_rate});
  nn::compute_cost_tape tape;
  nn::compute_cost_batch batch;
  nn::minibatches batches(train.size(), o.batch_size, derive_seed(o.seed, 2));
  double best_val = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> picked;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    batches.set_epoch(static_cast<std::uint64_t>(epoch));
    for (std::size_t b = 0; b < batches.size(); ++b) {
      picked.clear();
      for (const auto i : batches[b])
        picked.push_back(train[i]);
      nn::gather_batch(pieces.features, pieces.samples, costs, picked, batch);
      if (o.loss == train_loss::mse) {
        (void)nn::train_step(net, batch, optimizer, grad, tape);
      } else {
        detail::relative_step(net, batch, optimizer, grad, tape);
      }
    }
    const auto vm = detail::metrics(net, pieces, costs, val);
    const double v = o.loss == train_loss::mse ? vm.mse : vm.relative_mse;
    report.validation_mse.push_back(v);
    if (o.on_epoch) o.on_epoch();
    if (v < best_val) {
      best_val = v;
      best = net;
      report.best_epoch = epoch;
    }
  }
  report.train = detail::metrics(best, pieces, costs, train);
  report.validation = detail::metrics(best, pieces, costs, val);
  report.test = detail::metrics(best, pieces, costs, test);
  return {best, report};
}

}  // namespace embplan::inline EMBPLAN_ABI::learn
