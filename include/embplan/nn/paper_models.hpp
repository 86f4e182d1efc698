#pragma once
// The papers' networks under their PyTorch state_dict names, so checkpoints
// exported from the authors' models (tools/export_state_dict.py) load with
// nn::load_state_dict:
//  - comm_cost_net: NeuroShard's CommCostNet (comm_cost_net.hpp, included here).
//  - dreamshard_model: DreamShard's Model (§3.2, App. B): table MLPs for the
//    cost and RL branches, forward / communication / backward / overall heads,
//    cost-feature MLP, policy and value layers (`table_fc_0`, ...).
//  - autoshard_net: AutoShard's policy-value network (§4.2): table, state and
//    action layers, the two-layer LSTM `core` over a 64-wide state, policy,
//    baseline and cost heads (`t_fc_0`, `core.weight_ih_l0`, `p_fc_0`, ...).
// NeuroShard's ComputeCostNet is nn::compute_cost_net (compute_cost_net.hpp).
// The forward passes of the two RL networks belong with the placement MDP
// (rl/); here they are layouts that load, save and count their parameters.

#include <string>
#include <string_view>
#include <utility>

#include "embplan/nn/comm_cost_net.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/lstm.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

namespace detail {

template <class List, class Layer>
void append(List& out, Layer& layer, std::string_view prefix, std::string_view name) {
  for (auto&& entry : layer.named_parameters(embplan::detail::path(prefix, name))) {
    out.push_back(std::move(entry));
  }
}

}  // namespace detail

// ------------------------------------------------------------ DreamShard
struct dreamshard_model {
  static constexpr Eigen::Index latent = 32;
  linear table_fc_0, table_fc_1;        // cost branch: F -> 128 -> 32
  linear rl_table_fc_0, rl_table_fc_1;  // RL branch: F -> 128 -> 32
  linear forward_fc_0, forward_fc_1;    // heads: 32 -> 64 -> 1
  linear communication_fc_0, communication_fc_1;
  linear backward_fc_0, backward_fc_1;
  linear overall_fc_0, overall_fc_1;
  linear cost_fc_0, cost_fc_1;  // cost features: 3 -> 64 -> 32
  linear policy_net;            // 64 -> 1
  linear value_net;             // 64 x devices -> 1

  dreamshard_model() = default;
  // All zeros, ready to load. DreamShard uses 21 table features and 4 devices.
  explicit dreamshard_model(Eigen::Index table_features, Eigen::Index devices = 4)
      : table_fc_0(table_features, 128)
      , table_fc_1(128, latent)
      , rl_table_fc_0(table_features, 128)
      , rl_table_fc_1(128, latent)
      , forward_fc_0(latent, 64)
      , forward_fc_1(64, 1)
      , communication_fc_0(latent, 64)
      , communication_fc_1(64, 1)
      , backward_fc_0(latent, 64)
      , backward_fc_1(64, 1)
      , overall_fc_0(latent, 64)
      , overall_fc_1(64, 1)
      , cost_fc_0(3, 64)
      , cost_fc_1(64, 32)
      , policy_net(2 * latent, 1)
      , value_net(2 * latent * devices, 1) {}

  parameter_list named_parameters(std::string_view prefix = {}) {
    return collect<parameter_list>(*this, prefix);
  }
  const_parameter_list named_parameters(std::string_view prefix = {}) const {
    return collect<const_parameter_list>(*this, prefix);
  }

 private:
  // State_dict order = declaration order of the PyTorch module.
  template <class List, class Self>
  static List collect(Self& m, std::string_view prefix) {
    List out;
    detail::append(out, m.table_fc_0, prefix, "table_fc_0");
    detail::append(out, m.table_fc_1, prefix, "table_fc_1");
    detail::append(out, m.rl_table_fc_0, prefix, "rl_table_fc_0");
    detail::append(out, m.rl_table_fc_1, prefix, "rl_table_fc_1");
    detail::append(out, m.forward_fc_0, prefix, "forward_fc_0");
    detail::append(out, m.forward_fc_1, prefix, "forward_fc_1");
    detail::append(out, m.communication_fc_0, prefix, "communication_fc_0");
    detail::append(out, m.communication_fc_1, prefix, "communication_fc_1");
    detail::append(out, m.backward_fc_0, prefix, "backward_fc_0");
    detail::append(out, m.backward_fc_1, prefix, "backward_fc_1");
    detail::append(out, m.overall_fc_0, prefix, "overall_fc_0");
    detail::append(out, m.overall_fc_1, prefix, "overall_fc_1");
    detail::append(out, m.cost_fc_0, prefix, "cost_fc_0");
    detail::append(out, m.cost_fc_1, prefix, "cost_fc_1");
    detail::append(out, m.policy_net, prefix, "policy_net");
    detail::append(out, m.value_net, prefix, "value_net");
    return out;
  }
};
static_assert(model<dreamshard_model>);

// ------------------------------------------------------------ AutoShard
struct autoshard_net {
  linear t_fc_0, t_fc_1;                  // table features: F -> 128 -> 32
  linear s_fc_0;                          // other state features -> 32
  linear a_fc_0;                          // other action features -> 32
  lstm core;                              // 64 -> 64, two layers
  linear p_fc_0, p_fc_1, p_fc_2, p_fc_3;  // policy head: 192 -> 128 -> 128 -> 64 -> 1
  linear b_fc_0, b_fc_1;                  // baseline head: 64 -> 64 -> 1
  linear c_fc_0, c_fc_1;                  // cost head: 32 -> 64 -> 1

  autoshard_net() = default;
  // All zeros, ready to load.
  autoshard_net(Eigen::Index table_features, Eigen::Index state_other, Eigen::Index actions_other)
      : t_fc_0(table_features, 128)
      , t_fc_1(128, 32)
      , s_fc_0(state_other, 32)
      , a_fc_0(actions_other, 32)
      , core(64, 64, 2)
      , p_fc_0(192, 128)
      , p_fc_1(128, 128)
      , p_fc_2(128, 64)
      , p_fc_3(64, 1)
      , b_fc_0(64, 64)
      , b_fc_1(64, 1)
      , c_fc_0(32, 64)
      , c_fc_1(64, 1) {}

  parameter_list named_parameters(std::string_view prefix = {}) {
    return collect<parameter_list>(*this, prefix);
  }
  const_parameter_list named_parameters(std::string_view prefix = {}) const {
    return collect<const_parameter_list>(*this, prefix);
  }

 private:
  template <class List, class Self>
  static List collect(Self& m, std::string_view prefix) {
    List out;
    detail::append(out, m.t_fc_0, prefix, "t_fc_0");
    detail::append(out, m.t_fc_1, prefix, "t_fc_1");
    detail::append(out, m.s_fc_0, prefix, "s_fc_0");
    detail::append(out, m.a_fc_0, prefix, "a_fc_0");
    detail::append(out, m.core, prefix, "core");
    detail::append(out, m.p_fc_0, prefix, "p_fc_0");
    detail::append(out, m.p_fc_1, prefix, "p_fc_1");
    detail::append(out, m.p_fc_2, prefix, "p_fc_2");
    detail::append(out, m.p_fc_3, prefix, "p_fc_3");
    detail::append(out, m.b_fc_0, prefix, "b_fc_0");
    detail::append(out, m.b_fc_1, prefix, "b_fc_1");
    detail::append(out, m.c_fc_0, prefix, "c_fc_0");
    detail::append(out, m.c_fc_1, prefix, "c_fc_1");
    return out;
  }
};
static_assert(model<autoshard_net>);

}  // namespace embplan::inline EMBPLAN_ABI::nn
