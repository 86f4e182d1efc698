#pragma once
// A multi-layer perceptron of any depth: Linear layers with ReLU between them
// and, optionally, after the last one — the shape of every MLP in the papers:
// NeuroShard's table MLP (F-128-32, ReLU after each layer: ComputeCostNet's
// t_hidden) and cost head (32-64-1, linear output: c_hidden), DreamShard's
// table_fc_* / forward_fc_* and AutoShard's heads (App. "Architecture").
//
// State names follow how the PyTorch model holds its layers (mlp_naming):
//   sequential   nn.Sequential(Linear, ReLU, Linear, ...): "0.weight", "2.weight" (stride 2)
//   module_list  nn.ModuleList([Linear, ...]): "t_hidden.0.weight", "t_hidden.1.weight"
//   numbered     attributes name_0, name_1: "table_fc_0.weight", "table_fc_1.weight"
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/activation.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

enum class mlp_naming : std::uint8_t { sequential, module_list, numbered };

struct mlp_options {
  std::vector<Eigen::Index> sizes;  // [in, hidden..., out]: at least two entries
  bool relu_after_last = false;
  mlp_naming naming = mlp_naming::sequential;
};

// Forward record of one mlp call: the output of every layer (after its ReLU).
// Reused across calls it allocates nothing once the shapes have been seen.
struct mlp_tape {
  std::vector<matrix> outputs;
  matrix grad_a, grad_b;  // backward scratch

  const matrix& output() const { return outputs.back(); }
};

struct mlp {
  std::vector<linear> layers;
  bool relu_after_last = false;
  mlp_naming naming = mlp_naming::sequential;

  mlp() = default;

  // All zeros.
  explicit mlp(const mlp_options& o) : relu_after_last(o.relu_after_last), naming(o.naming) {
    validate(o);
    for (std::size_t k = 0; k + 1 < o.sizes.size(); ++k)
      layers.emplace_back(o.sizes[k], o.sizes[k + 1]);
  }

  // PyTorch's default init, layer by layer in construction order.
  mlp(const mlp_options& o, rng& gen) : relu_after_last(o.relu_after_last), naming(o.naming) {
    validate(o);
    for (std::size_t k = 0; k + 1 < o.sizes.size(); ++k)
      layers.emplace_back(o.sizes[k], o.sizes[k + 1], gen);
  }

  Eigen::Index in_features() const noexcept {
    return layers.empty() ? 0 : layers.front().in_features();
  }
  Eigen::Index out_features() const noexcept {
    return layers.empty() ? 0 : layers.back().out_features();
  }

  // Runs x [batch, in] through the layers; the result is tape.output().
  template <class = void>
  void forward(const Eigen::Ref<const matrix>& x, mlp_tape& tape) const {
    if (layers.empty()) embplan::detail::fail("mlp.layers", 0, "at least one layer");
    detail::require_cols(x, in_features(), "mlp.input", "in_features of the first layer");
    tape.outputs.resize(layers.size());
    for (std::size_t k = 0; k < layers.size(); ++k) {
      if (k == 0) {
        layers[k].forward(x, tape.outputs[k]);
      } else {
        layers[k].forward(tape.outputs[k - 1], tape.outputs[k]);
      }
      if (activated(k)) relu_inplace(tape.outputs[k]);
    }
  }

  template <class = void>
  matrix operator()(const Eigen::Ref<const matrix>& x) const {
    mlp_tape tape;
    forward(x, tape);
    return tape.output();
  }

  // Given the input x of the forward call that filled tape and dy = dL/dy,
  // accumulates the parameter gradients into grad and writes dL/dx into *dx
  // when dx is given.
  template <class = void>
  void backward(const Eigen::Ref<const matrix>& x, mlp_tape& tape,
                const Eigen::Ref<const matrix>& dy, mlp& grad, matrix* dx) const {
    if (tape.outputs.size() != layers.size() || grad.layers.size() != layers.size()) {
      embplan::detail::fail("mlp.backward.tape", tape.outputs.size(),
                            "a tape filled by forward on this mlp, with a gradient of its shape");
    }
    detail::require_shape(dy, x.rows(), out_features(), "mlp.output_grad", "[batch, out_features]");
    matrix* cur = &tape.grad_a;
    matrix* next = &tape.grad_b;
    *cur = dy;
    for (std::size_t k = layers.size(); k-- > 0;) {
      if (activated(k)) relu_backward(tape.outputs[k], *cur);
      if (k == 0) {
        layers[k].backward(x, *cur, grad.layers[k], dx);
      } else {
        layers[k].backward(tape.outputs[k - 1], *cur, grad.layers[k], next);
        std::swap(cur, next);
      }
    }
  }

  parameter_list named_parameters(std::string_view prefix = {}) {
    return collect<parameter_list>(*this, prefix);
  }
  const_parameter_list named_parameters(std::string_view prefix = {}) const {
    return collect<const_parameter_list>(*this, prefix);
  }

  // The state_dict prefix of layer k ("t_hidden.1", "2", "table_fc_0").
  std::string layer_name(std::string_view prefix, std::size_t k) const {
    return layer_name(naming, prefix, k);
  }
  static std::string layer_name(mlp_naming naming, std::string_view prefix, std::size_t k) {
    switch (naming) {
      case mlp_naming::sequential:
        return embplan::detail::path(prefix, std::to_string(2 * k));
      case mlp_naming::module_list:
        return embplan::detail::path(prefix, std::to_string(k));
      case mlp_naming::numbered:
        return prefix.empty() ? std::to_string(k) : std::string(prefix) + "_" + std::to_string(k);
    }
    return std::to_string(k);
  }

  // The state_dict name and PyTorch shape [out, in] of every layer's weight of
  // an mlp with options o, without building it: a loader compares them with a
  // file's tensors before it allocates what the file's metadata declares.
  static std::vector<std::pair<std::string, std::vector<std::int64_t>>> weight_shapes(
      const mlp_options& o, std::string_view prefix = {}) {
    validate(o);
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
    for (std::size_t k = 0; k + 1 < o.sizes.size(); ++k) {
      out.emplace_back(embplan::detail::path(layer_name(o.naming, prefix, k), "weight"),
                       std::vector<std::int64_t>{o.sizes[k + 1], o.sizes[k]});
    }
    return out;
  }

 private:
  // The layers' tensors under layer_name(prefix, k), for the const and non-const lists.
  template <class List, class Self>
  static List collect(Self& self, std::string_view prefix) {
    List out;
    for (std::size_t k = 0; k < self.layers.size(); ++k) {
      for (auto& entry : self.layers[k].named_parameters(self.layer_name(prefix, k)))
        out.push_back(std::move(entry));
    }
    return out;
  }

  bool activated(std::size_t k) const noexcept { return k + 1 < layers.size() || relu_after_last; }

  static void validate(const mlp_options& o) {
    if (o.sizes.size() < 2) {
      embplan::detail::fail("mlp_options.sizes", o.sizes.size(),
                            "at least two sizes (in_features, out_features)");
    }
    for (std::size_t k = 0; k < o.sizes.size(); ++k) {
      const auto field = embplan::detail::path("mlp_options.sizes", k);
      detail::require_positive(o.sizes[k], field);
      detail::require_width(o.sizes[k], field);
      if (k > 0) detail::require_elements(o.sizes[k - 1], o.sizes[k], field);
    }
  }
};
static_assert(model<mlp>);

}  // namespace embplan::inline EMBPLAN_ABI::nn
