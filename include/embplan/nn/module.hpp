#pragma once
// What every network in nn/ offers, and the generic operations built on it.
//
// A model is a plain value: forward is const and keeps no caches, so one model
// serves many threads. Training state lives outside it: a tape (forward fills,
// backward reads) and a gradient, which is a second value of the model's own
// type with every parameter zeroed (zeros_like) — same structure, same names.
//
// named_parameters(prefix) lists the trainable tensors by PyTorch state_dict
// name, in state_dict order, e.g. "t_hidden.0.weight", "t_hidden.0.bias", ...
// A model with non-trained tensors stored with it (a feature normalizer) also
// has named_buffers(prefix); named_tensors() joins both: what a checkpoint
// holds, and what a loader fills by name.

#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

template <class M>
concept model = std::copyable<M> && requires(M& m, const M& cm, std::string_view prefix) {
  { m.named_parameters(prefix) } -> std::same_as<parameter_list>;
  { cm.named_parameters(prefix) } -> std::same_as<const_parameter_list>;
};

template <class M>
concept model_with_buffers = model<M> && requires(M& m, const M& cm, std::string_view prefix) {
  { m.named_buffers(prefix) } -> std::same_as<parameter_list>;
  { cm.named_buffers(prefix) } -> std::same_as<const_parameter_list>;
};

// Number of trainable scalars (buffers not counted, as sum(p.numel() for p in
// model.parameters()) in PyTorch).
template <model M>
std::size_t parameter_count(const M& m) {
  std::size_t n = 0;
  for (const auto& [name, p] : m.named_parameters(std::string_view{}))
    n += static_cast<std::size_t>(p->size());
  return n;
}

// Parameters, then buffers: the tensors of a checkpoint.
template <model M>
parameter_list named_tensors(M& m, std::string_view prefix = {}) {
  auto out = m.named_parameters(prefix);
  if constexpr (model_with_buffers<M>) {
    for (auto& entry : m.named_buffers(prefix))
      out.push_back(std::move(entry));
  }
  return out;
}

template <model M>
const_parameter_list named_tensors(const M& m, std::string_view prefix = {}) {
  auto out = m.named_parameters(prefix);
  if constexpr (model_with_buffers<M>) {
    for (auto& entry : m.named_buffers(prefix))
      out.push_back(std::move(entry));
  }
  return out;
}

// optimizer.zero_grad() for a gradient held as a model.
template <model M>
void set_zero(M& grad) {
  for (auto& [name, p] : grad.named_parameters(std::string_view{}))
    p->setZero();
}

// The gradient holder of m: a copy whose parameters are all zero.
template <model M>
M zeros_like(const M& m) {
  M out = m;
  set_zero(out);
  return out;
}

// Refuses a model with a NaN or Inf anywhere, naming the tensor and the entry:
// field 'c_hidden.1.weight[0, 3]' = nan: expected a finite number.
template <model M>
void require_finite(const M& m) {
  for (const auto& [name, p] : named_tensors(m))
    detail::require_finite(*p, name);
}

// Sum of squares of all parameters, in double.
template <model M>
double squared_norm(const M& m) {
  double sum = 0.0;
  for (const auto& [name, p] : m.named_parameters(std::string_view{}))
    sum += p->template cast<double>().squaredNorm();
  return sum;
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
