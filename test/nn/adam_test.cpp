#include "embplan/nn/adam.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/module.hpp"

using embplan::nn::linear;

namespace {

// Adam by the formulas of torch.optim.Adam, in double.
struct reference_adam {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  std::array<double, 3> m{}, v{};
  int t = 0;
  void step(std::array<double, 3>& p, const std::array<double, 3>& grad) {
    ++t;
    for (std::size_t i = 0; i < 3; ++i) {
      const double g = grad[i] + weight_decay * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      const double step_size = lr / (1 - std::pow(beta1, t));
      const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(beta2, t)) + eps;
      p[i] -= step_size * m[i] / denom;
    }
  }
};

linear three_weights() {
  linear l(3, 1);
  l.weight << 1.0f, -2.0f, 0.5f;
  return l;
}

}  // namespace

TEST_CASE("adam defaults are PyTorch's") {
  const embplan::nn::adam opt;
  CHECK(opt.options().lr == 1e-3);
  CHECK(opt.options().beta1 == 0.9);
  CHECK(opt.options().beta2 == 0.999);
  CHECK(opt.options().eps == 1e-8);
  CHECK(opt.options().weight_decay == 0.0);
  CHECK(opt.steps() == 0);
}

TEST_CASE("two adam steps reproduce torch.optim.Adam") {
  const std::array<std::array<double, 3>, 2> grads{{{0.1, -0.3, 2.0}, {-0.2, 0.4, 1.0}}};
  // torch 1.13: p = [1, -2, 0.5]; Adam([p], lr=0.01[, weight_decay=0.1]); two steps with these
  // grads.
  const std::array<std::array<float, 3>, 2> torch_plain{
      {{0.9900000095367432f, -1.9900000095367432f, 0.49000000953674316f},
       {0.9936610460281372f, -1.991935133934021f, 0.4806782007217407f}}};
  const std::array<std::array<float, 3>, 2> torch_decay{
      {{0.9900000095367432f, -1.9900000095367432f, 0.49000000953674316f},
       {0.9873751997947693f, -1.9865601062774658f, 0.4806445240974426f}}};
  for (const double weight_decay : {0.0, 0.1}) {
    CAPTURE(weight_decay);
    linear l = three_weights();
    linear grad = embplan::nn::zeros_like(l);
    embplan::nn::adam opt({.lr = 0.01, .weight_decay = weight_decay});
    reference_adam ref{.lr = 0.01, .weight_decay = weight_decay};
    std::array<double, 3> p{1.0, -2.0, 0.5};
    for (std::size_t s = 0; s < 2; ++s) {
      for (Eigen::Index i = 0; i < 3; ++i)
        grad.weight(0, i) = static_cast<float>(grads[s][static_cast<std::size_t>(i)]);
      opt.step(l, grad);
      ref.step(p, grads[s]);
      const auto& expected = weight_decay == 0.0 ? torch_plain[s] : torch_decay[s];
      for (Eigen::Index i = 0; i < 3; ++i) {
        const auto iu = static_cast<std::size_t>(i);
        CHECK(l.weight(0, i) == doctest::Approx(p[iu]).epsilon(1e-6));
        CHECK(std::abs(l.weight(0, i) - expected[iu]) <= 2e-7f);
      }
      CHECK(l.bias(0, 0) == 0.0f);  // zero gradient, zero weight: no move
    }
    CHECK(opt.steps() == 2);
  }
}

TEST_CASE("adam refuses bad options and a gradient of another shape") {
  CHECK_THROWS_WITH_AS(embplan::nn::adam({.beta1 = 1.0}),
                       doctest::Contains("'adam_options.beta1' = 1: expected a number in [0, 1)"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(embplan::nn::adam({.lr = -1.0}), doctest::Contains("'adam_options.lr' = -1"),
                       embplan::error);
  linear l = three_weights();
  linear wrong(2, 1);
  embplan::nn::adam opt;
  CHECK_THROWS_WITH_AS(opt.step(l, wrong),
                       doctest::Contains("'adam.grad.weight' = \"[1, 2]\": expected [1, 3]"),
                       embplan::error);
}

TEST_CASE("set_lr: the next steps use the new rate exactly, as a scheduler writing group[lr]") {
  const std::array<std::array<float, 3>, 3> grads{
      {{0.1f, -0.3f, 2.0f}, {-0.2f, 0.4f, 1.0f}, {0.5f, 0.0f, -1.0f}}};
  // Steps 1-2 at 0.01, step 3 at 0.01 * (1 - 1/3) (LambdaLR's second epoch).
  const double lr3 = 0.01 * (1.0 - 1.0 / 3.0);
  linear a = three_weights();
  linear grad = embplan::nn::zeros_like(a);
  embplan::nn::adam opt({.lr = 0.01});
  reference_adam ref{.lr = 0.01};
  std::array<double, 3> p{1.0, -2.0, 0.5};
  for (std::size_t s = 0; s < 3; ++s) {
    if (s == 2) {
      opt.set_lr(lr3);
      ref.lr = lr3;
    }
    for (Eigen::Index i = 0; i < 3; ++i)
      grad.weight(0, i) = grads[s][static_cast<std::size_t>(i)];
    opt.step(a, grad);
    ref.step(p, {grads[s][0], grads[s][1], grads[s][2]});
  }
  CHECK(opt.lr() == lr3);
  CHECK(opt.options().lr == lr3);
  for (Eigen::Index i = 0; i < 3; ++i)
    CHECK(a.weight(0, i) == doctest::Approx(p[static_cast<std::size_t>(i)]).epsilon(1e-6));
  // Bit for bit the optimizer built at that rate with the same state.
  linear b = three_weights();
  embplan::nn::adam first({.lr = 0.01});
  for (std::size_t s = 0; s < 2; ++s) {
    for (Eigen::Index i = 0; i < 3; ++i)
      grad.weight(0, i) = grads[s][static_cast<std::size_t>(i)];
    first.step(b, grad);
  }
  embplan::nn::adam at_lr3({.lr = lr3});
  at_lr3.load_state(first.state());
  for (Eigen::Index i = 0; i < 3; ++i)
    grad.weight(0, i) = grads[2][static_cast<std::size_t>(i)];
  at_lr3.step(b, grad);
  CHECK(a.weight == b.weight);

  CHECK_THROWS_WITH_AS(opt.set_lr(-0.5), doctest::Contains("'adam.lr' = -0.5"), embplan::error);
  CHECK_THROWS_WITH_AS(opt.set_lr(std::nan("")), doctest::Contains("'adam.lr' = nan"),
                       embplan::error);
  CHECK(opt.lr() == lr3);
}

TEST_CASE("a parameter without a gradient is skipped and keeps its own step count, as PyTorch") {
  // torch: a parameter whose .grad is None is not stepped and has no state;
  // its first step later uses bias correction at t = 1.
  linear l = three_weights();
  linear grad = embplan::nn::zeros_like(l);
  grad.weight << 0.1f, -0.3f, 2.0f;
  grad.bias(0, 0) = 0.7f;
  embplan::nn::adam opt({.lr = 0.01});
  const auto weight_only = [](std::string_view name) { return name == "weight"; };
  opt.step(l, grad, weight_only);
  opt.step(l, grad, weight_only);
  CHECK(opt.steps() == 2);
  CHECK(opt.parameter_steps() == std::vector<std::int64_t>{2, 0});
  CHECK(l.bias(0, 0) == 0.0f);
  CHECK(opt.state().exp_avg[1](0, 0) == 0.0f);
  opt.step(l, grad);
  CHECK(opt.parameter_steps() == std::vector<std::int64_t>{3, 1});
  // The bias's first step is a fresh Adam's first step: -lr * sign(g).
  linear alone = embplan::nn::zeros_like(l);
  embplan::nn::adam fresh({.lr = 0.01});
  fresh.step(alone, grad);
  CHECK(l.bias(0, 0) == alone.bias(0, 0));
  CHECK(l.bias(0, 0) == doctest::Approx(-0.01).epsilon(1e-6));
  // All parameters with a gradient: the plain step, bit for bit.
  linear x = three_weights(), y = three_weights();
  embplan::nn::adam ox({.lr = 0.01}), oy({.lr = 0.01});
  for (int s = 0; s < 3; ++s) {
    ox.step(x, grad);
    oy.step(y, grad, [](std::string_view) { return true; });
  }
  CHECK(x.weight == y.weight);
  CHECK(x.bias == y.bias);
}

TEST_CASE("state() and load_state() resume Adam bit for bit") {
  linear a = three_weights();
  linear grad = embplan::nn::zeros_like(a);
  embplan::nn::adam opt({.lr = 0.01, .weight_decay = 0.1});
  const auto set_grad = [&](int s) {
    grad.weight << 0.1f * static_cast<float>(s), -0.3f, 2.0f / static_cast<float>(s + 1);
    grad.bias(0, 0) = 0.25f * static_cast<float>(s % 2);
  };
  for (int s = 0; s < 3; ++s) {
    set_grad(s);
    opt.step(a, grad, [&](std::string_view name) { return s > 0 || name == "weight"; });
  }
  const embplan::nn::adam_state saved = opt.state();
  CHECK(saved.steps == 3);
  CHECK(saved.parameter_steps == std::vector<std::int64_t>{3, 2});
  linear b = a;
  embplan::nn::adam resumed({.lr = 0.01, .weight_decay = 0.1});
  resumed.load_state(saved);
  for (int s = 3; s < 6; ++s) {
    set_grad(s);
    opt.step(a, grad);
    resumed.step(b, grad);
  }
  CHECK(a.weight == b.weight);
  CHECK(a.bias == b.bias);
  CHECK(resumed.steps() == 6);
  CHECK(resumed.state().exp_avg_sq[0] == opt.state().exp_avg_sq[0]);
  // A fresh optimizer's state is empty and loads as fresh.
  CHECK(embplan::nn::adam{}.state().exp_avg.empty());
}

TEST_CASE("load_state refuses a state that is not one: the message names the field and value") {
  linear l = three_weights();
  linear grad = embplan::nn::zeros_like(l);
  embplan::nn::adam opt;
  opt.step(l, grad);
  const auto good = opt.state();
  const auto refused = [](embplan::nn::adam_state s, const std::string& text) {
    CAPTURE(text);
    embplan::nn::adam o;
    CHECK_THROWS_WITH_AS(o.load_state(std::move(s)), doctest::Contains(text.c_str()), embplan::error);
    CHECK(o.steps() == 0);  // nothing half-loaded
  };
  auto s = good;
  s.exp_avg.pop_back();
  refused(s, "'adam_state.exp_avg.size' = 1: expected 2");
  s = good;
  s.exp_avg_sq.push_back(s.exp_avg_sq[0]);
  refused(s, "'adam_state.exp_avg_sq.size' = 3: expected 2");
  s = good;
  s.steps = -1;
  refused(s, "'adam_state.steps' = -1");
  s = good;
  s.parameter_steps[1] = 5;
  refused(s, "'adam_state.parameter_steps[1]' = 5: expected a count in [0, steps = 1]");
  s = good;
  s.exp_avg_sq[0].resize(3, 1);
  refused(s, "'adam_state.exp_avg_sq[0]' = \"[3, 1]\": expected [1, 3]");
  s = good;
  s.exp_avg[0](0, 1) = std::nanf("");
  refused(s, "'adam_state.exp_avg[0]' = nan");
  s = good;
  s.exp_avg_sq[1](0, 0) = -1.0f;
  refused(s, "'adam_state.exp_avg_sq[1]' = -1: expected finite numbers >= 0");
  // A state of another model: the next step names the tensor.
  linear other(2, 1);
  embplan::nn::adam for_other;
  for_other.step(other, embplan::nn::zeros_like(other));
  embplan::nn::adam o;
  o.load_state(for_other.state());
  CHECK_THROWS_WITH_AS(o.step(l, grad), doctest::Contains("'adam.state.weight' = \"[1, 2]\""),
                       embplan::error);
}
