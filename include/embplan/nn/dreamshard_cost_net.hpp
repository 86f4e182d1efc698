#pragma once
// DreamShard's cost network (NeurIPS'22 §3.2 "Cost network", Fig. 4 left;
// dreamshard/models.py Model.kernel_forward and overall_forward) on the
// layers of nn::dreamshard_model (paper_models.hpp), so a checkpoint with
// PyTorch's names (table_fc_0, forward_fc_0, ...) trains and predicts here:
//   table features -> shared table MLP F-128-32 (ReLU after each layer)
//   -> element-wise sum over the tables of a device (device representation)
//      -> forward / communication / backward heads 32-64-1 per device;
//   -> element-wise max over the devices of a placement (overall representation)
//      -> overall head 32-64-1: the placement's cost.
// Features go in as the caller prepared them (DreamShard normalises its table
// features before the network; the model stores no statistics).
//
// Training (DreamShard App. B.4.1, Eq. 1): MSE of each head against the
// measured costs, the four MSEs summed, Adam.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).
#include <Eigen/Core>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/activation.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/set_reduce.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

// The heads of one device, in the columns of dreamshard_cost_tape::device_costs.
enum class dreamshard_head : std::uint8_t { forward = 0, communication = 1, backward = 2 };

// Forward record and scratch of one call; one per thread.
struct dreamshard_cost_tape {
  matrix t0, t1;                    // table MLP outputs after ReLU [tables, 128], [tables, 32]
  std::vector<std::int64_t> group;  // device of every table row
  std::vector<std::int64_t> placement_of;  // placement of every device
  matrix device;                           // per-device sums [devices, 32]
  matrix overall;                          // per-placement max [placements, 32]
  std::vector<Eigen::Index> argmax;
  matrix hidden[4];     // head hidden layers after ReLU: forward, communication, backward, overall
  matrix out[4];        // head outputs [devices, 1] x 3, [placements, 1]
  matrix device_costs;  // [devices, 3]: forward, communication, backward
  // backward scratch
  matrix dh, dlatent, ddevice, doverall, dt1, dt0, dx;
};

// A training batch: the tables of many devices of many placements, stacked.
struct dreamshard_cost_batch {
  matrix features;                         // [tables, F]
  std::vector<std::int64_t> group;         // device of every table row, in [0, devices)
  std::vector<std::int64_t> placement_of;  // placement of every device, in [0, placements)
  matrix device_targets;   // [devices, 3] measured forward, communication, backward ms
  matrix overall_targets;  // [placements, 1] measured overall ms
};

namespace detail {

inline linear& head_layer(dreamshard_model& m, int head, int k) {
  switch (head) {
    case 0:
      return k == 0 ? m.forward_fc_0 : m.forward_fc_1;
    case 1:
      return k == 0 ? m.communication_fc_0 : m.communication_fc_1;
    case 2:
      return k == 0 ? m.backward_fc_0 : m.backward_fc_1;
    default:
      return k == 0 ? m.overall_fc_0 : m.overall_fc_1;
  }
}

inline const linear& head_layer(const dreamshard_model& m, int head, int k) {
  return head_layer(const_cast<dreamshard_model&>(m), head, k);
}

}  // namespace detail

// A dreamshard_model with PyTorch's default init, layer by layer in the
// declaration order of DreamShard's Model, from rng(seed).
inline dreamshard_model make_dreamshard_model(Eigen::Index table_features, Eigen::Index devices,
                                              std::uint64_t seed) {
  dreamshard_model m(table_features, devices);
  rng gen(seed);
  const auto init = [&](linear& l) { l = linear(l.in_features(), l.out_features(), gen); };
  for (linear* l : {&m.table_fc_0, &m.table_fc_1, &m.rl_table_fc_0, &m.rl_table_fc_1,
                    &m.forward_fc_0, &m.forward_fc_1, &m.communication_fc_0, &m.communication_fc_1,
                    &m.backward_fc_0, &m.backward_fc_1, &m.overall_fc_0, &m.overall_fc_1,
                    &m.cost_fc_0, &m.cost_fc_1, &m.policy_net, &m.value_net})
    init(*l);
  return m;
}

// Runs the cost network: features [tables, F], group[r] the device of table
// row r (devices = placement_of.size()), placement_of[d] the placement of
// device d (`placements` of them). Results: tape.device_costs [devices, 3]
// and tape.out[3] [placements, 1].
template <class = void>
void dreamshard_cost_forward(const dreamshard_model& m, const Eigen::Ref<const matrix>& x,
                             std::span<const std::int64_t> group,
                             std::span<const std::int64_t> placement_of, Eigen::Index placements,
                             dreamshard_cost_tape& tape) {
  detail::require_cols(x, m.table_fc_0.in_features(), "dreamshard_cost.features",
                       "the model's table feature count");
  if (placements < 1) {
    embplan::detail::fail("dreamshard_cost.placements", placements, "at least one placement");
  }
  const auto devices = static_cast<Eigen::Index>(placement_of.size());
  m.table_fc_0.forward(x, tape.t0);
  relu_inplace(tape.t0);
  m.table_fc_1.forward(tape.t0, tape.t1);
  relu_inplace(tape.t1);
  tape.group.assign(group.begin(), group.end());
  tape.placement_of.assign(placement_of.begin(), placement_of.end());
  set_reduce(reduction::sum, tape.t1, group, devices, tape.device);
  set_reduce(reduction::max, tape.device, placement_of, placements, tape.overall, &tape.argmax);
  for (int h = 0; h < 4; ++h) {
    const matrix& in = h < 3 ? tape.device : tape.overall;
    detail::head_layer(m, h, 0).forward(in, tape.hidden[h]);
    relu_inplace(tape.hidden[h]);
    detail::head_layer(m, h, 1).forward(tape.hidden[h], tape.out[h]);
  }
  tape.device_costs.resize(devices, 3);
  for (int h = 0; h < 3; ++h)
    tape.device_costs.col(h) = tape.out[h].col(0);
}

// Given dL/d device_costs [devices, 3] and dL/d overall [placements, 1] of the
// last forward on tape, accumulates the cost branch's gradients into grad
// (the RL branch's stay untouched).
template <class = void>
void dreamshard_cost_backward(const dreamshard_model& m, const Eigen::Ref<const matrix>& x,
                              dreamshard_cost_tape& tape,
                              const Eigen::Ref<const matrix>& ddevice_costs,
                              const Eigen::Ref<const matrix>& doverall, dreamshard_model& grad) {
  const Eigen::Index devices = tape.device.rows();
  detail::require_shape(ddevice_costs, devices, 3, "dreamshard_cost.device_costs_grad",
                        "[devices, 3]");
  detail::require_shape(doverall, tape.overall.rows(), 1, "dreamshard_cost.overall_grad",
                        "[placements, 1]");
  tape.ddevice.setZero(devices, tape.device.cols());
  for (int h = 0; h < 4; ++h) {
    const matrix& in = h < 3 ? tape.device : tape.overall;
    const matrix dout = h < 3 ? matrix(ddevice_costs.col(h)) : matrix(doverall);
    detail::head_layer(m, h, 1).backward(tape.hidden[h], dout, detail::head_layer(grad, h, 1),
                                         &tape.dh);
    relu_backward(tape.hidden[h], tape.dh);
    detail::head_layer(m, h, 0).backward(in, tape.dh, detail::head_layer(grad, h, 0),
                                         &tape.dlatent);
    if (h < 3) {
      tape.ddevice += tape.dlatent;
    } else {
      set_reduce_backward(reduction::max, tape.dlatent, tape.placement_of, tape.argmax,
                          tape.doverall);
      tape.ddevice += tape.doverall;
    }
  }
  set_reduce_backward(reduction::sum, tape.ddevice, tape.group, {}, tape.dt1);
  relu_backward(tape.t1, tape.dt1);
  m.table_fc_1.backward(tape.t0, tape.dt1, grad.table_fc_1, &tape.dt0);
  relu_backward(tape.t0, tape.dt0);
  m.table_fc_0.backward(x, tape.dt0, grad.table_fc_0, nullptr);
}

// The training loss: the sum of the four heads' MSEs. Writes its gradients
// w.r.t. device_costs and the overall output when asked.
template <class = void>
double dreamshard_cost_loss(const dreamshard_cost_tape& tape, const dreamshard_cost_batch& b,
                            matrix* ddevice_costs, matrix* doverall) {
  detail::require_shape(b.device_targets, tape.device_costs.rows(), 3,
                        "dreamshard_cost_batch.device_targets", "[devices, 3]");
  detail::require_shape(b.overall_targets, tape.out[3].rows(), 1,
                        "dreamshard_cost_batch.overall_targets", "[placements, 1]");
  detail::require_finite(b.device_targets, "dreamshard_cost_batch.device_targets");
  detail::require_finite(b.overall_targets, "dreamshard_cost_batch.overall_targets");
  const double devices = static_cast<double>(tape.device_costs.rows());
  const double placements = static_cast<double>(tape.out[3].rows());
  const matrix e = tape.device_costs - b.device_targets;
  const matrix eo = tape.out[3] - b.overall_targets;
  double loss = 0.0;
  if (devices > 0) loss += e.cast<double>().squaredNorm() / devices;  // three MSEs, summed
  loss += eo.cast<double>().squaredNorm() / placements;
  if (ddevice_costs != nullptr) {
    *ddevice_costs = e * static_cast<float>(devices > 0 ? 2.0 / devices : 0.0);
  }
  if (doverall != nullptr) *doverall = eo * static_cast<float>(2.0 / placements);
  return loss;
}

// One optimisation step on a batch: zero the gradient, forward, the summed
// MSE, backward, Adam. Returns the loss before the step.
template <class = void>
double dreamshard_cost_train_step(dreamshard_model& m, const dreamshard_cost_batch& b,
                                  adam& optimizer, dreamshard_model& grad,
                                  dreamshard_cost_tape& tape) {
  detail::require_finite(b.features, "dreamshard_cost_batch.features");
  set_zero(grad);
  dreamshard_cost_forward(m, b.features, b.group, b.placement_of, b.overall_targets.rows(), tape);
  matrix ddev;
  matrix dall;
  const double loss = dreamshard_cost_loss(tape, b, &ddev, &dall);
  dreamshard_cost_backward(m, b.features, tape, ddev, dall, grad);
  optimizer.step(m, grad);
  return loss;
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
