#pragma once
// NeuroShard's communication-cost network (MLSys'23 App. C; CommCostNet): an
// MLP 128-64-32-16 with one output per device (`hidden.{k}`), with a feature
// normaliser (feature_means, feature_stds); forward here. Kept apart from the
// other papers' networks (paper_models.hpp) so that cost/neural_comm.hpp does
// not include the LSTM.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <cstdint>
#include <string_view>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/mlp.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/normalizer.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

struct comm_cost_net_options {
  Eigen::Index features = 0;  // forward: 2 x devices (dim sums, start skews); backward: devices
  std::vector<Eigen::Index> hidden{128, 64, 32, 16};
  Eigen::Index outputs = 0;  // devices
};

struct comm_cost_net {
  normalizer feature_norm;  // feature_means, feature_stds
  mlp hidden;               // features -> 128 -> 64 -> 32 -> 16 -> outputs, ReLU between

  comm_cost_net() = default;
  explicit comm_cost_net(const comm_cost_net_options& o)
      : feature_norm(o.features), hidden(options(o)) {}
  comm_cost_net(const comm_cost_net_options& o, std::uint64_t seed) : feature_norm(o.features) {
    rng gen(seed);
    hidden = mlp(options(o), gen);
  }

  // x [batch, features] (raw) -> [batch, outputs] per-device costs.
  template <class = void>
  matrix operator()(const Eigen::Ref<const matrix>& x) const {
    return hidden(feature_norm(x));
  }

  parameter_list named_parameters(std::string_view prefix = {}) {
    return hidden.named_parameters(embplan::detail::path(prefix, "hidden"));
  }
  const_parameter_list named_parameters(std::string_view prefix = {}) const {
    return hidden.named_parameters(embplan::detail::path(prefix, "hidden"));
  }
  parameter_list named_buffers(std::string_view prefix = {}) {
    return feature_norm.named_buffers(prefix);
  }
  const_parameter_list named_buffers(std::string_view prefix = {}) const {
    return feature_norm.named_buffers(prefix);
  }

 private:
  static mlp_options options(const comm_cost_net_options& o) {
    mlp_options m;
    m.sizes.push_back(o.features);
    for (auto h : o.hidden)
      m.sizes.push_back(h);
    m.sizes.push_back(o.outputs);
    m.naming = mlp_naming::module_list;
    return m;
  }
};
static_assert(model_with_buffers<comm_cost_net>);

}  // namespace embplan::inline EMBPLAN_ABI::nn
