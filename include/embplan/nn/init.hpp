#pragma once
// Seeded initialisation with PyTorch's default distributions, drawn from
// embplan::rng (never std:: distributions, whose output is implementation-
// defined): nn.Linear's kaiming_uniform_(a = sqrt(5)) reduces to
// U(-1/sqrt(in), 1/sqrt(in)) for the weight, and its bias is drawn from the same
// range; nn.LSTM draws every parameter from U(-1/sqrt(H), 1/sqrt(H)).
// The values differ from PyTorch's (another generator); the distributions agree.

#include <cmath>

#include "embplan/core/random.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::nn {

// Every entry, in row-major order, from U(-bound, bound).
inline void init_uniform(matrix& m, double bound, rng& gen) {
  float* data = m.data();
  for (Eigen::Index i = 0; i < m.size(); ++i)
    data[i] = static_cast<float>(gen.uniform(-bound, bound));
}

// 1/sqrt(fan_in): the bound of nn.Linear (fan_in = in_features) and of nn.LSTM
// (fan_in = hidden_size).
inline double default_init_bound(Eigen::Index fan_in) {
  return 1.0 / std::sqrt(static_cast<double>(fan_in));
}

}  // namespace embplan::inline EMBPLAN_ABI::nn
