#pragma once
// REINFORCE with reward normalisation and an entropy bonus, as DreamShard
// trains its policy (NeurIPS'22 App. B.4.1, Eq. 2; the authors' train_rl):
// every step of an episode gets the episode's final reward; the rewards of a
// batch are normalised over all its steps, r' = (r - mean) / (std + 1e-8)
// with the unbiased std (n - 1, torch.std; with one step, r' = 0) — the mean
// is the baseline; and
//   loss = mean_steps(-log pi(a|s) r') + entropy_weight * mean_steps(sum_a pi log pi).
// The policy is any ragged softmax (ragged_softmax.hpp): a step is a group of
// slots (its candidate actions), so DreamShard and AutoShard share this.
//
// Gradient clipping (reinforce_options::max_grad_norm) is applied to the
// parameter gradients after the policy's backward (clip_policy_gradient, on
// nn::clip_grad_norm). The authors' code does not clip: the default 0 means
// no clipping.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/clip.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/rl/ragged_softmax.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

struct reinforce_options {
  double entropy_weight = 0.001;  // DreamShard's default (App. B.4.1)
  double max_grad_norm = 0.0;     // 0: no clipping (the authors' code); else clip_grad_norm_
};

namespace detail {

inline void require_options(const reinforce_options& o) {
  if (!(o.entropy_weight >= 0.0) || !std::isfinite(o.entropy_weight)) {
    embplan::detail::fail("reinforce_options.entropy_weight", o.entropy_weight,
                          "a finite number >= 0");
  }
  if (!(o.max_grad_norm >= 0.0) || !std::isfinite(o.max_grad_norm)) {
    embplan::detail::fail("reinforce_options.max_grad_norm", o.max_grad_norm,
                          "a finite number >= 0 (0: no clipping)");
  }
}

}  // namespace detail

// (r - mean) / (std + 1e-8) with the unbiased std over all of rewards; every
// entry 0 when there is a single reward (torch's std would be NaN there).
inline void normalise_rewards(std::span<const double> rewards, std::vector<double>& out) {
  for (std::size_t i = 0; i < rewards.size(); ++i) {
    if (!std::isfinite(rewards[i])) {
      embplan::detail::fail(embplan::detail::path("reinforce.rewards", i), rewards[i],
                            "a finite number");
    }
  }
  const auto n = static_cast<double>(rewards.size());
  double mean = 0.0;
  for (const double r : rewards)
    mean += r;
  mean = rewards.empty() ? 0.0 : mean / n;
  double ss = 0.0;
  for (const double r : rewards)
    ss += (r - mean) * (r - mean);
  const double std_dev = rewards.size() > 1 ? std::sqrt(ss / (n - 1.0)) : 0.0;
  out.resize(rewards.size());
  for (std::size_t i = 0; i < rewards.size(); ++i)
    out[i] = (rewards[i] - mean) / (std_dev + 1e-8);
}

// The loss of one REINFORCE update over `groups` steps (Eq. 2, train_rl), and,
// when dlogits is given, its gradient w.r.t. the logits [slots, 1]:
//   dL/dz_s = (r'_g (p_s - [s == a_g]) + w p_s (log p_s - sum_t p_t log p_t)) / groups.
// actions[g]: the chosen slot (a global slot index) of group g; rewards[g]:
// the return of group g's step (the episode's final reward), normalised here.
template <class = void>
double reinforce_loss(const Eigen::Ref<const nn::matrix>& logits,
                      std::span<const std::int64_t> group_of, Eigen::Index groups,
                      std::span<const std::int64_t> actions, std::span<const double> rewards,
                      const reinforce_options& o, nn::matrix* dlogits) {
  detail::require_options(o);
  detail::require_ragged(logits, group_of, groups, "reinforce");
  const auto n = static_cast<std::size_t>(groups);
  if (actions.size() != n) {
    embplan::detail::fail("reinforce.actions.size", actions.size(),
                          "one action per group (" + std::to_string(groups) + " groups)");
  }
  if (rewards.size() != n) {
    embplan::detail::fail("reinforce.rewards.size", rewards.size(),
                          "one reward per group (" + std::to_string(groups) + " groups)");
  }
  for (std::size_t g = 0; g < n; ++g) {
    const std::int64_t a = actions[g];
    if (a < 0 || a >= logits.rows() ||
        group_of[static_cast<std::size_t>(a)] != static_cast<std::int64_t>(g)) {
      embplan::detail::fail(embplan::detail::path("reinforce.actions", g), a,
                            "a slot of group " + std::to_string(g) + " (of " +
                                std::to_string(logits.rows()) + " slots)");
    }
  }
  std::vector<double> r;
  normalise_rewards(rewards, r);

  // In double from the float logits: the loss and its gradient are sums of
  // many small terms (PyTorch computes them in float32; the difference is
  // below float32's resolution of the result).
  std::vector<double> top(n, -std::numeric_limits<double>::infinity());
  std::vector<double> log_sum(n, 0.0);
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    auto& t = top[static_cast<std::size_t>(group_of[s])];
    t = std::max(t, static_cast<double>(logits(static_cast<Eigen::Index>(s), 0)));
  }
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    const auto g = static_cast<std::size_t>(group_of[s]);
    log_sum[g] += std::exp(static_cast<double>(logits(static_cast<Eigen::Index>(s), 0)) - top[g]);
  }
  for (auto& v : log_sum)
    v = std::log(v);
  const auto log_prob = [&](std::size_t s) {
    const auto g = static_cast<std::size_t>(group_of[s]);
    return static_cast<double>(logits(static_cast<Eigen::Index>(s), 0)) - top[g] - log_sum[g];
  };
  std::vector<double> neg_entropy(n, 0.0);  // sum_a pi log pi per step
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    const double lp = log_prob(s);
    neg_entropy[static_cast<std::size_t>(group_of[s])] += std::exp(lp) * lp;
  }

  double policy = 0.0;
  double entropy = 0.0;
  for (std::size_t g = 0; g < n; ++g) {
    policy += -log_prob(static_cast<std::size_t>(actions[g])) * r[g];
    entropy += neg_entropy[g];
  }
  const double inv = 1.0 / static_cast<double>(n);
  const double loss = policy * inv + o.entropy_weight * entropy * inv;

  if (dlogits != nullptr) {
    dlogits->resize(logits.rows(), 1);
    for (std::size_t s = 0; s < group_of.size(); ++s) {
      const auto g = static_cast<std::size_t>(group_of[s]);
      const double lp = log_prob(s);
      const double p = std::exp(lp);
      const double onehot = actions[g] == static_cast<std::int64_t>(s) ? 1.0 : 0.0;
      const double d = r[g] * (p - onehot) + o.entropy_weight * p * (lp - neg_entropy[g]);
      (*dlogits)(static_cast<Eigen::Index>(s), 0) = static_cast<float>(d * inv);
    }
  }
  return loss;
}

// Clips the parameter gradients as the options ask (nn::clip_grad_norm with
// max_grad_norm; nothing when it is 0). Returns the gradients' L2 norm before
// clipping.
template <nn::model M>
double clip_policy_gradient(M& grad, const reinforce_options& o) {
  detail::require_options(o);
  if (o.max_grad_norm > 0.0) return nn::clip_grad_norm(grad, o.max_grad_norm);
  return std::sqrt(nn::squared_norm(grad));
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
