#pragma once
// Feature normalisation stored with a model, so a model file is
// self-contained: x' = (x - mean) / std per feature. NeuroShard normalises the
// table features with the training set's mean and std + 1e-6 and saves both in
// its checkpoint as "feature_means" and "feature_stds"
// (neuroshard/compute_cost_model.py); those are the names used here.
// A std of exactly 0 is treated as 1 (a constant feature passes through
// centred instead of dividing by zero).
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cmath>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/nn/linear.hpp"  // max_width
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

struct normalizer {
  matrix mean;    // [1, F]
  matrix stddev;  // [1, F]

  normalizer() = default;

  // The identity on F features: mean 0, std 1.
  explicit normalizer(Eigen::Index features) {
    detail::require_positive(features, "normalizer.features");
    detail::require_width(features, "normalizer.features");
    mean = matrix::Zero(1, features);
    stddev = matrix::Ones(1, features);
  }

  // Statistics of the rows of x as NeuroShard computes them: the mean, and the
  // unbiased standard deviation (torch.std's default) plus epsilon. A single
  // row has std 0 (+ epsilon).
  template <class = void>
  static normalizer fit(const Eigen::Ref<const matrix>& x, float epsilon = 1e-6f) {
    detail::require_positive(x.rows(), "normalizer.fit.rows");
    detail::require_positive(x.cols(), "normalizer.fit.cols");
    detail::require_finite(x, "normalizer.fit.input");
    normalizer n(x.cols());
    const Eigen::MatrixXd xd = x.cast<double>();
    const Eigen::RowVectorXd mu = xd.colwise().mean();
    n.mean = mu.cast<float>();
    if (x.rows() > 1) {
      const Eigen::RowVectorXd var =
          (xd.rowwise() - mu).array().square().colwise().sum() / static_cast<double>(x.rows() - 1);
      n.stddev = (var.array().sqrt() + static_cast<double>(epsilon)).cast<float>().matrix();
    } else {
      n.stddev.setConstant(epsilon);
    }
    return n;
  }

  Eigen::Index features() const noexcept { return mean.cols(); }

  // out = (x - mean) / std, row by row.
  template <class = void>
  void apply(const Eigen::Ref<const matrix>& x, matrix& out) const {
    detail::require_cols(x, features(), "normalizer.input", "the normalizer's feature count");
    out.resize(x.rows(), x.cols());
    out.array() = (x.array().rowwise() - mean.array().row(0)).rowwise() / stddev.array().row(0);
    for (Eigen::Index c = 0; c < stddev.cols(); ++c) {
      if (stddev(0, c) == 0.0f) out.col(c) = x.col(c).array() - mean(0, c);
    }
  }

  template <class = void>
  matrix operator()(const Eigen::Ref<const matrix>& x) const {
    matrix out;
    apply(x, out);
    return out;
  }

  // Not trained: no parameters, two buffers.
  parameter_list named_parameters(std::string_view = {}) { return {}; }
  const_parameter_list named_parameters(std::string_view = {}) const { return {}; }
  parameter_list named_buffers(std::string_view prefix = {}) {
    return {{embplan::detail::path(prefix, "feature_means"), &mean},
            {embplan::detail::path(prefix, "feature_stds"), &stddev}};
  }
  const_parameter_list named_buffers(std::string_view prefix = {}) const {
    return {{embplan::detail::path(prefix, "feature_means"), &mean},
            {embplan::detail::path(prefix, "feature_stds"), &stddev}};
  }
};
static_assert(model_with_buffers<normalizer>);

}  // namespace embplan::inline EMBPLAN_ABI::nn
