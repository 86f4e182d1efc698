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
// The optimizer state (m, v and a step count per parameter) lives here, keyed
// by the order of the model's named_parameters.
//
// Beyond a fixed-lr Adam, as torch.optim.Adam is used with a scheduler and
// checkpoints:
//  - set_lr(): a scheduler's param_groups[0]["lr"] = ...; the next step uses
//    it exactly (step_size = lr / bias_correction1 in double, as PyTorch);
//  - step(m, grad, has_grad): a parameter whose gradient is None in PyTorch
//    (no backward has reached it yet) is skipped: its moments stay as they
//    are and its own step count does not advance, so its bias correction
//    later starts from 1, as PyTorch's lazily created per-parameter state;
//  - state() / load_state(): the moments and step counts (PyTorch's
//    optimizer.state_dict()["state"]), so a run resumed from a file takes
//    the same steps, bit for bit.

#include <Eigen/Core>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
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

// What torch.optim.Adam.state_dict()["state"] holds, in named_parameters
// order: per parameter its step count (0: never stepped, PyTorch has no state
// for it) and moments; `steps` counts step() calls. Empty vectors: a fresh
// optimizer (sized by its first step).
struct adam_state {
  std::int64_t steps = 0;
  std::vector<std::int64_t> parameter_steps{};
  std::vector<matrix> exp_avg{};
  std::vector<matrix> exp_avg_sq{};
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
  // step() calls so far (skipped parameters included).
  std::int64_t steps() const noexcept { return step_; }
  // Each parameter's own step count, in named_parameters order (empty before
  // the first step).
  const std::vector<std::int64_t>& parameter_steps() const noexcept { return parameter_steps_; }

  double lr() const noexcept { return options_.lr; }
  // The learning rate of the next steps (a scheduler writing group["lr"]).
  void set_lr(double lr) {
    if (!(lr >= 0.0) || !std::isfinite(lr))
      embplan::detail::fail("adam.lr", lr, "a non-negative number");
    options_.lr = lr;
  }

  adam_state state() const {
    return adam_state{.steps = step_,
                      .parameter_steps = parameter_steps_,
                      .exp_avg = exp_avg_,
                      .exp_avg_sq = exp_avg_sq_};
  }

  // Restores a state() (of this optimizer's model structure: the next step
  // checks the shapes against the model and names the tensor that differs).
  void load_state(adam_state s) {
    const auto n = s.parameter_steps.size();
    if (s.exp_avg.size() != n) {
      embplan::detail::fail("adam_state.exp_avg.size", s.exp_avg.size(),
                            std::to_string(n) + ", one per parameter_steps entry");
    }
    if (s.exp_avg_sq.size() != n) {
      embplan::detail::fail("adam_state.exp_avg_sq.size", s.exp_avg_sq.size(),
                            std::to_string(n) + ", one per parameter_steps entry");
    }
    if (s.steps < 0) embplan::detail::fail("adam_state.steps", s.steps, "a non-negative count");
    for (std::size_t i = 0; i < n; ++i) {
      const std::string at = "[" + std::to_string(i) + "]";
      if (s.parameter_steps[i] < 0 || s.parameter_steps[i] > s.steps) {
        embplan::detail::fail("adam_state.parameter_steps" + at, s.parameter_steps[i],
                              "a count in [0, steps = " + std::to_string(s.steps) + "]");
      }
      detail::require_shape(s.exp_avg_sq[i], s.exp_avg[i].rows(), s.exp_avg[i].cols(),
                            "adam_state.exp_avg_sq" + at, "the shape of exp_avg" + at);
      for (const matrix* m : {&s.exp_avg[i], &s.exp_avg_sq[i]}) {
        for (Eigen::Index k = 0; k < m->size(); ++k) {
          const float v = m->data()[k];
          if (!std::isfinite(v) || (m == &s.exp_avg_sq[i] && v < 0.0f)) {
            embplan::detail::fail(
                std::string(m == &s.exp_avg[i] ? "adam_state.exp_avg" : "adam_state.exp_avg_sq") +
                    at,
                v, m == &s.exp_avg[i] ? "finite numbers" : "finite numbers >= 0");
          }
        }
      }
    }
    step_ = s.steps;
    parameter_steps_ = std::move(s.parameter_steps);
    exp_avg_ = std::move(s.exp_avg);
    exp_avg_sq_ = std::move(s.exp_avg_sq);
  }

  // One update of every parameter of m from the gradient grad (same type and
  // shapes). The first call sizes the state to m; later calls must pass a model
  // of the same structure.
  template <model M>
  void step(M& m, const M& grad) {
    step(m, grad, [](std::string_view) { return true; });
  }

  // The same, but a parameter for which has_grad(name) is false is left alone
  // (PyTorch: p.grad is None): no update, its moments and step count kept.
  template <model M, std::predicate<std::string_view> HasGrad>
  void step(M& m, const M& grad, const HasGrad& has_grad) {
    auto params = m.named_parameters(std::string_view{});
    const auto grads = grad.named_parameters(std::string_view{});
    if (grads.size() != params.size()) {
      embplan::detail::fail("adam.grad", grads.size(),
                            std::to_string(params.size()) + " gradient tensors, one per parameter");
    }
    if (exp_avg_.empty() && !params.empty()) {
      parameter_steps_.assign(params.size(), 0);
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
    // Python floats, rounded to float32 where PyTorch hands them to a kernel.
    const auto beta1 = static_cast<float>(options_.beta1);
    const auto one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
    const auto beta2 = static_cast<float>(options_.beta2);
    const auto one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
    const auto eps = static_cast<float>(options_.eps);
    const auto weight_decay = static_cast<float>(options_.weight_decay);
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!has_grad(std::string_view(params[i].first))) continue;
      const auto t = static_cast<double>(++parameter_steps_[i]);
      const double bias_correction1 = 1.0 - std::pow(options_.beta1, t);
      const double bias_correction2 = 1.0 - std::pow(options_.beta2, t);
      const auto neg_step_size = static_cast<float>(-(options_.lr / bias_correction1));
      const auto bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
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
  std::vector<std::int64_t> parameter_steps_;
  std::vector<matrix> exp_avg_;
  std::vector<matrix> exp_avg_sq_;
};

}  // namespace embplan::inline EMBPLAN_ABI::nn
