#pragma once
// AutoShard's policy-value network at inference (KDD'22 §4.2-4.3 and the
// Appendix's "Architecture of the policy-value network"), one placement step
// at a time, on nn::autoshard_net's parameters (the authors' `Net` names:
// t_fc_*, s_fc_0, a_fc_0, core.*, p_fc_*, b_fc_*, c_fc_*):
//   table      e(x)  = relu(t_fc_1(relu(t_fc_0(x))))                   32
//   state      z_t   = [e(upcoming table), relu(s_fc_0(state_other))]  64
//   memory     h_t   = LSTM(z_t; h_{t-1}), two layers, hidden 64       64
//   value      V_t   = b_fc_1(relu(b_fc_0(h_t)))                       1
//   action a   m_a   = sum of e(x) over the tables shard a holds       32
//              q_a   = relu(a_fc_0(actions_other_a))                   32
//              u_a   = [m_a, q_a]                                      64
//   policy     logit_a = p_fc_3(relu(p_fc_2(relu(p_fc_1(relu(p_fc_0(
//                          [h_t, u_a, h_t * u_a])))))))                192 -> 1
// (The order of the concatenations is the authors' torch.cat order: table
// before other for the state, tables before other for an action.) The
// policy's MLP is shared by all actions, so a step has as many actions as
// the task has shards, any count. AutoShard's state_other is the share of
// tables still to place (the step-aware feature), its actions_other each
// shard's predicted cost (the cost head c_fc on m_a, or a meter's figure).
// A step with no action is refused. Batch 1, one episode: reset() starts
// one (zero LSTM state, as the authors' initial_state), step() reads one
// table. Not thread-safe: one object per episode in flight (it holds the
// LSTM state); the network it reads is shared, read-only.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/activation.hpp"
#include "embplan/nn/lstm.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// One step's inputs.
struct autoshard_step_input {
  // The upcoming table's features [1, table features].
  Eigen::Ref<const nn::matrix> table;
  // [1, state_other features]: AutoShard's step-aware feature(s).
  Eigen::Ref<const nn::matrix> state_other;
  // The tables every shard holds so far, stacked shard after shard [rows,
  // table features]; shard_tables[a] of them belong to action a (0: an
  // empty shard, whose m_a is 0, as the authors' index_add_ leaves it).
  Eigen::Ref<const nn::matrix> held_tables;
  std::span<const std::int64_t> shard_tables;
  // [actions, actions_other features]: per shard, e.g. its predicted cost.
  Eigen::Ref<const nn::matrix> actions_other;
};

struct autoshard_step_output {
  std::vector<float> logits;  // one per action (shard)
  float value = 0.0f;         // the value head's V(x_t)
};

class autoshard_inference {
 public:
  // `net` must outlive this object. A default-constructed (empty) network,
  // or one whose layers do not chain (the table latent and the action
  // representation must together be the LSTM's width, the policy's input
  // three times it), is refused, naming the layer.
  explicit autoshard_inference(const nn::autoshard_net& net) : net_(&net) {
    if (net.t_fc_0.weight.size() == 0 || net.core.layers.empty()) {
      embplan::detail::fail("autoshard_inference.net", "(empty)",
                            "a network with its layers (nn::autoshard_net(features, state_other, "
                            "actions_other), then load_state_dict)");
    }
    const Eigen::Index width = net.core.layers.back().weight_hh.cols();
    const auto chain = [](const char* layer, Eigen::Index got, Eigen::Index want) {
      if (got != want) {
        embplan::detail::fail(std::string("autoshard_inference.net.") + layer + ".in_features", got,
                              std::to_string(want));
      }
    };
    chain("core.l0", net.core.layers.front().weight_ih.cols(),
          net.t_fc_1.weight.rows() + net.s_fc_0.weight.rows());
    chain("p_fc_0", net.p_fc_0.weight.cols(), 3 * width);
    chain("b_fc_0", net.b_fc_0.weight.cols(), width);
    chain("a_fc_0 + t_fc_1 (action width)", net.t_fc_1.weight.rows() + net.a_fc_0.weight.rows(),
          width);
    chain("c_fc_0", net.c_fc_0.weight.cols(), net.t_fc_1.weight.rows());
    reset();
  }

  // A new episode: the LSTM's (h, c) back to zero.
  void reset() { state_ = net_->core.initial_state(1); }

  template <class = void>
  autoshard_step_output step(const autoshard_step_input& in) {
    autoshard_step_output out;
    step(in, out);
    return out;
  }

  template <class = void>
  void step(const autoshard_step_input& in, autoshard_step_output& out) {
    const nn::autoshard_net& n = *net_;
    const Eigen::Index features = n.t_fc_0.weight.cols();
    const auto actions = static_cast<Eigen::Index>(in.shard_tables.size());
    check_shape("autoshard_step_input.table", in.table.rows(), in.table.cols(), 1, features);
    check_shape("autoshard_step_input.state_other", in.state_other.rows(), in.state_other.cols(), 1,
                n.s_fc_0.weight.cols());
    if (actions < 1) {
      embplan::detail::fail("autoshard_step_input.shard_tables.size", actions,
                            "at least one action (shard)");
    }
    check_shape("autoshard_step_input.actions_other", in.actions_other.rows(),
                in.actions_other.cols(), actions, n.a_fc_0.weight.cols());
    std::int64_t held = 0;
    for (std::size_t a = 0; a < in.shard_tables.size(); ++a) {
      if (in.shard_tables[a] < 0) {
        embplan::detail::fail("autoshard_step_input.shard_tables[" + std::to_string(a) + "]",
                              in.shard_tables[a], "a table count >= 0");
      }
      held += in.shard_tables[a];
    }
    check_shape("autoshard_step_input.held_tables", in.held_tables.rows(), in.held_tables.cols(),
                held, held == 0 ? in.held_tables.cols() : features);

    // State: [e(table), relu(s_fc_0(other))] -> LSTM.
    table_latent(in.table, upcoming_);
    n.s_fc_0.forward(in.state_other, other_);
    nn::relu_inplace(other_);
    z_.resize(1, upcoming_.cols() + other_.cols());
    z_ << upcoming_, other_;
    n.core.step(z_, state_, ws_);
    const nn::matrix& h = state_.h.back();

    // Value head.
    n.b_fc_0.forward(h, hidden_);
    nn::relu_inplace(hidden_);
    n.b_fc_1.forward(hidden_, scalar_);
    out.value = scalar_(0, 0);

    // Actions: summed table latents and the other features' representation.
    const Eigen::Index latent = n.t_fc_1.weight.rows();
    sums_.setZero(actions, latent);
    if (held > 0) {
      table_latent(in.held_tables, held_latent_);
      Eigen::Index row = 0;
      for (Eigen::Index a = 0; a < actions; ++a) {
        for (std::int64_t k = 0; k < in.shard_tables[static_cast<std::size_t>(a)]; ++k, ++row)
          sums_.row(a) += held_latent_.row(row);
      }
    }
    n.a_fc_0.forward(in.actions_other, action_other_);
    nn::relu_inplace(action_other_);

    // Policy head over [h, u_a, h * u_a] per action.
    const Eigen::Index width = h.cols();
    x_.resize(actions, 3 * width);
    for (Eigen::Index a = 0; a < actions; ++a) {
      x_.block(a, 0, 1, width) = h;
      x_.block(a, width, 1, latent) = sums_.row(a);
      x_.block(a, width + latent, 1, width - latent) = action_other_.row(a);
      x_.block(a, 2 * width, 1, width) = h.array() * x_.block(a, width, 1, width).array();
    }
    n.p_fc_0.forward(x_, p0_);
    nn::relu_inplace(p0_);
    n.p_fc_1.forward(p0_, p1_);
    nn::relu_inplace(p1_);
    n.p_fc_2.forward(p1_, p2_);
    nn::relu_inplace(p2_);
    n.p_fc_3.forward(p2_, logit_);
    out.logits.resize(static_cast<std::size_t>(actions));
    for (Eigen::Index a = 0; a < actions; ++a)
      out.logits[static_cast<std::size_t>(a)] = logit_(a, 0);
  }

  // The cost head on summed table latents: AutoShard's neural cost model
  // (§4.1) sharing the table MLP, per row of `group_latent_sums` [groups, 32].
  template <class = void>
  void cost(const Eigen::Ref<const nn::matrix>& group_latent_sums, nn::matrix& out) const {
    nn::matrix hidden;
    net_->c_fc_0.forward(group_latent_sums, hidden);
    nn::relu_inplace(hidden);
    net_->c_fc_1.forward(hidden, out);
  }

  // e(x) for each row of `tables`.
  template <class = void>
  void table_latent(const Eigen::Ref<const nn::matrix>& tables, nn::matrix& out) const {
    nn::matrix hidden;
    net_->t_fc_0.forward(tables, hidden);
    nn::relu_inplace(hidden);
    net_->t_fc_1.forward(hidden, out);
    nn::relu_inplace(out);
  }

 private:
  static void check_shape(const char* field, Eigen::Index rows, Eigen::Index cols,
                          Eigen::Index want_rows, Eigen::Index want_cols) {
    if (rows != want_rows || cols != want_cols) {
      embplan::detail::fail(
          std::string(field) + ".shape",
          "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]",
          "[" + std::to_string(want_rows) + ", " + std::to_string(want_cols) + "]");
    }
  }

  const nn::autoshard_net* net_;
  nn::lstm_state state_;
  nn::lstm_workspace ws_;
  nn::matrix upcoming_, other_, z_, hidden_, scalar_, sums_, held_latent_, action_other_, x_, p0_,
      p1_, p2_, logit_;
};

}  // namespace embplan::inline EMBPLAN_ABI::rl
