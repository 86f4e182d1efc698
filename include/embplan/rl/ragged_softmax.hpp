#pragma once
// Softmax over ragged groups: one logit per slot [slots, 1], each slot in one
// group (an observation), the distribution taken within each group. This is
// a policy scoring a variable set of candidate actions per state, one by one:
// DreamShard's policy scores every legal device of an observation with the
// same per-device layer (NeurIPS'22 §3.3, App. B.2; the authors pass only the
// legal devices, which is a masked softmax over devices), AutoShard scores
// every candidate split (§4.2). Groups need not be contiguous or sorted; a
// group must hold at least one slot, and logits must be finite.
//
// Also here: the per-group argmax (DreamShard Algorithm 2's greedy action)
// and sampling (torch.multinomial's role in the authors' training) on
// embplan's rng, and the entropy term sum_a pi log pi of each group.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

namespace detail {

// logits [slots, 1] finite; group_of one id per slot in [0, groups); every
// group holds a slot. `field` names the caller ("ragged_softmax", ...).
template <class = void>
void require_ragged(const Eigen::Ref<const nn::matrix>& logits,
                    std::span<const std::int64_t> group_of, Eigen::Index groups,
                    std::string_view field) {
  const std::string f(field);
  nn::detail::require_cols(logits, 1, f + ".logits", "one logit per slot");
  if (static_cast<Eigen::Index>(group_of.size()) != logits.rows()) {
    embplan::detail::fail(f + ".group_of.size", group_of.size(),
                          "one group id per slot (" + std::to_string(logits.rows()) + " slots)");
  }
  if (groups < 1) embplan::detail::fail(f + ".groups", groups, "at least one group");
  std::vector<char> seen(static_cast<std::size_t>(groups), 0);
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    if (group_of[s] < 0 || group_of[s] >= groups) {
      embplan::detail::fail(embplan::detail::path(f + ".group_of", s), group_of[s],
                            "a group id in [0, " + std::to_string(groups) + ")");
    }
    seen[static_cast<std::size_t>(group_of[s])] = 1;
  }
  for (Eigen::Index g = 0; g < groups; ++g) {
    if (seen[static_cast<std::size_t>(g)] == 0) {
      embplan::detail::fail(embplan::detail::path(f + ".group_size", static_cast<std::size_t>(g)),
                            0, "at least one slot (a legal action) in every group");
    }
  }
  nn::detail::require_finite(logits, f + ".logits");
}

// Per group: the max logit and log sum exp(z - max), in float as PyTorch's
// float32 log_softmax.
template <class = void>
void group_log_normalisers(const Eigen::Ref<const nn::matrix>& logits,
                           std::span<const std::int64_t> group_of, Eigen::Index groups,
                           std::vector<float>& row_max, std::vector<float>& log_sum) {
  row_max.assign(static_cast<std::size_t>(groups), -std::numeric_limits<float>::infinity());
  log_sum.assign(static_cast<std::size_t>(groups), 0.0f);
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    auto& m = row_max[static_cast<std::size_t>(group_of[s])];
    m = std::max(m, logits(static_cast<Eigen::Index>(s), 0));
  }
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    const auto g = static_cast<std::size_t>(group_of[s]);
    log_sum[g] += std::exp(logits(static_cast<Eigen::Index>(s), 0) - row_max[g]);
  }
  for (auto& v : log_sum)
    v = std::log(v);
}

}  // namespace detail

// log pi(slot | its group) for every slot: z - max - log sum exp(z - max) per group.
template <class = void>
void ragged_log_softmax(const Eigen::Ref<const nn::matrix>& logits,
                        std::span<const std::int64_t> group_of, Eigen::Index groups,
                        nn::matrix& log_probs) {
  detail::require_ragged(logits, group_of, groups, "ragged_softmax");
  std::vector<float> row_max;
  std::vector<float> log_sum;
  detail::group_log_normalisers(logits, group_of, groups, row_max, log_sum);
  log_probs.resize(logits.rows(), 1);
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    const auto g = static_cast<std::size_t>(group_of[s]);
    const auto r = static_cast<Eigen::Index>(s);
    log_probs(r, 0) = logits(r, 0) - row_max[g] - log_sum[g];
  }
}

// pi(slot | its group) for every slot; each group's probabilities sum to 1.
template <class = void>
void ragged_softmax(const Eigen::Ref<const nn::matrix>& logits,
                    std::span<const std::int64_t> group_of, Eigen::Index groups,
                    nn::matrix& probs) {
  ragged_log_softmax(logits, group_of, groups, probs);
  probs = probs.array().exp().matrix();
}

// Given log p = ragged_log_softmax(z) and g = dL/dlog p: dL/dz_s = g_s - p_s *
// (sum of g over the slot's group).
template <class = void>
void ragged_log_softmax_backward(const Eigen::Ref<const nn::matrix>& log_probs,
                                 std::span<const std::int64_t> group_of, Eigen::Index groups,
                                 const Eigen::Ref<const nn::matrix>& dlog_probs,
                                 nn::matrix& dlogits) {
  detail::require_ragged(log_probs, group_of, groups, "ragged_log_softmax_backward");
  nn::detail::require_shape(dlog_probs, log_probs.rows(), 1,
                            "ragged_log_softmax_backward.output_grad", "[slots, 1]");
  std::vector<double> sum(static_cast<std::size_t>(groups), 0.0);
  for (std::size_t s = 0; s < group_of.size(); ++s)
    sum[static_cast<std::size_t>(group_of[s])] += dlog_probs(static_cast<Eigen::Index>(s), 0);
  dlogits.resize(log_probs.rows(), 1);
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    const auto r = static_cast<Eigen::Index>(s);
    dlogits(r, 0) =
        static_cast<float>(dlog_probs(r, 0) - std::exp(static_cast<double>(log_probs(r, 0))) *
                                                  sum[static_cast<std::size_t>(group_of[s])]);
  }
}

// sum over the group of pi log pi (the negative entropy) for every group, from
// log-probabilities.
template <class = void>
void ragged_neg_entropy(const Eigen::Ref<const nn::matrix>& log_probs,
                        std::span<const std::int64_t> group_of, Eigen::Index groups,
                        std::vector<double>& out) {
  detail::require_ragged(log_probs, group_of, groups, "ragged_neg_entropy");
  out.assign(static_cast<std::size_t>(groups), 0.0);
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    const double lp = log_probs(static_cast<Eigen::Index>(s), 0);
    out[static_cast<std::size_t>(group_of[s])] += std::exp(lp) * lp;
  }
}

// The slot of the largest logit of each group, the first (lowest slot) on
// ties as torch.argmax: DreamShard Algorithm 2's greedy action.
template <class = void>
void ragged_argmax(const Eigen::Ref<const nn::matrix>& logits,
                   std::span<const std::int64_t> group_of, Eigen::Index groups,
                   std::vector<std::int64_t>& actions) {
  detail::require_ragged(logits, group_of, groups, "ragged_argmax");
  actions.assign(static_cast<std::size_t>(groups), -1);
  for (std::size_t s = 0; s < group_of.size(); ++s) {
    auto& best = actions[static_cast<std::size_t>(group_of[s])];
    if (best < 0 || logits(static_cast<Eigen::Index>(s), 0) > logits(best, 0)) {
      best = static_cast<std::int64_t>(s);
    }
  }
}

// One slot per group drawn from pi = ragged_softmax(logits) by inverse CDF on
// gen.uniform(), one draw per group in group order (the role of
// torch.multinomial in the authors' collection and training; same seed, same
// draws). Slots of a group are visited in slot order.
template <class = void>
void ragged_sample(const Eigen::Ref<const nn::matrix>& logits,
                   std::span<const std::int64_t> group_of, Eigen::Index groups, rng& gen,
                   std::vector<std::int64_t>& actions) {
  nn::matrix log_probs;
  ragged_log_softmax(logits, group_of, groups, log_probs);
  std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(groups));
  for (std::size_t s = 0; s < group_of.size(); ++s)
    members[static_cast<std::size_t>(group_of[s])].push_back(static_cast<std::int64_t>(s));
  actions.assign(static_cast<std::size_t>(groups), -1);
  for (std::size_t g = 0; g < members.size(); ++g) {
    const double u = gen.uniform();
    double cdf = 0.0;
    std::int64_t pick = -1;
    for (const std::int64_t s : members[g]) {
      const double p = std::exp(static_cast<double>(log_probs(s, 0)));
      if (!(p > 0.0)) continue;
      pick = s;  // the last positive slot when rounding ends the CDF just below u
      cdf += p;
      if (u < cdf) break;
    }
    actions[g] = pick;
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
