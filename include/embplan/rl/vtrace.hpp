#pragma once
// V-trace off-policy targets (Espeholt et al., ICML'18, "IMPALA", §4.1), as
// AutoShard trains its policy-value network (KDD'22 §4.4, with the TorchBeast
// implementation's defaults: rho_bar = c_bar = 1, gamma = 1). For one
// trajectory of n steps x_s, a_s, r_s, with the learner's values V(x_s), the
// bootstrap V(x_n), and the ratio pi(a_s|x_s) / mu(a_s|x_s) of the learner's
// policy pi to the (possibly stale) policy mu the actor sampled with:
//   rho_s = min(rho_bar, pi/mu)        c_s = lambda min(c_bar, pi/mu)
//   delta_s = rho_s (r_s + gamma_s V(x_{s+1}) - V(x_s))
//   v_s = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),  v_n = V(x_n)
//   advantage_s = min(pg_rho_bar, pi/mu) (r_s + gamma_s v_{s+1} - V(x_s))
// (Espeholt et al. Eq. 1 and its recursive form, and §4.2's policy
// gradient). gamma_s is the discount after step s: gamma, or 0 where an
// episode ends at step s (the next step starts another episode, whose value
// must not leak back), as TorchBeast passes (1 - done) * gamma. The value
// head's loss is 0.5 sum_s (v_s - V(x_s))^2 and the policy's
// -sum_s advantage_s log pi(a_s|x_s), v_s and advantage_s held constant.
// On-policy (pi = mu) with lambda = 1, v_s is the n-step return
// sum_{t>=s} (prod gamma) r_t + (prod gamma) V(x_n): the tests check that,
// and a hand-computed off-policy case.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

struct vtrace_options {
  double rho_bar = 1.0;     // truncation of the importance weight in delta_s (rho-bar)
  double c_bar = 1.0;       // truncation of the trace c_s (c-bar)
  double pg_rho_bar = 1.0;  // truncation of the weight of the policy-gradient advantage
  double lambda = 1.0;      // Espeholt et al. §4.2's lambda in c_s (1: none)
};

// One trajectory, time-major: step s of every span is step s of the
// trajectory. log_ratio[s] = log pi(a_s|x_s) - log mu(a_s|x_s).
struct vtrace_input {
  std::span<const double> log_ratio;
  std::span<const double> discount;  // gamma_s in [0, 1]: gamma, or 0 where an episode ends
  std::span<const double> reward;
  std::span<const double> value;  // V(x_s)
  double bootstrap_value = 0.0;   // V(x_n)
};

struct vtrace_output {
  std::vector<double> vs;         // the value targets v_s
  std::vector<double> advantage;  // the policy-gradient advantages
};

namespace detail {

inline void require_finite(const char* field, std::size_t s, double v, const char* what) {
  if (!std::isfinite(v)) {
    embplan::detail::fail(std::string("vtrace_input.") + field + "[" + std::to_string(s) + "]", v,
                          what);
  }
}

inline void require_vtrace_options(const vtrace_options& o) {
  const auto positive = [](const char* field, double v) {
    if (!(v > 0.0) || !std::isfinite(v)) {
      embplan::detail::fail(std::string("vtrace_options.") + field, v, "a finite number > 0");
    }
  };
  positive("rho_bar", o.rho_bar);
  positive("c_bar", o.c_bar);
  positive("pg_rho_bar", o.pg_rho_bar);
  if (!(o.lambda >= 0.0 && o.lambda <= 1.0)) {
    embplan::detail::fail("vtrace_options.lambda", o.lambda, "a number in [0, 1]");
  }
  if (o.rho_bar < o.c_bar) {
    // Espeholt et al. §4.1 assume c_bar <= rho_bar (the trace speed never
    // exceeds the weight that sets the fixed point).
    embplan::detail::fail("vtrace_options.c_bar", o.c_bar,
                          "at most rho_bar (" + std::to_string(o.rho_bar) + ")");
  }
}

}  // namespace detail

// The V-trace targets and advantages of `in` into `out` (resized; its buffers
// are reused). Bad input — spans of different lengths, a non-finite entry, a
// discount outside [0, 1], options out of range — throws embplan::error
// naming the field and the value.
inline void vtrace(const vtrace_input& in, const vtrace_options& o, vtrace_output& out) {
  detail::require_vtrace_options(o);
  const std::size_t n = in.log_ratio.size();
  const auto same_length = [&](const char* field, std::size_t got) {
    if (got != n) {
      embplan::detail::fail(std::string("vtrace_input.") + field + ".size", got,
                            "one entry per step (" + std::to_string(n) + ", log_ratio's)");
    }
  };
  same_length("discount", in.discount.size());
  same_length("reward", in.reward.size());
  same_length("value", in.value.size());
  if (!std::isfinite(in.bootstrap_value)) {
    embplan::detail::fail("vtrace_input.bootstrap_value", in.bootstrap_value, "a finite value");
  }
  for (std::size_t s = 0; s < n; ++s) {
    detail::require_finite("log_ratio", s, in.log_ratio[s], "a finite log ratio");
    detail::require_finite("reward", s, in.reward[s], "a finite reward");
    detail::require_finite("value", s, in.value[s], "a finite value");
    if (!(in.discount[s] >= 0.0 && in.discount[s] <= 1.0)) {
      embplan::detail::fail("vtrace_input.discount[" + std::to_string(s) + "]", in.discount[s],
                            "a discount in [0, 1]");
    }
  }
  out.vs.resize(n);
  out.advantage.resize(n);
  // Backwards: acc = v_s - V(x_s).
  double acc = 0.0;
  for (std::size_t k = n; k-- > 0;) {
    const double ratio = std::exp(in.log_ratio[k]);
    const double rho = std::min(o.rho_bar, ratio);
    const double c = o.lambda * std::min(o.c_bar, ratio);
    const double next_value = k + 1 < n ? in.value[k + 1] : in.bootstrap_value;
    const double delta = rho * (in.reward[k] + in.discount[k] * next_value - in.value[k]);
    acc = delta + in.discount[k] * c * acc;
    out.vs[k] = in.value[k] + acc;
  }
  for (std::size_t k = 0; k < n; ++k) {
    const double ratio = std::exp(in.log_ratio[k]);
    const double next_vs = k + 1 < n ? out.vs[k + 1] : in.bootstrap_value;
    out.advantage[k] =
        std::min(o.pg_rho_bar, ratio) * (in.reward[k] + in.discount[k] * next_vs - in.value[k]);
  }
}

inline vtrace_output vtrace(const vtrace_input& in, const vtrace_options& o = {}) {
  vtrace_output out;
  vtrace(in, o, out);
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
