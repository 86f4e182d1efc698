#pragma once
// DreamShard's policy network (NeurIPS'22 §3.3, Fig. 4 right, App. B.2; the
// authors' Model.forward / _get_latent) on the layers of nn::dreamshard_model
// (nn/paper_models.hpp, the authors' parameter names), by hand as
// nn/dreamshard_cost_net.hpp does. For every candidate device of an
// observation (a "slot"), from the raw feature rows of the tables already on
// it (one all-zero row when it holds none):
//   cost latent:  the cost branch's (fwd, comm, bwd) heads on the device, no
//                 gradient -> ReLU(cost_fc_0) -> ReLU(cost_fc_1)        [32]
//   table latent: rows -> ReLU(rl_table_fc_0) -> ReLU(rl_table_fc_1), summed
//                 over the device's rows                               [32]
//   logit = policy_net([table latent, cost latent])                  [64 -> 1]
// A ragged softmax over the slots of each observation (rl/ragged_softmax.hpp)
// is the authors' masked softmax; Algorithm 2 (inference) takes the argmax.
// A training batch faithful to the authors' update has a slot for every
// device, legal or not, and the chosen device's slot as the action.
// Two ways to run it:
// - dreamshard_policy_forward / _backward on a dreamshard_obs_batch: a batch
//   of observations, for training (REINFORCE, rl/reinforce.hpp).
// - dreamshard_policy_state: inference step by step, the table MLPs run once
//   per task (reset); same numbers as the batch forward up to float rounding.
// Design notes: docs/design/dreamshard.md.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/activation.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/set_reduce.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// A batch of observations: slots = (observation, legal device) pairs; rows =
// the feature rows of each slot's tables (one zero row for an empty device).
struct dreamshard_obs_batch {
  nn::matrix features{};                 // [rows, F]
  std::vector<std::int64_t> slot_of{};   // slot of every row, in [0, slots)
  std::vector<std::int64_t> group_of{};  // observation of every slot, in [0, groups)
  Eigen::Index groups = 0;
};

// Forward record and scratch of one call; one per thread.
struct dreamshard_policy_tape {
  nn::matrix logits{};              // [slots, 1]
  nn::matrix cost_features{};       // [slots, 3]: forward, communication, backward
  nn::matrix c0{}, c1{};            // cost-branch table MLP after ReLU [rows, 128], [rows, 32]
  nn::matrix r0{}, r1{};            // RL-branch table MLP after ReLU [rows, 128], [rows, 32]
  nn::matrix cost_sum{}, rl_sum{};  // per-slot sums of c1, r1 [slots, 32]
  nn::matrix head_hidden{}, head_out{};
  nn::matrix k0{}, k1{};  // cost-feature MLP after ReLU [slots, 64], [slots, 32]
  nn::matrix latent{};    // [slots, 64]: [table latent, cost latent]
  // backward scratch
  nn::matrix dlatent{}, dk1{}, dk0{}, drl_sum{}, dr1{}, dr0{};
};

namespace detail {

template <class = void>
void require_obs_batch(const nn::dreamshard_model& m, const dreamshard_obs_batch& b) {
  nn::detail::require_cols(b.features, m.rl_table_fc_0.in_features(),
                           "dreamshard_obs_batch.features", "the model's table feature count");
  nn::detail::require_cols(b.features, m.table_fc_0.in_features(), "dreamshard_obs_batch.features",
                           "the model's table feature count");
  if (static_cast<Eigen::Index>(b.slot_of.size()) != b.features.rows()) {
    embplan::detail::fail(
        "dreamshard_obs_batch.slot_of.size", b.slot_of.size(),
        "one slot per feature row (" + std::to_string(b.features.rows()) + " rows)");
  }
  if (b.groups < 1) embplan::detail::fail("dreamshard_obs_batch.groups", b.groups, "at least 1");
  const auto slots = b.group_of.size();
  std::vector<char> has(slots, 0);
  for (std::size_t r = 0; r < b.slot_of.size(); ++r) {
    if (b.slot_of[r] < 0 || static_cast<std::size_t>(b.slot_of[r]) >= slots) {
      embplan::detail::fail(embplan::detail::path("dreamshard_obs_batch.slot_of", r), b.slot_of[r],
                            "a slot in [0, " + std::to_string(slots) + ")");
    }
    has[static_cast<std::size_t>(b.slot_of[r])] = 1;
  }
  for (std::size_t s = 0; s < slots; ++s) {
    if (has[s] == 0) {
      embplan::detail::fail(embplan::detail::path("dreamshard_obs_batch.slot_rows", s), 0,
                            "at least one row per slot (an empty device is one all-zero row)");
    }
  }
  std::vector<char> seen(static_cast<std::size_t>(b.groups), 0);
  for (std::size_t s = 0; s < slots; ++s) {
    if (b.group_of[s] < 0 || b.group_of[s] >= b.groups) {
      embplan::detail::fail(embplan::detail::path("dreamshard_obs_batch.group_of", s),
                            b.group_of[s], "a group in [0, " + std::to_string(b.groups) + ")");
    }
    seen[static_cast<std::size_t>(b.group_of[s])] = 1;
  }
  for (Eigen::Index g = 0; g < b.groups; ++g) {
    if (seen[static_cast<std::size_t>(g)] == 0) {
      embplan::detail::fail(
          embplan::detail::path("dreamshard_obs_batch.group_size", static_cast<std::size_t>(g)), 0,
          "at least one slot (a legal device) per observation");
    }
  }
  nn::detail::require_finite(b.features, "dreamshard_obs_batch.features");
}

template <class = void>
void mlp2_relu(const nn::linear& l0, const nn::linear& l1, const Eigen::Ref<const nn::matrix>& x,
               nn::matrix& h0, nn::matrix& h1) {
  l0.forward(x, h0);
  nn::relu_inplace(h0);
  l1.forward(h0, h1);
  nn::relu_inplace(h1);
}

// Forward, communication, backward heads on device latents [n, 32] -> out [n, 3].
template <class = void>
void cost_heads(const nn::dreamshard_model& m, const Eigen::Ref<const nn::matrix>& device,
                nn::matrix& hidden, nn::matrix& head, nn::matrix& out) {
  const nn::linear* layers[3][2] = {{&m.forward_fc_0, &m.forward_fc_1},
                                    {&m.communication_fc_0, &m.communication_fc_1},
                                    {&m.backward_fc_0, &m.backward_fc_1}};
  out.resize(device.rows(), 3);
  for (int h = 0; h < 3; ++h) {
    layers[h][0]->forward(device, hidden);
    nn::relu_inplace(hidden);
    layers[h][1]->forward(hidden, head);
    out.col(h) = head.col(0);
  }
}

// forward + communication + backward of each row of costs [n, 3], added in
// double as the authors add the heads' .item() Python floats.
inline void sum_heads(const nn::matrix& costs, std::vector<double>& out) {
  out.resize(static_cast<std::size_t>(costs.rows()));
  for (Eigen::Index t = 0; t < costs.rows(); ++t) {
    out[static_cast<std::size_t>(t)] = static_cast<double>(costs(t, 0)) +
                                       static_cast<double>(costs(t, 1)) +
                                       static_cast<double>(costs(t, 2));
  }
}

// From the per-slot sums of both branches' table latents to tape.logits.
template <class = void>
void score_from_sums(const nn::dreamshard_model& m, dreamshard_policy_tape& t) {
  cost_heads(m, t.cost_sum, t.head_hidden, t.head_out, t.cost_features);
  mlp2_relu(m.cost_fc_0, m.cost_fc_1, t.cost_features, t.k0, t.k1);
  const Eigen::Index slots = t.rl_sum.rows();
  const Eigen::Index a = t.rl_sum.cols();
  t.latent.resize(slots, a + t.k1.cols());
  t.latent.leftCols(a) = t.rl_sum;
  t.latent.rightCols(t.k1.cols()) = t.k1;
  m.policy_net.forward(t.latent, t.logits);
}

}  // namespace detail

// Runs the policy on a batch: tape.logits [slots, 1], tape.cost_features [slots, 3].
template <class = void>
void dreamshard_policy_forward(const nn::dreamshard_model& m, const dreamshard_obs_batch& b,
                               dreamshard_policy_tape& tape) {
  detail::require_obs_batch(m, b);
  const auto slots = static_cast<Eigen::Index>(b.group_of.size());
  detail::mlp2_relu(m.table_fc_0, m.table_fc_1, b.features, tape.c0, tape.c1);
  nn::set_reduce(nn::reduction::sum, tape.c1, b.slot_of, slots, tape.cost_sum);
  detail::mlp2_relu(m.rl_table_fc_0, m.rl_table_fc_1, b.features, tape.r0, tape.r1);
  nn::set_reduce(nn::reduction::sum, tape.r1, b.slot_of, slots, tape.rl_sum);
  detail::score_from_sums(m, tape);
}

// Accumulates the RL branch's gradients (rl_table_fc_*, cost_fc_*, policy_net)
// into grad, given dL/dlogits of the last forward on tape; the cost branch
// gets none (the authors compute cost features under no_grad).
template <class = void>
void dreamshard_policy_backward(const nn::dreamshard_model& m, const dreamshard_obs_batch& b,
                                dreamshard_policy_tape& tape,
                                const Eigen::Ref<const nn::matrix>& dlogits,
                                nn::dreamshard_model& grad) {
  const auto slots = static_cast<Eigen::Index>(b.group_of.size());
  if (tape.r1.rows() != b.features.rows() || tape.latent.rows() != slots) {
    embplan::detail::fail(
        "dreamshard_policy_backward.tape", nn::detail::shape_string(tape.latent),
        "the record of a forward on this batch (" + std::to_string(slots) + " slots)");
  }
  nn::detail::require_shape(dlogits, slots, 1, "dreamshard_policy_backward.logits_grad",
                            "[slots, 1]");
  m.policy_net.backward(tape.latent, dlogits, grad.policy_net, &tape.dlatent);
  const Eigen::Index a = tape.rl_sum.cols();
  // Cost features -> cost_fc_1 -> cost_fc_0; nothing flows into the cost branch.
  tape.dk1 = tape.dlatent.rightCols(tape.k1.cols());
  nn::relu_backward(tape.k1, tape.dk1);
  m.cost_fc_1.backward(tape.k0, tape.dk1, grad.cost_fc_1, &tape.dk0);
  nn::relu_backward(tape.k0, tape.dk0);
  m.cost_fc_0.backward(tape.cost_features, tape.dk0, grad.cost_fc_0, nullptr);
  // Table latents: the sum per slot, then the RL table MLP.
  tape.drl_sum = tape.dlatent.leftCols(a);
  nn::set_reduce_backward(nn::reduction::sum, tape.drl_sum, b.slot_of, {}, tape.dr1);
  nn::relu_backward(tape.r1, tape.dr1);
  m.rl_table_fc_1.backward(tape.r0, tape.dr1, grad.rl_table_fc_1, &tape.dr0);
  nn::relu_backward(tape.r0, tape.dr0);
  m.rl_table_fc_0.backward(b.features, tape.dr0, grad.rl_table_fc_0, nullptr);
}

// The cost branch's single-table cost, forward + communication + backward
// heads on a one-table device, for each row of features [tables, F]: the key
// by which DreamShard orders tables (the authors' Env.reset, descending).
template <class = void>
void dreamshard_single_table_costs(const nn::dreamshard_model& m,
                                   const Eigen::Ref<const nn::matrix>& features,
                                   std::vector<double>& out) {
  nn::detail::require_cols(features, m.table_fc_0.in_features(), "dreamshard_single_table.features",
                           "the model's table feature count");
  nn::detail::require_finite(features, "dreamshard_single_table.features");
  nn::matrix h0, h1, hidden, head, costs;
  detail::mlp2_relu(m.table_fc_0, m.table_fc_1, features, h0, h1);
  detail::cost_heads(m, h1, hidden, head, costs);
  detail::sum_heads(costs, out);
}

// Builds a dreamshard_obs_batch one observation at a time (rows copied once).
class dreamshard_obs_builder {
 public:
  explicit dreamshard_obs_builder(Eigen::Index features) : features_(features) {
    nn::detail::require_positive(features, "dreamshard_obs_builder.features");
  }

  // One observation: a slot for each device of `devices`, in that order (the
  // legal ones), holding the rows of table_features listed in
  // device_tables[device] in that order, or one all-zero row when the list is
  // empty. Returns the observation's group id.
  template <class = void>
  Eigen::Index add(const Eigen::Ref<const nn::matrix>& table_features,
                   std::span<const std::vector<std::int64_t>> device_tables,
                   std::span<const std::int64_t> devices) {
    nn::detail::require_cols(table_features, features_, "dreamshard_obs_builder.table_features",
                             "the builder's feature count");
    if (devices.empty()) {
      embplan::detail::fail("dreamshard_obs_builder.devices.size", 0,
                            "at least one legal device per observation");
    }
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const std::int64_t d = devices[i];
      if (d < 0 || static_cast<std::size_t>(d) >= device_tables.size()) {
        embplan::detail::fail(embplan::detail::path("dreamshard_obs_builder.devices", i), d,
                              "a device in [0, " + std::to_string(device_tables.size()) + ")");
      }
      for (const std::int64_t t : device_tables[static_cast<std::size_t>(d)]) {
        if (t < 0 || t >= table_features.rows()) {
          embplan::detail::fail(embplan::detail::path("dreamshard_obs_builder.device_tables",
                                                      static_cast<std::size_t>(d)),
                                t, "a table in [0, " + std::to_string(table_features.rows()) + ")");
        }
      }
    }
    const auto group = groups_++;
    for (const std::int64_t d : devices) {
      const auto slot = static_cast<std::int64_t>(group_of_.size());
      group_of_.push_back(group);
      const auto& tables = device_tables[static_cast<std::size_t>(d)];
      if (tables.empty()) {
        data_.insert(data_.end(), static_cast<std::size_t>(features_), 0.0f);
        slot_of_.push_back(slot);
      }
      for (const std::int64_t t : tables) {
        const auto row = table_features.row(t);
        for (Eigen::Index f = 0; f < features_; ++f)
          data_.push_back(row(f));
        slot_of_.push_back(slot);
      }
    }
    return group;
  }

  void build(dreamshard_obs_batch& out) const {
    out.features = Eigen::Map<const nn::matrix>(
        data_.data(), static_cast<Eigen::Index>(slot_of_.size()), features_);
    out.slot_of = slot_of_;
    out.group_of = group_of_;
    out.groups = groups_;
  }

  void clear() noexcept {
    data_.clear();
    slot_of_.clear();
    group_of_.clear();
    groups_ = 0;
  }

  Eigen::Index groups() const noexcept { return groups_; }

 private:
  Eigen::Index features_ = 0;
  std::vector<float> data_{};
  std::vector<std::int64_t> slot_of_{};
  std::vector<std::int64_t> group_of_{};
  Eigen::Index groups_ = 0;
};

// Incremental inference (Algorithm 2 step by step): each table's latents of
// both branches are computed once by reset; place(table, device) adds them to
// the device's running sums; score(devices) runs the heads, the cost-feature
// MLP and policy_net on those devices only. A step costs O(devices), not
// O(tables placed so far).
class dreamshard_policy_state {
 public:
  // Latents of every row of features [tables, F]; all devices empty.
  template <class = void>
  void reset(const nn::dreamshard_model& m, const Eigen::Ref<const nn::matrix>& features,
             Eigen::Index devices) {
    nn::detail::require_cols(features, m.table_fc_0.in_features(),
                             "dreamshard_policy_state.features", "the model's table feature count");
    nn::detail::require_cols(features, m.rl_table_fc_0.in_features(),
                             "dreamshard_policy_state.features", "the model's table feature count");
    nn::detail::require_positive(devices, "dreamshard_policy_state.devices");
    nn::detail::require_finite(features, "dreamshard_policy_state.features");
    nn::matrix h0;
    detail::mlp2_relu(m.table_fc_0, m.table_fc_1, features, h0, cost_latent_);
    detail::mlp2_relu(m.rl_table_fc_0, m.rl_table_fc_1, features, h0, rl_latent_);
    const nn::matrix zero = nn::matrix::Zero(1, features.cols());
    detail::mlp2_relu(m.table_fc_0, m.table_fc_1, zero, h0, empty_cost_);
    detail::mlp2_relu(m.rl_table_fc_0, m.rl_table_fc_1, zero, h0, empty_rl_);
    cost_sum_.setZero(devices, cost_latent_.cols());
    rl_sum_.setZero(devices, rl_latent_.cols());
    count_.assign(static_cast<std::size_t>(devices), 0);
  }

  void place(Eigen::Index table, Eigen::Index device) {
    if (table < 0 || table >= cost_latent_.rows()) {
      embplan::detail::fail("dreamshard_policy_state.table", table,
                            "a table in [0, " + std::to_string(cost_latent_.rows()) + ")");
    }
    require_device(device, "dreamshard_policy_state.device");
    cost_sum_.row(device) += cost_latent_.row(table);
    rl_sum_.row(device) += rl_latent_.row(table);
    ++count_[static_cast<std::size_t>(device)];
  }

  // tape.logits [devices.size(), 1] (and tape.cost_features) for the given
  // devices, in that order: one observation's slots.
  template <class = void>
  void score(const nn::dreamshard_model& m, std::span<const std::int64_t> devices,
             dreamshard_policy_tape& tape) const {
    if (devices.empty()) {
      embplan::detail::fail("dreamshard_policy_state.devices.size", 0, "at least one legal device");
    }
    const auto n = static_cast<Eigen::Index>(devices.size());
    tape.cost_sum.resize(n, cost_sum_.cols());
    tape.rl_sum.resize(n, rl_sum_.cols());
    for (Eigen::Index i = 0; i < n; ++i) {
      const std::int64_t d = devices[static_cast<std::size_t>(i)];
      require_device(
          d, embplan::detail::path("dreamshard_policy_state.devices", static_cast<std::size_t>(i)));
      const bool empty = count_[static_cast<std::size_t>(d)] == 0;
      tape.cost_sum.row(i) = empty ? empty_cost_.row(0) : cost_sum_.row(d);
      tape.rl_sum.row(i) = empty ? empty_rl_.row(0) : rl_sum_.row(d);
    }
    detail::score_from_sums(m, tape);
  }

  // dreamshard_single_table_costs from the latents reset computed (no second
  // pass of the cost branch's table MLP).
  template <class = void>
  void single_table_costs(const nn::dreamshard_model& m, std::vector<double>& out) const {
    nn::matrix hidden, head, costs;
    detail::cost_heads(m, cost_latent_, hidden, head, costs);
    detail::sum_heads(costs, out);
  }

  Eigen::Index tables() const noexcept { return cost_latent_.rows(); }
  Eigen::Index devices() const noexcept { return cost_sum_.rows(); }
  std::int64_t tables_on(Eigen::Index device) const {
    require_device(device, "dreamshard_policy_state.device");
    return count_[static_cast<std::size_t>(device)];
  }

 private:
  void require_device(std::int64_t device, const std::string& field) const {
    if (device < 0 || device >= cost_sum_.rows()) {
      embplan::detail::fail(field, device,
                            "a device in [0, " + std::to_string(cost_sum_.rows()) + ")");
    }
  }

  nn::matrix cost_latent_{}, rl_latent_{};  // per table [tables, 32]
  nn::matrix empty_cost_{}, empty_rl_{};    // latents of the all-zero row [1, 32]
  nn::matrix cost_sum_{}, rl_sum_{};        // per device [devices, 32]
  std::vector<std::int64_t> count_{};
};

}  // namespace embplan::inline EMBPLAN_ABI::rl
