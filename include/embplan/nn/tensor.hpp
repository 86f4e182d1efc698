#pragma once
// The tensors of embplan's tiny networks (docs/learned-models.md, "The tiny
// networks"): float32 Eigen matrices, row-major so a [rows, cols] matrix has
// PyTorch's memory layout.
//
// Conventions, used by every layer in nn/:
// - A batch is rows: an input x is [batch, features].
// - A weight keeps PyTorch's layout, [out, in]; linear computes y = x W^T + b.
// - A 1-D state_dict tensor of length n (a bias [out], a feature mean [F]) is
//   held as a [1, n] matrix: the same n contiguous floats, so a loader copies
//   a 1-D tensor of n elements into a [1, n] matrix without reshaping.
// - Every model names its tensors by PyTorch state_dict name, in state_dict
//   order (module.hpp).
// - Sizes and positions are Eigen::Index (no alias named `index`: it would
//   clash with POSIX ::index under `using namespace`).
// - Functions whose bodies compute with Eigen (forward, backward, losses,
//   training steps) are templates on an unused parameter, `template <class =
//   void>`, called as usual: GCC instantiates every Eigen expression in a
//   non-template inline function whether or not the program calls it, which
//   made a TU including embplan.hpp spend seconds on training code it never
//   ran; a template is instantiated only where it is called.

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using vector = Eigen::VectorXf;

// Legal actions, [rows, actions], row-major like the logits they mask.
using mask = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A model's tensors by state_dict name, in state_dict order.
using parameter_list = std::vector<std::pair<std::string, matrix*>>;
using const_parameter_list = std::vector<std::pair<std::string, const matrix*>>;

namespace detail {

// "[10, 20]"
inline std::string shape_string(Eigen::Index rows, Eigen::Index cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

template <class Derived>
std::string shape_string(const Eigen::DenseBase<Derived>& m) {
  return shape_string(m.rows(), m.cols());
}

// field 'mlp.input' = "[10, 19]": expected [*, 20] (in_features of the first layer)
template <class Derived>
void require_cols(const Eigen::DenseBase<Derived>& m, Eigen::Index cols, std::string_view field,
                  std::string_view why) {
  if (m.cols() == cols) return;
  embplan::detail::fail(field, shape_string(m),
                        "[*, " + std::to_string(cols) + "] (" + std::string(why) + ")");
}

template <class Derived>
void require_shape(const Eigen::DenseBase<Derived>& m, Eigen::Index rows, Eigen::Index cols,
                   std::string_view field, std::string_view why) {
  if (m.rows() == rows && m.cols() == cols) return;
  embplan::detail::fail(field, shape_string(m),
                        shape_string(rows, cols) + " (" + std::string(why) + ")");
}

inline void require_positive(Eigen::Index n, std::string_view field) {
  if (n <= 0) embplan::detail::fail(field, n, "a positive integer");
}

// The first non-finite entry of m, named by its position: field 'targets[3, 0]' = nan.
template <class Derived>
void require_finite(const Eigen::DenseBase<Derived>& m, std::string_view field) {
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) {
      const float v = m(r, c);
      if (!std::isfinite(v)) {
        std::string where(field);
        where += "[" + std::to_string(r) + ", " + std::to_string(c) + "]";
        embplan::detail::fail(where, v, "a finite number");
      }
    }
  }
}

}  // namespace detail
}  // namespace embplan::inline EMBPLAN_ABI::nn
