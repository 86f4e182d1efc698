#pragma once
// ReLU (F.relu) and its gradient, in place on a batch of rows.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

template <class = void>
void relu_inplace(matrix& y) {
  y = y.cwiseMax(0.0f);
}

// Given y = relu(x) and dy, turns dy into dx: the gradient flows where x > 0
// (PyTorch's threshold_backward on the result; 0 at x == 0).
template <class = void>
void relu_backward(const Eigen::Ref<const matrix>& y, matrix& dy) {
  dy = (y.array() > 0.0f).select(dy, 0.0f);
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
