#pragma once
// NeuroShard's computation-cost network (MLSys'23 §3.2 "Neural cost models",
// Fig. 5 left, App. C "Neural architectures"; neuroshard/compute_cost_model.py
// ComputeCostNet, the architecture of AutoShard's cost model, KDD'22 §4.2):
//   every table's features -> shared table MLP F-128-32 (ReLU after each layer)
//   -> element-wise sum over the tables of a device -> cost MLP 32-64-1 (ReLU
//   between, linear output) -> the device's forward + backward compute cost.
// The table features are normalised inside the model with the statistics it
// stores, so a checkpoint is self-contained.
//
// State names: t_hidden.{k}.weight/bias, c_hidden.{k}.weight/bias (ModuleLists
// in the PyTorch model), feature_means / feature_stds (NeuroShard saves them
// beside the state_dict in its checkpoint).
// The learned cost model (cost/neural.hpp, neural_cost) wraps this network;
// here it is only the network.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/loss.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/normalizer.hpp"
#include "embplan/nn/set_reduce.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

// NeuroShard's constructor arguments and defaults (ComputeCostModel.train):
// table_mlp_sizes=[128, 32], pred_mlp_sizes=[32, 64]; the table MLP starts at
// the feature count and the cost MLP ends in 1. pred_mlp_sizes[0] must equal
// table_mlp_sizes.back(). 20 features: NeuroShard's table_configs keys, sorted
// (bin_0 .. bin_16, dim, pooling_factor, row).
struct compute_cost_net_options {
  Eigen::Index table_features = 20;
  std::vector<Eigen::Index> table_mlp_sizes{128, 32};
  std::vector<Eigen::Index> pred_mlp_sizes{32, 64};
};

// Forward record and scratch of one call; reused, it allocates nothing once
// the shapes have been seen. One per thread.
struct compute_cost_tape {
  matrix x;                         // normalised features [tables, F]
  mlp_tape table;                   // t_hidden; output [tables, 32]
  std::vector<std::int64_t> group;  // device of every table row
  matrix device;                    // per-device sums [devices, 32]
  mlp_tape head;                    // c_hidden; output [devices, 1]
  matrix doutput, dtable, ddevice;  // backward scratch

  // Predicted cost of every device [devices, 1].
  const matrix& output() const { return head.output(); }
};

// A mini-batch for training: the tables of many devices, stacked.
struct compute_cost_batch {
  matrix features;                  // raw table features [tables, F]
  std::vector<std::int64_t> group;  // device (sample) of every row
  matrix targets;                   // measured cost of every device [devices, 1]
};

struct compute_cost_net {
  normalizer feature_norm;  // feature_means, feature_stds
  mlp t_hidden;             // F -> 128 -> 32, ReLU after every layer
  mlp c_hidden;             // 32 -> 64 -> 1, ReLU between

  compute_cost_net() = default;

  // All-zero parameters and an identity normaliser.
  explicit compute_cost_net(const compute_cost_net_options& o)
      : feature_norm(o.table_features), t_hidden(table_options(o)), c_hidden(pred_options(o)) {}

  // PyTorch's default init, in construction order (t_hidden, then c_hidden),
  // from rng(seed); the normaliser is the identity until set (normalizer::fit).
  compute_cost_net(const compute_cost_net_options& o, std::uint64_t seed)
      : feature_norm(o.table_features) {
    rng gen(seed);
    t_hidden = mlp(table_options(o), gen);
    c_hidden = mlp(pred_options(o), gen);
  }

  Eigen::Index table_features() const noexcept { return t_hidden.in_features(); }
  Eigen::Index latent_size() const noexcept { return t_hidden.out_features(); }

  // One device: raw features [tables, F] of its tables -> predicted cost.
  // No allocation once the tape has seen the shapes.
  template <class = void>
  float forward(const Eigen::Ref<const matrix>& features, compute_cost_tape& tape) const {
    check_features(features);
    feature_norm.apply(features, tape.x);
    t_hidden.forward(tape.x, tape.table);
    tape.group.assign(static_cast<std::size_t>(features.rows()), 0);
    return cost_from_latents(tape.table.output(), tape);
  }

  template <class = void>
  float operator()(const Eigen::Ref<const matrix>& features) const {
    compute_cost_tape tape;
    return forward(features, tape);
  }

  // Many devices in one call: raw features [N, F] of all their tables,
  // group[n] the device of row n, `devices` devices (a device without tables
  // gets the cost of an empty sum). Result: tape.output() [devices, 1].
  template <class = void>
  void forward(const Eigen::Ref<const matrix>& features, std::span<const std::int64_t> group,
               Eigen::Index devices, compute_cost_tape& tape) const {
    check_features(features);
    feature_norm.apply(features, tape.x);
    t_hidden.forward(tape.x, tape.table);
    tape.group.assign(group.begin(), group.end());
    set_reduce(reduction::sum, tape.table.output(), group, devices, tape.device);
    c_hidden.forward(tape.device, tape.head);
  }

  // The table MLP alone: latents [tables, 32] of raw features. A table's
  // latent does not depend on its device, so a planner can compute it once
  // per table and price each device from latents (cost_from_latents).
  template <class = void>
  void table_latents(const Eigen::Ref<const matrix>& features, matrix& latents,
                     compute_cost_tape& tape) const {
    check_features(features);
    feature_norm.apply(features, tape.x);
    t_hidden.forward(tape.x, tape.table);
    latents = tape.table.output();
  }

  // One device priced from the latents of its tables [tables, 32]: the sum
  // (in row order, as index_add_) and the cost MLP.
  template <class = void>
  float cost_from_latents(const Eigen::Ref<const matrix>& latents, compute_cost_tape& tape) const {
    detail::require_cols(latents, latent_size(), "compute_cost_net.latents",
                         "out_features of t_hidden");
    tape.device.setZero(1, latent_size());
    for (Eigen::Index r = 0; r < latents.rows(); ++r)
      tape.device += latents.row(r);
    c_hidden.forward(tape.device, tape.head);
    return tape.head.output()(0, 0);
  }

  // Given dL/d output [devices, 1] of the last forward on tape, accumulates the
  // parameter gradients into grad.
  template <class = void>
  void backward(compute_cost_tape& tape, const Eigen::Ref<const matrix>& dout,
                compute_cost_net& grad) const {
    c_hidden.backward(tape.device, tape.head, dout, grad.c_hidden, &tape.ddevice);
    set_reduce_backward(reduction::sum, tape.ddevice, tape.group, {}, tape.dtable);
    t_hidden.backward(tape.x, tape.table, tape.dtable, grad.t_hidden, nullptr);
  }

  parameter_list named_parameters(std::string_view prefix = {}) {
    auto out = t_hidden.named_parameters(embplan::detail::path(prefix, "t_hidden"));
    for (auto& entry : c_hidden.named_parameters(embplan::detail::path(prefix, "c_hidden")))
      out.push_back(std::move(entry));
    return out;
  }
  const_parameter_list named_parameters(std::string_view prefix = {}) const {
    auto out = t_hidden.named_parameters(embplan::detail::path(prefix, "t_hidden"));
    for (auto& entry : c_hidden.named_parameters(embplan::detail::path(prefix, "c_hidden")))
      out.push_back(std::move(entry));
    return out;
  }
  parameter_list named_buffers(std::string_view prefix = {}) {
    return feature_norm.named_buffers(prefix);
  }
  const_parameter_list named_buffers(std::string_view prefix = {}) const {
    return feature_norm.named_buffers(prefix);
  }

 private:
  void check_features(const Eigen::Ref<const matrix>& features) const {
    detail::require_cols(features, table_features(), "compute_cost_net.features",
                         "the network's table feature count");
  }

  static mlp_options table_options(const compute_cost_net_options& o) {
    detail::require_positive(o.table_features, "compute_cost_net_options.table_features");
    if (o.table_mlp_sizes.empty()) {
      embplan::detail::fail("compute_cost_net_options.table_mlp_sizes", 0, "at least one size");
    }
    mlp_options out{
        .sizes = {o.table_features}, .relu_after_last = true, .naming = mlp_naming::module_list};
    out.sizes.insert(out.sizes.end(), o.table_mlp_sizes.begin(), o.table_mlp_sizes.end());
    return out;
  }

  static mlp_options pred_options(const compute_cost_net_options& o) {
    if (o.pred_mlp_sizes.empty() || o.table_mlp_sizes.empty() ||
        o.pred_mlp_sizes.front() != o.table_mlp_sizes.back()) {
      embplan::detail::fail("compute_cost_net_options.pred_mlp_sizes[0]",
                            o.pred_mlp_sizes.empty() ? Eigen::Index{0} : o.pred_mlp_sizes.front(),
                            "the last of table_mlp_sizes (the latent size)");
    }
    mlp_options out{
        .sizes = o.pred_mlp_sizes, .relu_after_last = false, .naming = mlp_naming::module_list};
    out.sizes.push_back(1);
    return out;
  }
};
static_assert(model_with_buffers<compute_cost_net>);

// Stacks the tables of some samples into a batch: pool_features [P, F] raw
// features of a table pool; samples[i] the pool rows of sample i's tables
// (NeuroShard's X); costs_ms[i] its measured cost (y); batch: the samples to
// take (a minibatches entry).
template <class = void>
void gather_batch(const Eigen::Ref<const matrix>& pool_features,
                  std::span<const std::vector<std::int64_t>> samples,
                  std::span<const float> costs_ms, std::span<const std::size_t> batch,
                  compute_cost_batch& out) {
  if (costs_ms.size() != samples.size()) {
    embplan::detail::fail("gather_batch.costs_ms.size", costs_ms.size(),
                          "one cost per sample (" + std::to_string(samples.size()) + ")");
  }
  std::size_t rows = 0;
  for (const auto s : batch) {
    if (s >= samples.size()) {
      embplan::detail::fail("gather_batch.batch", s,
                            "a sample below " + std::to_string(samples.size()));
    }
    rows += samples[s].size();
  }
  out.features.resize(static_cast<Eigen::Index>(rows), pool_features.cols());
  out.group.resize(rows);
  out.targets.resize(static_cast<Eigen::Index>(batch.size()), 1);
  Eigen::Index r = 0;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const auto& tables = samples[batch[b]];
    for (std::size_t j = 0; j < tables.size(); ++j) {
      const std::int64_t t = tables[j];
      if (t < 0 || t >= pool_features.rows()) {
        embplan::detail::fail(
            embplan::detail::path(embplan::detail::path("samples", batch[b]), j), t,
            "a row of the table pool (below " + std::to_string(pool_features.rows()) + ")");
      }
      out.features.row(r) = pool_features.row(t);
      out.group[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(b);
      ++r;
    }
    out.targets(static_cast<Eigen::Index>(b), 0) = costs_ms[batch[b]];
  }
}

// One optimisation step on a batch, as NeuroShard's training loop does it:
// zero the gradient, forward, MSE against the measured costs, backward, Adam.
// Returns the batch loss before the step. Refuses non-finite features or
// targets (field 'compute_cost_batch.features[r, c]').
template <class = void>
double train_step(compute_cost_net& net, const compute_cost_batch& batch, adam& optimizer,
                  compute_cost_net& grad, compute_cost_tape& tape) {
  detail::require_finite(batch.features, "compute_cost_batch.features");
  detail::require_finite(batch.targets, "compute_cost_batch.targets");
  detail::require_cols(batch.targets, 1, "compute_cost_batch.targets", "one cost per device");
  set_zero(grad);
  net.forward(batch.features, batch.group, batch.targets.rows(), tape);
  const double loss = mse_loss(tape.output(), batch.targets, &tape.doutput);
  net.backward(tape, tape.doutput, grad);
  optimizer.step(net, grad);
  return loss;
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
