#pragma once
// Training NeuroShard's two communication cost models from `embplan collect
// comm` records (MLSys'23 §3.2, App. C; neuroshard/comm_cost_model.py):
// forward  [dim sums, start skews] -> per-device forward all-to-all ms,
// backward [dim sums]              -> per-device backward all-to-all ms,
// MLP 128-64-32-16 with one output per device, as the compute model is
// trained (learn/train.hpp): one 80/10/10 split of the records for both models,
// features normalised with the training split's statistics, MSE over all
// outputs, Adam (lr 1e-3), mini-batches of 512, the best validation epoch
// kept. Reports MSE, MAPE and R² of each model on each split (over all
// device outputs).
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/detail/json_lines.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/data/split.hpp"
#include "embplan/learn/train.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/loss.hpp"
#include "embplan/nn/minibatch.hpp"
#include "embplan/nn/normalizer.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::learn {

// One record of `embplan collect comm` (docs/measuring.md, cost data).
struct comm_record {
  std::int64_t id = 0;
  std::vector<std::int64_t> dim_sum;  // per device
  std::vector<double> start_ms;       // per device
  std::vector<double> forward_ms;     // per device, waiting for later starters included
  std::vector<double> backward_ms;    // per device
  std::int64_t batch_size = 0;        // global batch of the all-to-all
  std::string meter;
};

namespace detail {

// Every key `embplan collect comm` writes (meter/collect.hpp and the CLI's
// "inputs"); "tables", "dims", "device_of" and "greedy_probability" describe
// the placement and, with "inputs", are not read here.
inline constexpr std::string_view comm_record_keys[] = {
    "id",    "dim_sum", "start_ms", "forward_ms", "backward_ms",        "batch_size",
    "meter", "tables",  "dims",     "device_of",  "greedy_probability", "inputs"};

}  // namespace detail

inline std::vector<comm_record> read_comm_records(const std::filesystem::path& path) {
  return cost::detail::read_json_lines<comm_record>(
      path, "comm record", detail::comm_record_keys,
      [](const nlohmann::json& j, const std::string& where) {
        comm_record r;
        constexpr auto int64_max = std::numeric_limits<std::int64_t>::max();
        r.id = cost::detail::record_int(j, "id", where, 0, int64_max, "a non-negative integer");
        r.dim_sum =
            cost::detail::record_ints(j, "dim_sum", where, 0, int64_max, "a non-negative dim sum");
        r.start_ms = cost::detail::record_times(j, "start_ms", where);
        r.forward_ms = cost::detail::record_times(j, "forward_ms", where);
        r.backward_ms = cost::detail::record_times(j, "backward_ms", where);
        r.batch_size =
            cost::detail::record_int(j, "batch_size", where, 1, int64_max, "a positive integer");
        r.meter = cost::detail::record_string(j, "meter", where);
        const std::size_t n = r.dim_sum.size();
        if (n == 0) embplan::detail::fail(where + ".dim_sum", "[]", "one dim sum per device");
        const auto same = [&](const char* key, std::size_t got) {
          if (got != n) {
            embplan::detail::fail(where + "." + key, got,
                                  "one entry per device (" + std::to_string(n) + ", as dim_sum)");
          }
        };
        same("start_ms", r.start_ms.size());
        same("forward_ms", r.forward_ms.size());
        same("backward_ms", r.backward_ms.size());
        return r;
      });
}

struct comm_train_options {
  int epochs = 1000;  // NeuroShard's train_comm_cost_model.py default
  std::size_t batch_size = 512;
  float learning_rate = 1e-3f;
  std::uint64_t seed = 0;
  double train_fraction = 0.8;
  double validation_fraction = 0.1;
  std::vector<Eigen::Index> hidden{128, 64, 32, 16};
  // Called after each epoch (a progress display); may be empty.
  std::function<void()> on_epoch{};
};

// One model's fit: metrics over all device outputs of each split.
struct comm_fit {
  regression_metrics train, validation, test;
  int best_epoch = 0;
  std::vector<double> validation_mse;  // per epoch
};

struct comm_train_report {
  comm_fit forward, backward;
  std::size_t devices = 0;
  std::int64_t batch_size = 0;
  std::string meter;
};

struct trained_comm {
  nn::comm_cost_net forward, backward;
  comm_train_report report;
};

namespace detail {

inline void check_comm_records(std::span<const comm_record> records, std::size_t devices,
                               std::int64_t batch_size, const std::string& meter) {
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string at = "records[" + std::to_string(i) + "]";
    if (records[i].dim_sum.size() != devices) {
      embplan::detail::fail(
          at + ".dim_sum.size", records[i].dim_sum.size(),
          std::to_string(devices) + " devices (the first record's): one model, one device count");
    }
    if (records[i].batch_size != batch_size || records[i].meter != meter) {
      embplan::detail::fail(at + ".batch_size", records[i].batch_size,
                            "the batch size and meter of the first record (" +
                                std::to_string(batch_size) + ", " + meter +
                                "): one model, one kind of measurement");
    }
  }
}

// Inputs (forward: dim sums + skews; backward: dim sums) and targets of the
// records, at the records' own batch (scale 1).
struct comm_data {
  nn::matrix forward_x, forward_y, backward_x, backward_y;
};

inline comm_data comm_data_of(std::span<const comm_record> records, std::size_t devices) {
  const auto rows = static_cast<Eigen::Index>(records.size());
  const auto n = static_cast<Eigen::Index>(devices);
  comm_data out;
  out.forward_x.resize(rows, 2 * n);
  out.backward_x.resize(rows, n);
  out.forward_y.resize(rows, n);
  out.backward_y.resize(rows, n);
  for (Eigen::Index r = 0; r < rows; ++r) {
    const auto& rec = records[static_cast<std::size_t>(r)];
    cost::detail::comm_forward_features(rec.dim_sum, rec.start_ms, 1.0, out.forward_x.row(r));
    cost::detail::comm_backward_features(rec.dim_sum, 1.0, out.backward_x.row(r));
    for (Eigen::Index d = 0; d < n; ++d) {
      out.forward_y(r, d) = static_cast<float>(rec.forward_ms[static_cast<std::size_t>(d)]);
      out.backward_y(r, d) = static_cast<float>(rec.backward_ms[static_cast<std::size_t>(d)]);
    }
  }
  return out;
}

inline nn::matrix rows_of(const nn::matrix& m, std::span<const std::size_t> which) {
  nn::matrix out(static_cast<Eigen::Index>(which.size()), m.cols());
  for (std::size_t i = 0; i < which.size(); ++i)
    out.row(static_cast<Eigen::Index>(i)) = m.row(static_cast<Eigen::Index>(which[i]));
  return out;
}

// MSE, MAPE (over targets > 0) and R² over every element of y.
inline regression_metrics matrix_metrics(const nn::matrix& prediction, const nn::matrix& y) {
  regression_metrics m;
  m.samples = static_cast<std::size_t>(y.rows());
  if (y.size() == 0) return m;
  const Eigen::MatrixXd p = prediction.cast<double>();
  const Eigen::MatrixXd t = y.cast<double>();
  const double mean = t.mean();
  const double ss_res = (p - t).squaredNorm();
  const double ss_tot = (t.array() - mean).square().sum();
  std::size_t positive = 0;
  for (Eigen::Index i = 0; i < t.size(); ++i) {
    if (t(i) > 0.0) {
      m.mape += std::abs(p(i) - t(i)) / t(i);
      ++positive;
    }
  }
  m.mape = positive > 0 ? m.mape / static_cast<double>(positive) : 0.0;
  m.mse = ss_res / static_cast<double>(t.size());
  m.r2 = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : 0.0;
  return m;
}

inline nn::matrix predict(const nn::comm_cost_net& net, const nn::matrix& x) {
  return x.rows() == 0 ? nn::matrix(0, net.hidden.out_features()) : net(x);
}

// Fits one comm_cost_net to (x, y) on the given split.
inline std::pair<nn::comm_cost_net, comm_fit> fit_comm_net(const nn::matrix& x, const nn::matrix& y,
                                                           std::span<const std::size_t> train,
                                                           std::span<const std::size_t> val,
                                                           std::span<const std::size_t> test,
                                                           const comm_train_options& o,
                                                           std::uint64_t seed) {
  nn::comm_cost_net_options arch;
  arch.features = x.cols();
  arch.outputs = y.cols();
  arch.hidden = o.hidden;
  nn::comm_cost_net net(arch, derive_seed(seed, 1));
  const nn::matrix train_x = rows_of(x, train);
  const nn::matrix train_y = rows_of(y, train);
  const nn::matrix val_x = rows_of(x, val);
  const nn::matrix val_y = rows_of(y, val);
  net.feature_norm = nn::normalizer::fit(train_x);
  // Normalised once, as NeuroShard normalises X before its loop.
  const nn::matrix train_xn = net.feature_norm(train_x);
  nn::comm_cost_net grad = nn::zeros_like(net);
  nn::comm_cost_net best = net;
  nn::adam optimizer(nn::adam_options{.lr = o.learning_rate});
  nn::mlp_tape tape;
  nn::matrix bx, by, dy;
  nn::minibatches batches(train.size(), o.batch_size, derive_seed(seed, 2));
  comm_fit fit;
  double best_val = std::numeric_limits<double>::infinity();
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    batches.set_epoch(static_cast<std::uint64_t>(epoch));
    for (std::size_t b = 0; b < batches.size(); ++b) {
      const auto picked = batches[b];
      bx.resize(static_cast<Eigen::Index>(picked.size()), train_xn.cols());
      by.resize(static_cast<Eigen::Index>(picked.size()), train_y.cols());
      for (std::size_t i = 0; i < picked.size(); ++i) {
        bx.row(static_cast<Eigen::Index>(i)) = train_xn.row(static_cast<Eigen::Index>(picked[i]));
        by.row(static_cast<Eigen::Index>(i)) = train_y.row(static_cast<Eigen::Index>(picked[i]));
      }
      nn::set_zero(grad);
      net.hidden.forward(bx, tape);
      (void)nn::mse_loss(tape.output(), by, &dy);
      net.hidden.backward(bx, tape, dy, grad.hidden, nullptr);
      optimizer.step(net, grad);
    }
    const double v = val_x.rows() > 0 ? matrix_metrics(predict(net, val_x), val_y).mse : 0.0;
    fit.validation_mse.push_back(v);
    if (o.on_epoch) o.on_epoch();
    if (v < best_val) {
      best_val = v;
      best = net;
      fit.best_epoch = epoch;
    }
  }
  fit.train = matrix_metrics(predict(best, train_x), train_y);
  fit.validation = matrix_metrics(predict(best, val_x), val_y);
  const nn::matrix test_x = rows_of(x, test);
  fit.test = matrix_metrics(predict(best, test_x), rows_of(y, test));
  return {best, fit};
}

}  // namespace detail

// Metrics of trained forward / backward nets on other records.
inline std::pair<regression_metrics, regression_metrics> evaluate_comm_models(
    const neural_comm& model, std::span<const comm_record> records) {
  const auto& meta = model.metadata();
  if (records.empty()) return {};
  detail::check_comm_records(records, meta.devices, records.front().batch_size,
                             records.front().meter);
  // Records at another batch are priced as the model prices a task.
  const double scale =
      static_cast<double>(records.front().batch_size) / static_cast<double>(meta.batch_size);
  auto data = detail::comm_data_of(records, meta.devices);
  data.forward_x.leftCols(static_cast<Eigen::Index>(meta.devices)) *= static_cast<float>(scale);
  data.backward_x *= static_cast<float>(scale);
  nn::matrix pf = model.forward_network()(data.forward_x).cwiseMax(0.0f);
  nn::matrix pb = model.backward_network()(data.backward_x).cwiseMax(0.0f);
  return {detail::matrix_metrics(pf, data.forward_y), detail::matrix_metrics(pb, data.backward_y)};
}

// Trains the forward and backward communication models on `records` (all of
// one device count, batch size and meter).
inline trained_comm train_comm_models(std::span<const comm_record> records,
                                      const comm_train_options& o = {}) {
  if (records.size() < 10) {
    embplan::detail::fail("train.records", records.size(), "at least 10 records");
  }
  if (o.epochs < 1) embplan::detail::fail("train.epochs", o.epochs, "a count >= 1");
  if (o.batch_size < 1) embplan::detail::fail("train.batch_size", o.batch_size, "a count >= 1");
  if (!(o.learning_rate > 0.0f) || !std::isfinite(o.learning_rate)) {
    embplan::detail::fail("train.learning_rate", o.learning_rate, "a positive rate");
  }
  if (!(o.train_fraction > 0.0 && o.validation_fraction > 0.0 &&
        o.train_fraction + o.validation_fraction < 1.0)) {
    embplan::detail::fail("train.train_fraction", o.train_fraction,
                          "train and validation fractions > 0 leaving a test split");
  }
  trained_comm out;
  out.report.devices = records.front().dim_sum.size();
  out.report.batch_size = records.front().batch_size;
  out.report.meter = records.front().meter;
  if (out.report.batch_size < 1) {
    embplan::detail::fail("records[0].batch_size", out.report.batch_size, "a positive batch size");
  }
  detail::check_comm_records(records, out.report.devices, out.report.batch_size, out.report.meter);
  const auto data = detail::comm_data_of(records, out.report.devices);

  // One 80/10/10 split of a seeded permutation for both models; parts in
  // shuffled order.
  const auto split =
      embplan::data::seeded_split(records.size(), {.train_fraction = o.train_fraction,
                                                   .validation_fraction = o.validation_fraction,
                                                   .seed = o.seed,
                                                   .stream = 0xc033});
  const std::span<const std::size_t> train = split.train;
  const std::span<const std::size_t> val = split.validation;
  const std::span<const std::size_t> test = split.test;

  auto [fwd, fwd_fit] = detail::fit_comm_net(data.forward_x, data.forward_y, train, val, test, o,
                                             derive_seed(o.seed, 0xf0));
  auto [bwd, bwd_fit] = detail::fit_comm_net(data.backward_x, data.backward_y, train, val, test, o,
                                             derive_seed(o.seed, 0xb0));
  out.forward = std::move(fwd);
  out.backward = std::move(bwd);
  out.report.forward = std::move(fwd_fit);
  out.report.backward = std::move(bwd_fit);
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::learn
