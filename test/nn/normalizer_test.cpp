#include "embplan/nn/normalizer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "embplan/core/error.hpp"

using embplan::nn::matrix;
using embplan::nn::normalizer;

TEST_CASE("fit: mean and unbiased std + 1e-6, as NeuroShard computes them") {
  matrix x(4, 2);
  x << 1, 5,  //
      2, 5,   //
      3, 5,   //
      6, 5;   // second feature constant
  const normalizer n = normalizer::fit(x);
  CHECK(n.mean(0, 0) == doctest::Approx(3.0));
  CHECK(n.mean(0, 1) == doctest::Approx(5.0));
  // sum of squares 4 + 1 + 0 + 9 = 14, / (4 - 1)
  CHECK(n.stddev(0, 0) == doctest::Approx(std::sqrt(14.0 / 3.0) + 1e-6));
  CHECK(n.stddev(0, 1) == doctest::Approx(1e-6));
  const matrix y = n(x);
  CHECK(y(3, 0) == doctest::Approx(3.0 / std::sqrt(14.0 / 3.0)).epsilon(1e-5));
  CHECK(y(0, 1) == 0.0f);
}

TEST_CASE("a std of exactly 0 divides by 1") {
  normalizer n(2);
  n.mean << 1.0f, 2.0f;
  n.stddev << 0.0f, 4.0f;
  matrix x(1, 2);
  x << 3.0f, 10.0f;
  const matrix y = n(x);
  CHECK(y(0, 0) == 2.0f);
  CHECK(y(0, 1) == 2.0f);
}

TEST_CASE("normalizer names its tensors and refuses bad input") {
  normalizer n(3);
  const auto named = n.named_buffers();
  CHECK(named[0].first == "feature_means");
  CHECK(named[1].first == "feature_stds");
  CHECK(named[1].second->cols() == 3);
  CHECK_THROWS_WITH_AS(n(matrix::Zero(2, 4)),
                       doctest::Contains("'normalizer.input' = \"[2, 4]\": expected [*, 3]"),
                       embplan::error);
  matrix bad = matrix::Zero(2, 2);
  bad(1, 1) = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(normalizer::fit(bad),
                       doctest::Contains("'normalizer.fit.input[1, 1]' = inf"), embplan::error);
}

TEST_CASE("normalizer refuses an absurd width before allocating, naming it") {
  CHECK_THROWS_WITH_AS(normalizer(Eigen::Index{1} << 31),
                       doctest::Contains("'normalizer.features' = 2147483648: expected at most"),
                       embplan::error);
}
