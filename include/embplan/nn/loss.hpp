#pragma once
// The two losses the papers train with, each returning the loss and writing
// its gradient:
// - mean squared error, mean over all elements (nn.MSELoss's default
//   reduction): the cost models' regression (NeuroShard App. E.2, DreamShard
//   §3.2, AutoShard §4.2);
// - the policy-gradient loss  -mean(log pi(a|s) * advantage) - c * mean(entropy)
//   over a batch of decisions (REINFORCE with a baseline / actor-critic, as in
//   DreamShard §3.3 and AutoShard §4.3), gradient taken w.r.t. the logits.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "embplan/core/error.hpp"
#include "embplan/nn/softmax.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

// mean((prediction - target)^2); *dprediction = 2 (prediction - target) / n.
// A non-finite target is refused (field 'mse_loss.target[r, c]').
template <class = void>
double mse_loss(const Eigen::Ref<const matrix>& prediction, const Eigen::Ref<const matrix>& target,
                matrix* dprediction) {
  detail::require_shape(target, prediction.rows(), prediction.cols(), "mse_loss.target",
                        "the prediction's shape");
  if (prediction.size() == 0)
    embplan::detail::fail("mse_loss.prediction.size", 0, "at least one element");
  detail::require_finite(target, "mse_loss.target");
  const double n = static_cast<double>(prediction.size());
  const double loss = (prediction - target).cast<double>().squaredNorm() / n;
  if (dprediction != nullptr) {
    dprediction->resize(prediction.rows(), prediction.cols());
    dprediction->array() = (prediction - target).array() * static_cast<float>(2.0 / n);
  }
  return loss;
}

struct policy_gradient_loss_value {
  double loss = 0.0;     // policy term - entropy_coef * entropy
  double policy = 0.0;   // -mean(log pi(a|s) * advantage)
  double entropy = 0.0;  // mean entropy of the (masked) distributions
};

// logits [N, A]; legal (or null: every action legal); actions[n], the action
// taken in row n, must be legal; advantages[n] finite. *dlogits receives
// dloss/dlogits (0 on illegal actions):
//   -(adv_n / N) (1[k = a_n] - p_k) + (c / N) p_k (log p_k + H_n).
template <class = void>
policy_gradient_loss_value policy_gradient_loss(const Eigen::Ref<const matrix>& logits,
                                                const mask* legal,
                                                std::span<const std::int64_t> actions,
                                                std::span<const float> advantages,
                                                float entropy_coef, matrix* dlogits) {
  const Eigen::Index n = logits.rows();
  const Eigen::Index a_count = logits.cols();
  if (n == 0) embplan::detail::fail("policy_gradient_loss.logits.rows", 0, "at least one row");
  if (static_cast<Eigen::Index>(actions.size()) != n) {
    embplan::detail::fail("policy_gradient_loss.actions.size", actions.size(),
                          "one action per logits row (" + std::to_string(n) + ")");
  }
  if (static_cast<Eigen::Index>(advantages.size()) != n) {
    embplan::detail::fail("policy_gradient_loss.advantages.size", advantages.size(),
                          "one advantage per logits row (" + std::to_string(n) + ")");
  }
  if (!std::isfinite(entropy_coef)) {
    embplan::detail::fail("policy_gradient_loss.entropy_coef", entropy_coef, "a finite number");
  }
  matrix log_probs;
  log_softmax(logits, legal, log_probs);
  const float lowest = -std::numeric_limits<float>::infinity();
  policy_gradient_loss_value out;
  if (dlogits != nullptr) dlogits->resize(n, a_count);
  const float inv_n = 1.0f / static_cast<float>(n);
  for (Eigen::Index r = 0; r < n; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    const std::int64_t a = actions[ri];
    if (a < 0 || a >= a_count || log_probs(r, a) == lowest) {
      embplan::detail::fail(embplan::detail::path("policy_gradient_loss.actions", ri), a,
                            "a legal action of its row");
    }
    if (!std::isfinite(advantages[ri])) {
      embplan::detail::fail(embplan::detail::path("policy_gradient_loss.advantages", ri),
                            advantages[ri], "a finite number");
    }
    const auto lp = log_probs.row(r).array();
    const auto ok = lp > lowest;
    const auto p = lp.exp();  // exp(-inf) = 0 on illegal actions
    const float entropy = -ok.select(p * lp, 0.0f).sum();
    out.policy -= static_cast<double>(log_probs(r, a)) * static_cast<double>(advantages[ri]);
    out.entropy += static_cast<double>(entropy);
    if (dlogits != nullptr) {
      auto d = dlogits->row(r).array();
      d = ok.select(p * (advantages[ri] * inv_n) +
                        p * (entropy_coef * inv_n) * (ok.select(lp, 0.0f) + entropy),
                    0.0f);
      d(a) -= advantages[ri] * inv_n;
    }
  }
  out.policy /= static_cast<double>(n);
  out.entropy /= static_cast<double>(n);
  out.loss = out.policy - static_cast<double>(entropy_coef) * out.entropy;
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
