#include "embplan/rl/ragged_softmax.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "embplan/core/random.hpp"
#include "nn/gradient_check.hpp"
#include "support/message_of.hpp"

using embplan::nn::matrix;
using embplan::test::message_of;

namespace {

matrix column(std::vector<float> v) {
  matrix m(static_cast<Eigen::Index>(v.size()), 1);
  for (std::size_t i = 0; i < v.size(); ++i)
    m(static_cast<Eigen::Index>(i), 0) = v[i];
  return m;
}

}  // namespace

TEST_CASE("ragged softmax by hand: groups need not be contiguous") {
  // Slots 0, 2, 3 in group 1; slots 1, 4 in group 0.
  const matrix z = column({1.0f, 5.0f, 2.0f, 3.0f, 5.0f});
  const std::vector<std::int64_t> group = {1, 0, 1, 1, 0};
  matrix p;
  embplan::rl::ragged_softmax(z, group, 2, p);
  const double e = std::exp(1.0);
  const double sum = 1.0 + e + e * e;
  CHECK(p(0, 0) == doctest::Approx(1.0 / sum).epsilon(1e-6));
  CHECK(p(2, 0) == doctest::Approx(e / sum).epsilon(1e-6));
  CHECK(p(3, 0) == doctest::Approx(e * e / sum).epsilon(1e-6));
  CHECK(p(1, 0) == doctest::Approx(0.5).epsilon(1e-6));
  CHECK(p(4, 0) == doctest::Approx(0.5).epsilon(1e-6));

  matrix lp;
  embplan::rl::ragged_log_softmax(z, group, 2, lp);
  CHECK(lp(3, 0) == doctest::Approx(2.0 - std::log(sum)).epsilon(1e-6));
  CHECK(lp(1, 0) == doctest::Approx(std::log(0.5)).epsilon(1e-6));

  // A single-slot group is certain; large logits do not overflow.
  const matrix big = column({1000.0f, -1000.0f, 999.0f});
  embplan::rl::ragged_softmax(big, std::vector<std::int64_t>{0, 1, 0}, 2, p);
  CHECK(p(1, 0) == 1.0f);
  CHECK(p(0, 0) == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));

  std::vector<double> neg_entropy;
  embplan::rl::ragged_log_softmax(z, group, 2, lp);
  embplan::rl::ragged_neg_entropy(lp, group, 2, neg_entropy);
  CHECK(neg_entropy[0] == doctest::Approx(std::log(0.5)).epsilon(1e-6));
  const double h1 =
      (1.0 * std::log(1.0 / sum) + e * std::log(e / sum) + e * e * std::log(e * e / sum)) / sum;
  CHECK(neg_entropy[1] == doctest::Approx(h1).epsilon(1e-6));
}

TEST_CASE("ragged log-softmax gradient matches central differences") {
  embplan::rng gen(7);
  matrix z = nn_test::random_matrix(9, 1, gen, 2.0);
  const std::vector<std::int64_t> group = {2, 0, 0, 1, 2, 2, 0, 3, 2};
  const matrix w = nn_test::random_matrix(9, 1, gen);
  matrix lp;
  embplan::rl::ragged_log_softmax(z, group, 4, lp);
  matrix dz;
  embplan::rl::ragged_log_softmax_backward(lp, group, 4, w, dz);
  const matrix numeric = nn_test::numeric_gradient(
      z,
      [&] {
        matrix q;
        embplan::rl::ragged_log_softmax(z, group, 4, q);
        return nn_test::weighted_sum(w, q);
      },
      1e-2f);
  CHECK(nn_test::relative_error(dz, numeric) < 1e-3);
  // The single-slot group 3 gets no gradient: its log-probability is always 0.
  CHECK(dz(7, 0) == 0.0f);
}

TEST_CASE("ragged argmax: the first maximum per group; sampling follows the probabilities") {
  const matrix z = column({0.5f, 2.0f, 2.0f, -1.0f, 3.0f});
  const std::vector<std::int64_t> group = {0, 0, 0, 1, 1};
  std::vector<std::int64_t> a;
  embplan::rl::ragged_argmax(z, group, 2, a);
  CHECK(a == std::vector<std::int64_t>{1, 4});

  // Two groups, 20000 draws each: empirical frequencies within 0.01 of pi.
  matrix p;
  embplan::rl::ragged_softmax(z, group, 2, p);
  embplan::rng gen(123);
  std::vector<double> count(5, 0.0);
  const int draws = 20000;
  int outside = 0;  // draws that left their group
  for (int i = 0; i < draws; ++i) {
    embplan::rl::ragged_sample(z, group, 2, gen, a);
    outside += group[static_cast<std::size_t>(a[0])] != 0;
    outside += group[static_cast<std::size_t>(a[1])] != 1;
    count[static_cast<std::size_t>(a[0])] += 1.0;
    count[static_cast<std::size_t>(a[1])] += 1.0;
  }
  CHECK(outside == 0);
  for (Eigen::Index s = 0; s < 5; ++s)
    CHECK(count[static_cast<std::size_t>(s)] / draws == doctest::Approx(p(s, 0)).epsilon(0.01));

  // Same seed, same draws.
  embplan::rng g1(5);
  embplan::rng g2(5);
  std::vector<std::int64_t> b;
  for (int i = 0; i < 50; ++i) {
    embplan::rl::ragged_sample(z, group, 2, g1, a);
    embplan::rl::ragged_sample(z, group, 2, g2, b);
    CHECK(a == b);
  }
}

TEST_CASE("ragged softmax: bad input names the field and the value") {
  const matrix z = column({0.0f, 1.0f, 2.0f});
  matrix out;
  const std::vector<std::int64_t> ok = {0, 1, 1};

  // One group id per slot.
  auto msg = message_of([&] {
    embplan::rl::ragged_log_softmax(z, std::vector<std::int64_t>{0, 1}, 2, out);
  });
  CHECK(msg.find("ragged_softmax.group_of.size") != std::string::npos);
  CHECK(msg.find("= 2") != std::string::npos);

  // A group id out of range.
  msg = message_of([&] {
    embplan::rl::ragged_log_softmax(z, std::vector<std::int64_t>{0, 5, 1}, 2, out);
  });
  CHECK(msg.find("ragged_softmax.group_of[1]") != std::string::npos);
  CHECK(msg.find("= 5") != std::string::npos);
  msg = message_of([&] {
    embplan::rl::ragged_log_softmax(z, std::vector<std::int64_t>{0, -1, 1}, 2, out);
  });
  CHECK(msg.find("ragged_softmax.group_of[1]' = -1") != std::string::npos);

  // An empty group (no legal action).
  msg = message_of([&] { embplan::rl::ragged_log_softmax(z, ok, 3, out); });
  CHECK(msg.find("ragged_softmax.group_size[2]' = 0") != std::string::npos);

  // No group at all.
  msg = message_of(
      [&] { embplan::rl::ragged_log_softmax(matrix(0, 1), std::vector<std::int64_t>{}, 0, out); });
  CHECK(msg.find("ragged_softmax.groups' = 0") != std::string::npos);

  // NaN and infinite logits.
  matrix bad = z;
  bad(2, 0) = std::numeric_limits<float>::quiet_NaN();
  msg = message_of([&] { embplan::rl::ragged_log_softmax(bad, ok, 2, out); });
  CHECK(msg.find("ragged_softmax.logits[2, 0]' = nan") != std::string::npos);
  bad(2, 0) = std::numeric_limits<float>::infinity();
  msg = message_of([&] { embplan::rl::ragged_softmax(bad, ok, 2, out); });
  CHECK(msg.find("ragged_softmax.logits[2, 0]' = inf") != std::string::npos);

  // Logits are one column.
  msg = message_of([&] { embplan::rl::ragged_log_softmax(matrix::Zero(3, 2), ok, 2, out); });
  CHECK(msg.find("ragged_softmax.logits' = \"[3, 2]\"") != std::string::npos);

  // The backward's upstream gradient has the log-probabilities' shape.
  msg = message_of(
      [&] { embplan::rl::ragged_log_softmax_backward(z, ok, 2, matrix::Zero(2, 1), out); });
  CHECK(msg.find("ragged_log_softmax_backward.output_grad' = \"[2, 1]\"") != std::string::npos);

  // The argmax and the sampler check the same way.
  std::vector<std::int64_t> a;
  msg = message_of([&] { embplan::rl::ragged_argmax(z, ok, 3, a); });
  CHECK(msg.find("ragged_argmax.group_size[2]' = 0") != std::string::npos);
  embplan::rng gen(1);
  msg = message_of([&] { embplan::rl::ragged_sample(bad, ok, 2, gen, a); });
  CHECK(msg.find("logits[2, 0]' = inf") != std::string::npos);
}
