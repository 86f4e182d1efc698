#pragma once
// nn.Linear: y = x W^T + b, weight [out, in], bias [out] (held as [1, out],
// tensor.hpp). Backward accumulates into a gradient of the same type, as
// PyTorch accumulates into .grad, so a layer shared by several calls (a
// per-table MLP) sums its gradients.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <string>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/init.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

// Bounds on the nets' sizes, far above every model here (widths of at most a
// few hundred): a size read from a file beyond them is refused before any
// allocation (docs/design.md, "Principles": absurd declared sizes).
inline constexpr Eigen::Index max_width = Eigen::Index{1} << 20;     // per dimension
inline constexpr Eigen::Index max_elements = Eigen::Index{1} << 28;  // per weight matrix

namespace detail {

inline void require_width(Eigen::Index width, std::string_view field) {
  if (width > max_width) {
    embplan::detail::fail(field, width, "at most " + std::to_string(max_width) + " (2^20)");
  }
}

// in x out within max_elements; both already within max_width, so no overflow.
inline void require_elements(Eigen::Index in, Eigen::Index out, std::string_view field) {
  if (in * out > max_elements) {
    embplan::detail::fail(field, std::to_string(out) + " x " + std::to_string(in),
                          "at most " + std::to_string(max_elements) + " (2^28) weights");
  }
}

}  // namespace detail

struct linear {
  matrix weight;  // [out, in]
  matrix bias;    // [1, out]

  linear() = default;

  // All zeros (a gradient holder, or weights about to be loaded).
  linear(Eigen::Index in_features, Eigen::Index out_features) {
    detail::require_positive(in_features, "linear.in_features");
    detail::require_positive(out_features, "linear.out_features");
    detail::require_width(in_features, "linear.in_features");
    detail::require_width(out_features, "linear.out_features");
    detail::require_elements(in_features, out_features, "linear.weight");
    weight = matrix::Zero(out_features, in_features);
    bias = matrix::Zero(1, out_features);
  }

  // PyTorch's default init: weight, then bias, from U(-1/sqrt(in), 1/sqrt(in)).
  linear(Eigen::Index in_features, Eigen::Index out_features, rng& gen)
      : linear(in_features, out_features) {
    const double bound = default_init_bound(in_features);
    init_uniform(weight, bound, gen);
    init_uniform(bias, bound, gen);
  }

  Eigen::Index in_features() const noexcept { return weight.cols(); }
  Eigen::Index out_features() const noexcept { return weight.rows(); }

  // y = x W^T + b; y is resized (no allocation when its size is unchanged).
  template <class = void>
  void forward(const Eigen::Ref<const matrix>& x, matrix& y) const {
    detail::require_cols(x, in_features(), "linear.input", "in_features of the layer");
    y.resize(x.rows(), out_features());
    y.noalias() = x * weight.transpose();
    y.rowwise() += bias.row(0);
  }

  template <class = void>
  matrix operator()(const Eigen::Ref<const matrix>& x) const {
    matrix y;
    forward(x, y);
    return y;
  }

  // Given the forward input x and dy = dL/dy: grad.weight += dy^T x,
  // grad.bias += column sums of dy, and *dx = dy W when dx is given.
  template <class = void>
  void backward(const Eigen::Ref<const matrix>& x, const Eigen::Ref<const matrix>& dy, linear& grad,
                matrix* dx) const {
    detail::require_cols(x, in_features(), "linear.input", "in_features of the layer");
    detail::require_shape(dy, x.rows(), out_features(), "linear.output_grad",
                          "[batch, out_features]");
    detail::require_shape(grad.weight, out_features(), in_features(), "linear.grad.weight",
                          "the layer's weight shape");
    detail::require_shape(grad.bias, 1, out_features(), "linear.grad.bias",
                          "the layer's bias shape");
    grad.weight.noalias() += dy.transpose() * x;
    grad.bias.row(0) += dy.colwise().sum();
    if (dx != nullptr) {
      dx->resize(x.rows(), in_features());
      dx->noalias() = dy * weight;
    }
  }

  parameter_list named_parameters(std::string_view prefix = {}) {
    return {{embplan::detail::path(prefix, "weight"), &weight},
            {embplan::detail::path(prefix, "bias"), &bias}};
  }
  const_parameter_list named_parameters(std::string_view prefix = {}) const {
    return {{embplan::detail::path(prefix, "weight"), &weight},
            {embplan::detail::path(prefix, "bias"), &bias}};
  }
};
static_assert(model<linear>);

}  // namespace embplan::inline EMBPLAN_ABI::nn
