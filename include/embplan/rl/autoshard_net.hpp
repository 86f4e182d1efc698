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

namespace detail {

// "<field>.shape" = "[r, c]": expected "[wr, wc]".
inline void require_shape(const std::string& field, Eigen::Index rows, Eigen::Index cols,
                          Eigen::Index want_rows, Eigen::Index want_cols) {
  if (rows != want_rows || cols != want_cols) {
    embplan::detail::fail(field + ".shape",
                          "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]",
                          "[" + std::to_string(want_rows) + ", " + std::to_string(want_cols) + "]");
  }
}

// The sum of table counts, each >= 0 ("<field>[k]" named where one is not).
inline std::int64_t table_count_sum(const std::string& field,
                                    std::span<const std::int64_t> counts) {
  std::int64_t sum = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 0) {
      embplan::detail::fail(field + "[" + std::to_string(k) + "]", counts[k], "a table count >= 0");
    }
    sum += counts[k];
  }
  return sum;
}

}  // namespace detail

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
    detail::require_shape("autoshard_step_input.table", in.table.rows(), in.table.cols(), 1,
                          features);
    detail::require_shape("autoshard_step_input.state_other", in.state_other.rows(),
                          in.state_other.cols(), 1, n.s_fc_0.weight.cols());
    if (actions < 1) {
      embplan::detail::fail("autoshard_step_input.shard_tables.size", actions,
                            "at least one action (shard)");
    }
    detail::require_shape("autoshard_step_input.actions_other", in.actions_other.rows(),
                          in.actions_other.cols(), actions, n.a_fc_0.weight.cols());
    const std::int64_t held =
        detail::table_count_sum("autoshard_step_input.shard_tables", in.shard_tables);
    detail::require_shape("autoshard_step_input.held_tables", in.held_tables.rows(),
                          in.held_tables.cols(), held,
                          held == 0 ? in.held_tables.cols() : features);

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
  const nn::autoshard_net* net_;
  nn::lstm_state state_;
  nn::lstm_workspace ws_;
  nn::matrix upcoming_, other_, z_, hidden_, scalar_, sums_, held_latent_, action_other_, x_, p0_,
      p1_, p2_, logit_;
};

// ------------------------------------------------------------ training
// One episode of T steps as the learner sees it (batch 1, the LSTM from zero
// state): step t's upcoming table and state features, the tables every shard
// held before step t (stacked step by step, shard by shard), and its actions'
// other features. A step may have any number of actions (>= 1).
struct autoshard_episode {
  nn::matrix tables;                       // [T, table features]
  nn::matrix state_other;                  // [T, state_other features]
  nn::matrix held_tables;                  // [R, table features]
  std::vector<std::int64_t> action_count;  // [T]: actions (shards) of step t
  std::vector<std::int64_t> held_count;    // [sum of action_count]: tables of each (step, action)
  nn::matrix actions_other;                // [sum of action_count, actions_other features]
};

// The forward record autoshard_backward reads.
struct autoshard_tape {
  nn::matrix t0, e, o, z;                // upcoming tables: t_fc_0 out, latents; s_fc_0; [e, o]
  nn::lstm_tape core;                    // over z
  nn::matrix b0;                         // value head hidden
  nn::matrix ht0, he;                    // held tables: t_fc_0 out, latents
  nn::matrix q, u, hrep, x, p0, p1, p2;  // actions, [m, q], h per action, policy input, hidden
  nn::matrix logits;                     // [sum of action_count, 1]
  nn::matrix values;                     // [T, 1]
};

namespace detail {

inline void require_episode(const nn::autoshard_net& n, const autoshard_episode& ep) {
  const auto steps = ep.tables.rows();
  const Eigen::Index features = n.t_fc_0.weight.cols();
  require_shape("autoshard_episode.tables", steps, ep.tables.cols(), steps, features);
  require_shape("autoshard_episode.state_other", ep.state_other.rows(), ep.state_other.cols(),
                steps, n.s_fc_0.weight.cols());
  if (static_cast<Eigen::Index>(ep.action_count.size()) != steps) {
    embplan::detail::fail("autoshard_episode.action_count.size", ep.action_count.size(),
                          "one entry per step (" + std::to_string(steps) + ")");
  }
  std::int64_t actions = 0;
  for (std::size_t t = 0; t < ep.action_count.size(); ++t) {
    if (ep.action_count[t] < 1) {
      embplan::detail::fail("autoshard_episode.action_count[" + std::to_string(t) + "]",
                            ep.action_count[t], "at least one action");
    }
    actions += ep.action_count[t];
  }
  if (static_cast<std::int64_t>(ep.held_count.size()) != actions) {
    embplan::detail::fail("autoshard_episode.held_count.size", ep.held_count.size(),
                          "one entry per (step, action) (" + std::to_string(actions) + ")");
  }
  const std::int64_t held = table_count_sum("autoshard_episode.held_count", ep.held_count);
  require_shape("autoshard_episode.held_tables", ep.held_tables.rows(),
                held == 0 ? features : ep.held_tables.cols(), held, features);
  require_shape("autoshard_episode.actions_other", ep.actions_other.rows(), ep.actions_other.cols(),
                actions, n.a_fc_0.weight.cols());
}

// y = relu(layer(x)).
template <class = void>
void relu_layer(const nn::linear& layer, const Eigen::Ref<const nn::matrix>& x, nn::matrix& y) {
  layer.forward(x, y);
  nn::relu_inplace(y);
}

// dy given for y = relu(layer(x)): parameter gradients into g, dx if asked.
template <class = void>
void relu_layer_backward(const nn::linear& layer, const Eigen::Ref<const nn::matrix>& x,
                         const nn::matrix& y, nn::matrix dy, nn::linear& g, nn::matrix* dx) {
  nn::relu_backward(y, dy);
  layer.backward(x, dy, g, dx);
}

}  // namespace detail

// The whole episode's logits (one per (step, action), step-major) and
// values, as autoshard_inference gives them step by step, recorded for
// autoshard_backward. Bad input names the field (autoshard_episode.*).
template <class = void>
void autoshard_forward(const nn::autoshard_net& n, const autoshard_episode& ep,
                       autoshard_tape& tp) {
  detail::require_episode(n, ep);
  const Eigen::Index steps = ep.tables.rows();
  const Eigen::Index actions = ep.actions_other.rows();
  detail::relu_layer(n.t_fc_0, ep.tables, tp.t0);
  detail::relu_layer(n.t_fc_1, tp.t0, tp.e);
  detail::relu_layer(n.s_fc_0, ep.state_other, tp.o);
  tp.z.resize(steps, tp.e.cols() + tp.o.cols());
  tp.z << tp.e, tp.o;
  n.core.forward(tp.z, 1, nullptr, tp.core);
  const nn::matrix& h = tp.core.output();
  detail::relu_layer(n.b_fc_0, h, tp.b0);
  n.b_fc_1.forward(tp.b0, tp.values);

  const Eigen::Index latent = n.t_fc_1.weight.rows();
  const Eigen::Index width = h.cols();
  nn::matrix m = nn::matrix::Zero(actions, latent);
  if (ep.held_tables.rows() > 0) {
    detail::relu_layer(n.t_fc_0, ep.held_tables, tp.ht0);
    detail::relu_layer(n.t_fc_1, tp.ht0, tp.he);
    Eigen::Index row = 0;
    for (Eigen::Index a = 0; a < actions; ++a)
      for (std::int64_t k = 0; k < ep.held_count[static_cast<std::size_t>(a)]; ++k, ++row)
        m.row(a) += tp.he.row(row);
  } else {
    tp.ht0.resize(0, n.t_fc_0.weight.rows());
    tp.he.resize(0, latent);
  }
  detail::relu_layer(n.a_fc_0, ep.actions_other, tp.q);
  tp.u.resize(actions, width);
  tp.u << m, tp.q;
  tp.hrep.resize(actions, width);
  Eigen::Index a = 0;
  for (Eigen::Index t = 0; t < steps; ++t)
    for (std::int64_t k = 0; k < ep.action_count[static_cast<std::size_t>(t)]; ++k, ++a)
      tp.hrep.row(a) = h.row(t);
  tp.x.resize(actions, 3 * width);
  tp.x << tp.hrep, tp.u, (tp.hrep.array() * tp.u.array()).matrix();
  detail::relu_layer(n.p_fc_0, tp.x, tp.p0);
  detail::relu_layer(n.p_fc_1, tp.p0, tp.p1);
  detail::relu_layer(n.p_fc_2, tp.p1, tp.p2);
  n.p_fc_3.forward(tp.p2, tp.logits);
}

// Backpropagation of dL/dlogits [actions, 1] and dL/dvalues [T, 1] through
// the episode recorded in `tp` (by autoshard_forward on the same network and
// episode): parameter gradients accumulate into `grad` (a network of the
// same shape, e.g. nn::zeros_like(net)). The cost head gets none (it is
// trained on the cost data, autoshard_cost_backward's business).
template <class = void>
void autoshard_backward(const nn::autoshard_net& n, const autoshard_episode& ep, autoshard_tape& tp,
                        const Eigen::Ref<const nn::matrix>& dlogits,
                        const Eigen::Ref<const nn::matrix>& dvalues, nn::autoshard_net& grad) {
  const Eigen::Index steps = ep.tables.rows();
  const Eigen::Index actions = tp.logits.rows();
  if (dlogits.rows() != actions || dlogits.cols() != 1) {
    embplan::detail::fail("autoshard_backward.dlogits.rows", dlogits.rows(),
                          std::to_string(actions) + " (one per (step, action)), 1 column");
  }
  if (dvalues.rows() != steps || dvalues.cols() != 1) {
    embplan::detail::fail("autoshard_backward.dvalues.rows", dvalues.rows(),
                          std::to_string(steps) + " (one per step), 1 column");
  }
  const Eigen::Index width = tp.hrep.cols();
  const Eigen::Index latent = n.t_fc_1.weight.rows();
  // Policy MLP.
  nn::matrix d2, d1, d0, dx;
  n.p_fc_3.backward(tp.p2, dlogits, grad.p_fc_3, &d2);
  detail::relu_layer_backward(n.p_fc_2, tp.p1, tp.p2, std::move(d2), grad.p_fc_2, &d1);
  detail::relu_layer_backward(n.p_fc_1, tp.p0, tp.p1, std::move(d1), grad.p_fc_1, &d0);
  detail::relu_layer_backward(n.p_fc_0, tp.x, tp.p0, std::move(d0), grad.p_fc_0, &dx);
  // x = [hrep, u, hrep * u].
  const nn::matrix dprod = dx.rightCols(width);
  const nn::matrix dhrep = dx.leftCols(width) + (dprod.array() * tp.u.array()).matrix();
  const nn::matrix du = dx.middleCols(width, width) + (dprod.array() * tp.hrep.array()).matrix();
  // Actions: u = [m, q].
  detail::relu_layer_backward(n.a_fc_0, ep.actions_other, tp.q, du.rightCols(width - latent),
                              grad.a_fc_0, nullptr);
  if (tp.he.rows() > 0) {
    nn::matrix dhe(tp.he.rows(), latent);
    Eigen::Index row = 0;
    for (Eigen::Index a = 0; a < actions; ++a)
      for (std::int64_t k = 0; k < ep.held_count[static_cast<std::size_t>(a)]; ++k, ++row)
        dhe.row(row) = du.block(a, 0, 1, latent);
    nn::matrix dht0;
    detail::relu_layer_backward(n.t_fc_1, tp.ht0, tp.he, std::move(dhe), grad.t_fc_1, &dht0);
    detail::relu_layer_backward(n.t_fc_0, ep.held_tables, tp.ht0, std::move(dht0), grad.t_fc_0,
                                nullptr);
  }
  // dL/dh: every action of a step, and the value head.
  nn::matrix dh = nn::matrix::Zero(steps, width);
  Eigen::Index a = 0;
  for (Eigen::Index t = 0; t < steps; ++t)
    for (std::int64_t k = 0; k < ep.action_count[static_cast<std::size_t>(t)]; ++k, ++a)
      dh.row(t) += dhrep.row(a);
  nn::matrix db0, dh_value;
  n.b_fc_1.backward(tp.b0, dvalues, grad.b_fc_1, &db0);
  detail::relu_layer_backward(n.b_fc_0, tp.core.output(), tp.b0, std::move(db0), grad.b_fc_0,
                              &dh_value);
  dh += dh_value;
  // LSTM, then the state: z = [e, o].
  nn::matrix dz;
  n.core.backward(tp.z, tp.core, dh, nullptr, grad.core, &dz, nullptr);
  nn::matrix de = dz.leftCols(latent);
  nn::matrix dt0;
  detail::relu_layer_backward(n.t_fc_1, tp.t0, tp.e, std::move(de), grad.t_fc_1, &dt0);
  detail::relu_layer_backward(n.t_fc_0, ep.tables, tp.t0, std::move(dt0), grad.t_fc_0, nullptr);
  detail::relu_layer_backward(n.s_fc_0, ep.state_other, tp.o, dz.rightCols(dz.cols() - latent),
                              grad.s_fc_0, nullptr);
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
