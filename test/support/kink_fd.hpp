#pragma once
// Gradients against central differences for networks with ReLUs. A central
// difference is a derivative only where no ReLU flips between w - eps and
// w + eps (at a kink it measures the jump): an entry whose perturbation flips
// one, anywhere in the network, is not judged; every judged entry must agree.
// The caller checks that most entries were judged.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/tensor.hpp"

namespace embplan::test {

struct kink_fd_count {
  std::size_t judged = 0;
  std::size_t sampled = 0;
  std::size_t tensors = 0;  // parameters on the loss
};

// run(active) -> the loss (double), filling `active` with which ReLU outputs
// are positive. `grad` holds the analytic gradients of `net`'s parameters (in
// named_parameters order). A parameter for which on_loss(name) is false must
// have an exactly zero gradient; of the others, `per_tensor` random entries
// are perturbed by +-eps.
template <class Net, class Run, class OnLoss>
kink_fd_count check_kink_fd(Net& net, Net& grad, Run&& run, OnLoss&& on_loss, int per_tensor,
                            rng& gen, float eps = 1e-2f) {
  auto analytic = grad.named_parameters();
  auto params = net.named_parameters();
  REQUIRE(analytic.size() == params.size());
  kink_fd_count count;
  std::vector<bool> base, up_active, down_active;
  (void)run(base);
  for (std::size_t p = 0; p < params.size(); ++p) {
    const std::string name(params[p].first);
    CAPTURE(name);
    nn::matrix& w = *params[p].second;
    const nn::matrix& g = *analytic[p].second;
    if (!on_loss(std::string_view(name))) {
      CHECK(g.cwiseAbs().maxCoeff() == 0.0f);
      continue;
    }
    ++count.tensors;
    for (int k = 0; k < per_tensor; ++k) {
      const auto i = static_cast<Eigen::Index>(gen.below(static_cast<std::uint64_t>(w.size())));
      const float saved = w.data()[i];
      w.data()[i] = saved + eps;
      const double up = run(up_active);
      w.data()[i] = saved - eps;
      const double down = run(down_active);
      w.data()[i] = saved;
      ++count.sampled;
      if (up_active != base || down_active != base) continue;  // a kink in between
      ++count.judged;
      const double numeric = (up - down) / (2.0 * static_cast<double>(eps));
      const double a = g.data()[i];
      CAPTURE(i);
      CHECK(std::abs(a - numeric) <= 1e-2 * std::max(std::abs(a), std::abs(numeric)) + 2e-4);
    }
  }
  return count;
}

}  // namespace embplan::test
