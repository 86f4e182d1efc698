#include "embplan/nn/linear.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/activation.hpp"
#include "embplan/nn/init.hpp"
#include "embplan/nn/module.hpp"

#include "nn/gradient_check.hpp"

using embplan::nn::linear;
using embplan::nn::matrix;

TEST_CASE("linear computes x W^T + b in PyTorch's layout") {
  linear l(3, 2);
  l.weight << 1, 2, 3,  //
      -1, 0, 4;
  l.bias << 0.5f, -2;
  matrix x(2, 3);
  x << 1, 1, 1,  //
      2, 0, -1;
  const matrix y = l(x);
  REQUIRE(y.rows() == 2);
  REQUIRE(y.cols() == 2);
  CHECK(y(0, 0) == 6.5f);   // 1 + 2 + 3 + 0.5
  CHECK(y(0, 1) == 1.0f);   // -1 + 0 + 4 - 2
  CHECK(y(1, 0) == -0.5f);  // 2 + 0 - 3 + 0.5
  CHECK(y(1, 1) == -8.0f);  // -2 + 0 - 4 - 2
  CHECK(l.in_features() == 3);
  CHECK(l.out_features() == 2);
}

TEST_CASE("linear: state names, shapes and parameter count") {
  linear l(5, 7);
  const auto named = l.named_parameters("t_hidden.0");
  REQUIRE(named.size() == 2);
  CHECK(named[0].first == "t_hidden.0.weight");
  CHECK(named[0].second->rows() == 7);
  CHECK(named[0].second->cols() == 5);
  CHECK(named[1].first == "t_hidden.0.bias");
  CHECK(named[1].second->rows() == 1);
  CHECK(named[1].second->cols() == 7);
  CHECK(l.named_parameters()[0].first == "weight");
  CHECK(embplan::nn::parameter_count(l) == 5 * 7 + 7);
}

TEST_CASE("linear gradients match central finite differences") {
  embplan::rng gen(11);
  linear l(4, 3, gen);
  matrix x = nn_test::random_matrix(5, 4, gen);
  const matrix w = nn_test::random_matrix(5, 3, gen);
  auto loss = [&] { return nn_test::weighted_sum(w, l(x)); };

  linear grad = embplan::nn::zeros_like(l);
  matrix dx;
  l.backward(x, w, grad, &dx);
  CHECK(nn_test::relative_error(grad.weight, nn_test::numeric_gradient(l.weight, loss, 1e-2f)) <
        1e-3);
  CHECK(nn_test::relative_error(grad.bias, nn_test::numeric_gradient(l.bias, loss, 1e-2f)) < 1e-3);
  CHECK(nn_test::relative_error(dx, nn_test::numeric_gradient(x, loss, 1e-2f)) < 1e-3);

  // Backward accumulates, as .grad does in PyTorch.
  const matrix once = grad.weight;
  l.backward(x, w, grad, nullptr);
  CHECK((grad.weight - 2.0f * once).cwiseAbs().maxCoeff() < 1e-5f);
}

TEST_CASE("relu passes the gradient where the input was positive") {
  matrix y(1, 4);
  y << -1, 0, 2, 3;
  embplan::nn::relu_inplace(y);
  CHECK(y(0, 0) == 0.0f);
  CHECK(y(0, 1) == 0.0f);
  CHECK(y(0, 2) == 2.0f);
  matrix dy = matrix::Constant(1, 4, 5.0f);
  embplan::nn::relu_backward(y, dy);
  CHECK(dy(0, 0) == 0.0f);
  CHECK(dy(0, 1) == 0.0f);
  CHECK(dy(0, 2) == 5.0f);
  CHECK(dy(0, 3) == 5.0f);
}

TEST_CASE("linear init follows nn.Linear's U(-1/sqrt(in), 1/sqrt(in))") {
  embplan::rng gen(2024);
  const linear l(64, 256, gen);
  const double bound = 1.0 / 8.0;
  const auto w = l.weight.cast<double>().array();
  CHECK(w.abs().maxCoeff() <= bound);
  CHECK(w.abs().maxCoeff() > 0.99 * bound);
  CHECK(std::abs(w.mean()) < 0.02 * bound);
  CHECK(w.square().mean() == doctest::Approx(bound * bound / 3.0).epsilon(0.03));
  CHECK(l.bias.cast<double>().array().abs().maxCoeff() <= bound);
  CHECK(l.bias.cast<double>().array().abs().maxCoeff() > 0.9 * bound);

  // Same seed, same weights; another seed, others.
  embplan::rng again(2024);
  embplan::rng other(2025);
  CHECK(linear(64, 256, again).weight == l.weight);
  CHECK(linear(64, 256, other).weight != l.weight);
}

TEST_CASE("linear refuses inputs of the wrong width, naming the field and the shapes") {
  const linear l(4, 2);
  const matrix x = matrix::Zero(3, 5);
  CHECK_THROWS_WITH_AS(l(x), doctest::Contains("'linear.input' = \"[3, 5]\": expected [*, 4]"),
                       embplan::error);
  linear grad(4, 3);
  CHECK_THROWS_WITH_AS(l.backward(matrix::Zero(3, 4), matrix::Zero(3, 2), grad, nullptr),
                       doctest::Contains("'linear.grad.weight' = \"[3, 4]\": expected [2, 4]"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(l.backward(matrix::Zero(3, 4), matrix::Zero(2, 2), grad, nullptr),
                       doctest::Contains("'linear.output_grad' = \"[2, 2]\": expected [3, 2]"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(linear(0, 3), doctest::Contains("'linear.in_features' = 0"), embplan::error);
}

TEST_CASE("linear refuses absurd sizes before allocating, naming the field and the value") {
  CHECK_THROWS_WITH_AS(
      linear(3, Eigen::Index{1} << 21),
      doctest::Contains("'linear.out_features' = 2097152: expected at most 1048576"),
      embplan::error);
  CHECK_THROWS_WITH_AS(linear(Eigen::Index{1} << 30, 3),
                       doctest::Contains("'linear.in_features' = 1073741824"), embplan::error);
  CHECK_THROWS_WITH_AS(linear(1 << 15, 1 << 15),
                       doctest::Contains("'linear.weight' = \"32768 x 32768\""), embplan::error);
}
