#pragma once
// torch.optim.Adam with PyTorch's defaults and semantics (the optimizer of
// NeuroShard App. E.2: lr 0.001, "the other configurations as the default"):
//   g <- g + weight_decay * p                       (L2 added to the gradient, not AdamW)
//   m <- beta1 m + (1 - beta1) g
//   v <- beta2 v + (1 - beta2) g^2
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// computed in float32 with the scalars rounded to float where PyTorch rounds
// them (torch 1.13's _single_tensor_adam, the CPU path; torch >= 2.0 writes the
// m update as lerp, which can differ in the last bit).
// The optimizer state (m, v per parameter, the step count) lives here, keyed
// by the order of the model's named_parameters.

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class adam {
 public:
  adam() : adam(adam_options{}) {}

  explicit adam(const adam_options& o) : options_(o) {
    auto require = [](double v, bool ok, const char* field, const char* expected) {
      if (!ok || !std::isfinite(v)) embplan::detail::fail(field, v, expected);
    };
    require(o.lr, o.lr >= 0.0, "adam_options.lr", "a non-negative number");
    require(o.beta1, o.beta1 >= 0.0 && o.beta1 < 1.0, "adam_options.beta1", "a number in [0, 1)");
    require(o.beta2, o.beta2 >= 0.0 && o.beta2 < 1.0, "adam_options.beta2", "a number in [0, 1)");
    require(o.eps, o.eps >= 0.0, "adam_options.eps", "a non-negative number");
    require(o.weight_decay, o.weight_decay >= 0.0, "adam_options.weight_decay",
            "a non-negative number");
  }

  const adam_options& options() const noexcept { return options_; }
  std::int64_t steps() const noexcept { return step_; }

  // One update of every parameter of m from the gradient grad (same type and
  // shapes). The first call sizes the state to m; later calls must pass a model
  // of the same structure.
  template <model M>
  void step(M& m, const M& grad) {
    auto params = m.named_parameters(std::string_view{});
    const auto grads = grad.named_parameters(std::string_view{});
    if (grads.size() != params.size()) {
      embplan::detail::fail("adam.grad", grads.size(),
                            std::to_string(params.size()) + " gradient tensors, one per parameter");
    }
    if (step_ == 0) {
      exp_avg_.clear();
      exp_avg_sq_.clear();
      for (const auto& [name, p] : params) {
        exp_avg_.push_back(matrix::Zero(p->rows(), p->cols()));
        exp_avg_sq_.push_back(matrix::Zero(p->rows(), p->cols()));
      }
    } else if (exp_avg_.size() != params.size()) {
      embplan::detail::fail("adam.model", params.size(),
                            std::to_string(exp_avg_.size()) + " parameters, as in earlier steps");
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& [name, p] = params[i];
      detail::require_shape(*grads[i].second, p->rows(), p->cols(), "adam.grad." + name,
                            "the parameter's shape");
      detail::require_shape(exp_avg_[i], p->rows(), p->cols(), "adam.state." + name,
                            "the parameter's shape, as in earlier steps");
    }
    ++step_;
    const auto t = static_cast<double>(step_);
    // Python floats, rounded to float32 where PyTorch hands them to a kernel.
    const double bias_correction1 = 1.0 - std::pow(options_.beta1, t);
    const double bias_correction2 = 1.0 - std::pow(options_.beta2, t);
    const auto neg_step_size = static_cast<float>(-(options_.lr / bias_correction1));
    const auto bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    const auto beta1 = static_cast<float>(options_.beta1);
    const auto one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
    const auto beta2 = static_cast<float>(options_.beta2);
    const auto one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
    const auto eps = static_cast<float>(options_.eps);
    const auto weight_decay = static_cast<float>(options_.weight_decay);
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto p = params[i].second->array();
      auto m1 = exp_avg_[i].array();
      auto m2 = exp_avg_sq_[i].array();
      const auto& g0 = grads[i].second->array();
      if (weight_decay != 0.0f) {
        const matrix g = (g0 + weight_decay * p).matrix();
        update(p, m1, m2, g.array(), beta1, one_minus_beta1, beta2, one_minus_beta2,
               bias_correction2_sqrt, eps, neg_step_size);
      } else {
        update(p, m1, m2, g0, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt,
               eps, neg_step_size);
      }
    }
  }

 private:
  template <class P, class M1, class M2, class G>
  static void update(P& p, M1& m1, M2& m2, const G& g, float beta1, float one_minus_beta1,
                     float beta2, float one_minus_beta2, float bias_correction2_sqrt, float eps,
                     float neg_step_size) {
    m1 = m1 * beta1 + one_minus_beta1 * g;  // exp_avg.mul_(beta1).add_(grad, alpha=1-beta1)
    m2 = m2 * beta2 +
         one_minus_beta2 * g * g;  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1-beta2)
    p = p + neg_step_size * m1 / (m2.sqrt() / bias_correction2_sqrt + eps);  // addcdiv_
  }

  adam_options options_;
  std::int64_t step_ = 0;
  std::vector<matrix> exp_avg_;
  std::vector<matrix> exp_avg_sq_;
};

}  // namespace embplan::inline EMBPLAN_ABI::nn
