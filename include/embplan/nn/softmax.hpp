#pragma once
// Softmax and log-softmax over the rows of a [rows, actions] logit matrix,
// optionally restricted to the legal actions of each row (a policy choosing
// among the devices a table still fits on: DreamShard §3.3, AutoShard §4.3).
// An illegal action gets probability exactly 0 and log-probability -inf, and no
// gradient. A row without any legal action has no distribution: embplan::error
// naming the row.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

namespace detail {

template <class = void>
void require_mask(const Eigen::Ref<const matrix>& logits, const mask& legal,
                  std::string_view field) {
  require_shape(legal, logits.rows(), logits.cols(), field, "the logits' shape");
  for (Eigen::Index r = 0; r < legal.rows(); ++r) {
    if (!legal.row(r).any()) {
      embplan::detail::fail(embplan::detail::path(field, static_cast<std::size_t>(r)), 0,
                            "at least one legal action in every row");
    }
  }
}

// For row r: its max over legal entries and log of the sum of exp(x - max).
template <class = void>
void softmax_row(const Eigen::Ref<const matrix>& logits, const mask* legal, Eigen::Index r,
                 float& row_max, float& log_sum) {
  const auto x = logits.row(r);
  const float lowest = -std::numeric_limits<float>::infinity();
  if (legal == nullptr) {
    row_max = x.maxCoeff();
    log_sum = std::log((x.array() - row_max).exp().sum());
    return;
  }
  const auto ok = legal->row(r).array();
  row_max = ok.select(x.array(), lowest).maxCoeff();
  log_sum = std::log(ok.select((x.array() - row_max).exp(), 0.0f).sum());
}

}  // namespace detail

// log pi(a|s) for every row; illegal entries -inf. legal == nullptr: all legal.
template <class = void>
void log_softmax(const Eigen::Ref<const matrix>& logits, const mask* legal, matrix& log_probs) {
  if (logits.cols() == 0) embplan::detail::fail("softmax.logits.cols", 0, "at least one action");
  if (legal != nullptr) detail::require_mask(logits, *legal, "softmax.mask");
  log_probs.resize(logits.rows(), logits.cols());
  const float lowest = -std::numeric_limits<float>::infinity();
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    float row_max = 0.0f;
    float log_sum = 0.0f;
    detail::softmax_row(logits, legal, r, row_max, log_sum);
    auto out = log_probs.row(r).array();
    out = logits.row(r).array() - row_max - log_sum;
    if (legal != nullptr) out = legal->row(r).array().select(out, lowest);
  }
}

// pi(a|s) for every row; illegal entries exactly 0.
template <class = void>
void softmax(const Eigen::Ref<const matrix>& logits, const mask* legal, matrix& probs) {
  if (logits.cols() == 0) embplan::detail::fail("softmax.logits.cols", 0, "at least one action");
  if (legal != nullptr) detail::require_mask(logits, *legal, "softmax.mask");
  probs.resize(logits.rows(), logits.cols());
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    float row_max = 0.0f;
    float log_sum = 0.0f;
    detail::softmax_row(logits, legal, r, row_max, log_sum);
    auto out = probs.row(r).array();
    out = (logits.row(r).array() - row_max).exp();
    if (legal != nullptr) out = legal->row(r).array().select(out, 0.0f);
    out /= out.sum();
  }
}

// Given p = softmax(z) and dL/dp: dL/dz = p * (dL/dp - sum(p * dL/dp)); zero
// where p is an illegal 0.
template <class = void>
void softmax_backward(const Eigen::Ref<const matrix>& probs, const Eigen::Ref<const matrix>& dprobs,
                      matrix& dlogits) {
  detail::require_shape(dprobs, probs.rows(), probs.cols(), "softmax.output_grad",
                        "the probabilities' shape");
  dlogits.resize(probs.rows(), probs.cols());
  for (Eigen::Index r = 0; r < probs.rows(); ++r) {
    const float dot = probs.row(r).dot(dprobs.row(r));
    dlogits.row(r).array() = probs.row(r).array() * (dprobs.row(r).array() - dot);
  }
}

// Given log p = log_softmax(z) and dL/dlog p: dL/dz = g - p * sum(g) over the
// legal entries (those with log p > -inf); zero on illegal ones.
template <class = void>
void log_softmax_backward(const Eigen::Ref<const matrix>& log_probs,
                          const Eigen::Ref<const matrix>& dlog_probs, matrix& dlogits) {
  detail::require_shape(dlog_probs, log_probs.rows(), log_probs.cols(), "log_softmax.output_grad",
                        "the log-probabilities' shape");
  dlogits.resize(log_probs.rows(), log_probs.cols());
  const float lowest = -std::numeric_limits<float>::infinity();
  for (Eigen::Index r = 0; r < log_probs.rows(); ++r) {
    const auto ok = log_probs.row(r).array() > lowest;
    const auto g = ok.select(dlog_probs.row(r).array(), 0.0f);
    const float sum = g.sum();
    dlogits.row(r).array() = ok.select(g - log_probs.row(r).array().exp() * sum, 0.0f);
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
