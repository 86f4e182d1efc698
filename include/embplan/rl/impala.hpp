#pragma once
// IMPALA's learner loss (Espeholt et al., ICML'18 §4.2), as AutoShard trains
// its policy-value network (KDD'22 §4.4) with TorchBeast's form of it:
//   loss = sum_t -advantage_t log pi(a_t|x_t)                  (policy)
//        + baseline_cost x 0.5 sum_t (v_t - V(x_t))^2           (value)
//        + entropy_cost x sum_t sum_a pi(a|x_t) log pi(a|x_t)   (minus entropy)
// v_t and advantage_t the V-trace targets (rl/vtrace.hpp) of the episode,
// computed from the learner's own policy against the actor's, and held
// constant (no gradient flows through them). One episode: step t has
// action_count[t] actions whose logits are consecutive (step-major, as
// rl::autoshard_forward lays them out); the episode ends at its last step.
// Defaults: baseline_cost 0.5 (0.5 x the value loss, TorchBeast's default),
// entropy_cost 0.001 (AutoShard's Appendix), gamma 1, rho_bar =
// c_bar = 1.

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/rl/vtrace.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

struct impala_options {
  double baseline_cost = 0.5;
  double entropy_cost = 0.001;
  double gamma = 1.0;  // AutoShard: one reward at the end, no discount
  vtrace_options vtrace{};
};

// What the actor recorded about one episode.
struct impala_episode {
  std::span<const std::int64_t> action_count;  // actions of each step
  std::span<const std::int64_t> action;        // the action taken at each step (within the step)
  std::span<const double> behaviour_logp;      // log mu(a_t|x_t): the actor's policy
  std::span<const double> reward;              // r_t (AutoShard: 0 but at the last step)
};

struct impala_targets {
  std::vector<double> log_pi;     // log pi(a_t|x_t) under the learner's logits
  std::vector<double> vs;         // V-trace value targets
  std::vector<double> advantage;  // V-trace policy-gradient advantages
};

struct impala_loss_parts {
  double total = 0.0;
  double policy = 0.0;
  double baseline = 0.0;  // 0.5 sum (v - V)^2, before baseline_cost
  double entropy = 0.0;   // sum_t H(pi(.|x_t)), the entropy itself (>= 0)
};

namespace detail {

inline void require_impala(const impala_options& o) {
  const auto finite_nonneg = [](const char* field, double v) {
    if (!(v >= 0.0) || !std::isfinite(v)) {
      embplan::detail::fail(std::string("impala_options.") + field, v, "a finite number >= 0");
    }
  };
  finite_nonneg("baseline_cost", o.baseline_cost);
  finite_nonneg("entropy_cost", o.entropy_cost);
  if (!(o.gamma >= 0.0 && o.gamma <= 1.0)) {
    embplan::detail::fail("impala_options.gamma", o.gamma, "a discount in [0, 1]");
  }
}

// Checks the episode against logits [N, 1] and values [T, 1].
inline void require_episode(const impala_episode& ep, Eigen::Index logits, Eigen::Index values) {
  const std::size_t steps = ep.action_count.size();
  const auto same = [&](const char* field, std::size_t got) {
    if (got != steps) {
      embplan::detail::fail(std::string("impala_episode.") + field + ".size", got,
                            "one entry per step (" + std::to_string(steps) + ")");
    }
  };
  same("action", ep.action.size());
  same("behaviour_logp", ep.behaviour_logp.size());
  same("reward", ep.reward.size());
  if (static_cast<std::size_t>(values) != steps) {
    embplan::detail::fail("impala.values.rows", values,
                          "one value per step (" + std::to_string(steps) + ")");
  }
  std::int64_t total = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    if (ep.action_count[t] < 1) {
      embplan::detail::fail("impala_episode.action_count[" + std::to_string(t) + "]",
                            ep.action_count[t], "at least one action");
    }
    if (ep.action[t] < 0 || ep.action[t] >= ep.action_count[t]) {
      embplan::detail::fail(
          "impala_episode.action[" + std::to_string(t) + "]", ep.action[t],
          "an action of the step, in [0, " + std::to_string(ep.action_count[t]) + ")");
    }
    if (!(ep.behaviour_logp[t] <= 0.0) || std::isinf(ep.behaviour_logp[t])) {
      embplan::detail::fail("impala_episode.behaviour_logp[" + std::to_string(t) + "]",
                            ep.behaviour_logp[t], "a finite log probability (<= 0)");
    }
    total += ep.action_count[t];
  }
  if (total != logits) {
    embplan::detail::fail("impala.logits.rows", logits,
                          "the episode's actions (" + std::to_string(total) + ")");
  }
}

// log softmax of logits[first, first + n) into out.
inline void log_softmax(const Eigen::Ref<const nn::matrix>& logits, Eigen::Index first,
                        Eigen::Index n, std::vector<double>& out) {
  out.resize(static_cast<std::size_t>(n));
  double top = -std::numeric_limits<double>::infinity();
  for (Eigen::Index a = 0; a < n; ++a)
    top = std::max(top, static_cast<double>(logits(first + a, 0)));
  double sum = 0.0;
  for (Eigen::Index a = 0; a < n; ++a)
    sum += std::exp(static_cast<double>(logits(first + a, 0)) - top);
  const double lse = top + std::log(sum);
  for (Eigen::Index a = 0; a < n; ++a)
    out[static_cast<std::size_t>(a)] = static_cast<double>(logits(first + a, 0)) - lse;
}

}  // namespace detail

// The V-trace targets of an episode under the learner's logits and values.
inline impala_targets impala_vtrace(const Eigen::Ref<const nn::matrix>& logits,
                                    const Eigen::Ref<const nn::matrix>& values,
                                    const impala_episode& ep, const impala_options& o = {}) {
  detail::require_impala(o);
  detail::require_episode(ep, logits.rows(), values.rows());
  const std::size_t steps = ep.action_count.size();
  impala_targets out;
  out.log_pi.resize(steps);
  std::vector<double> logp, log_ratio(steps), discount(steps), value(steps);
  Eigen::Index first = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    detail::log_softmax(logits, first, ep.action_count[t], logp);
    out.log_pi[t] = logp[static_cast<std::size_t>(ep.action[t])];
    log_ratio[t] = out.log_pi[t] - ep.behaviour_logp[t];
    discount[t] = t + 1 < steps ? o.gamma : 0.0;  // the episode ends at its last step
    value[t] = static_cast<double>(values(static_cast<Eigen::Index>(t), 0));
    first += ep.action_count[t];
  }
  auto v = vtrace({log_ratio, discount, ep.reward, value, 0.0}, o.vtrace);
  out.vs = std::move(v.vs);
  out.advantage = std::move(v.advantage);
  return out;
}

// The loss with `targets` held constant, and its gradients: dlogits [N, 1]
// and dvalues [T, 1] (resized and overwritten).
inline impala_loss_parts impala_loss(const Eigen::Ref<const nn::matrix>& logits,
                                     const Eigen::Ref<const nn::matrix>& values,
                                     const impala_episode& ep, const impala_targets& targets,
                                     const impala_options& o, nn::matrix& dlogits,
                                     nn::matrix& dvalues) {
  detail::require_impala(o);
  detail::require_episode(ep, logits.rows(), values.rows());
  const std::size_t steps = ep.action_count.size();
  if (targets.vs.size() != steps || targets.advantage.size() != steps) {
    embplan::detail::fail("impala_targets.vs.size", targets.vs.size(),
                          "one target per step (" + std::to_string(steps) + ")");
  }
  impala_loss_parts out;
  dlogits.setZero(logits.rows(), 1);
  dvalues.setZero(values.rows(), 1);
  std::vector<double> logp;
  Eigen::Index first = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    const Eigen::Index n = ep.action_count[t];
    detail::log_softmax(logits, first, n, logp);
    const auto chosen = static_cast<std::size_t>(ep.action[t]);
    const double adv = targets.advantage[t];
    out.policy += -adv * logp[chosen];
    // sum pi log pi = -H; d/dlogit_j = pi_j (log pi_j - sum_k pi_k log pi_k).
    double neg_entropy = 0.0;
    for (Eigen::Index a = 0; a < n; ++a)
      neg_entropy +=
          std::exp(logp[static_cast<std::size_t>(a)]) * logp[static_cast<std::size_t>(a)];
    out.entropy += -neg_entropy;
    for (Eigen::Index a = 0; a < n; ++a) {
      const double pi = std::exp(logp[static_cast<std::size_t>(a)]);
      const double onehot = static_cast<std::size_t>(a) == chosen ? 1.0 : 0.0;
      const double d_policy = -adv * (onehot - pi);
      const double d_entropy = pi * (logp[static_cast<std::size_t>(a)] - neg_entropy);
      dlogits(first + a, 0) = static_cast<float>(d_policy + o.entropy_cost * d_entropy);
    }
    const double v = static_cast<double>(values(static_cast<Eigen::Index>(t), 0));
    const double diff = targets.vs[t] - v;
    out.baseline += 0.5 * diff * diff;
    dvalues(static_cast<Eigen::Index>(t), 0) = static_cast<float>(-o.baseline_cost * diff);
    first += n;
  }
  out.total = out.policy + o.baseline_cost * out.baseline - o.entropy_cost * out.entropy;
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
