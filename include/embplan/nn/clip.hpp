#pragma once
// torch.nn.utils.clip_grad_norm_ (norm_type 2): the L2 norm over all gradients
// taken as one vector; when max_norm / (norm + 1e-6) < 1 every gradient is
// scaled by that factor. Returns the norm before clipping. A non-finite norm
// is returned as is and scales every gradient to NaN, as PyTorch's default
// error_if_nonfinite=False does.

#include <cmath>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

template <model M>
double clip_grad_norm(M& grad, double max_norm) {
  if (!(max_norm > 0.0) || !std::isfinite(max_norm)) {
    embplan::detail::fail("clip_grad_norm.max_norm", max_norm, "a positive finite number");
  }
  const double norm = std::sqrt(squared_norm(grad));
  // float32, as PyTorch computes the coefficient on a float tensor.
  const float coef = static_cast<float>(max_norm) / (static_cast<float>(norm) + 1e-6f);
  if (coef < 1.0f || std::isnan(coef)) {
    for (auto& [name, p] : grad.named_parameters(std::string_view{}))
      *p *= coef;
  }
  return norm;
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
