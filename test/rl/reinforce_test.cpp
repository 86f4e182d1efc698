#include "embplan/rl/reinforce.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/rl/ragged_softmax.hpp"
#include "nn/gradient_check.hpp"
#include "support/message_of.hpp"

using embplan::nn::matrix;
using embplan::rl::reinforce_options;
using embplan::test::message_of;

namespace {

// Five steps with 3, 1, 4, 2, 3 candidate actions, slots interleaved.
struct batch {
  std::vector<std::int64_t> group_of = {0, 2, 0, 1, 2, 2, 3, 0, 2, 3, 4, 4, 4};
  Eigen::Index groups = 5;
  std::vector<std::int64_t> actions = {7, 3, 4, 9, 11};
  std::vector<double> rewards = {-3.0, -3.0, -1.5, -1.5, -2.25};
};

}  // namespace

TEST_CASE("normalised rewards: mean 0, unbiased std 1; a single reward is 0") {
  std::vector<double> r;
  embplan::rl::normalise_rewards(std::vector<double>{1.0, 2.0, 3.0, 6.0}, r);
  // mean 3, unbiased std sqrt((4 + 1 + 0 + 9) / 3)
  const double sd = std::sqrt(14.0 / 3.0);
  CHECK(r[0] == doctest::Approx(-2.0 / (sd + 1e-8)));
  CHECK(r[3] == doctest::Approx(3.0 / (sd + 1e-8)));
  embplan::rl::normalise_rewards(std::vector<double>{-4.0}, r);
  CHECK(r == std::vector<double>{0.0});
  // Equal rewards carry no signal: all 0, no NaN.
  embplan::rl::normalise_rewards(std::vector<double>{2.0, 2.0, 2.0}, r);
  CHECK(r == std::vector<double>{0.0, 0.0, 0.0});
}

TEST_CASE("reinforce loss by hand: one step of two actions plus a second step") {
  // Group 0: slots 0, 1 with logits 0, log 3 (pi = 1/4, 3/4); group 1: slot 2 alone.
  matrix z(3, 1);
  z << 0.0f, static_cast<float>(std::log(3.0)), 0.7f;
  const std::vector<std::int64_t> group = {0, 0, 1};
  const std::vector<std::int64_t> actions = {0, 2};
  const std::vector<double> rewards = {1.0, 0.0};  // normalised: +-1/sqrt(2)
  const double rn = 1.0 / (std::sqrt(0.5) + 1e-8) * 0.5;
  const double w = 0.1;
  const double neg_h0 = 0.25 * std::log(0.25) + 0.75 * std::log(0.75);
  const double expected = (-std::log(0.25) * rn + 0.0) / 2.0 + w * (neg_h0 + 0.0) / 2.0;
  matrix dz;
  const double loss = embplan::rl::reinforce_loss(z, group, 2, actions, rewards,
                                                  {.entropy_weight = w, .max_grad_norm = 0.0}, &dz);
  CHECK(loss == doctest::Approx(expected).epsilon(1e-6));
  // dL/dz_0 = (rn (p0 - 1) + w p0 (log p0 - negH)) / 2
  CHECK(dz(0, 0) ==
        doctest::Approx((rn * (0.25 - 1.0) + w * 0.25 * (std::log(0.25) - neg_h0)) / 2.0)
            .epsilon(1e-5));
  CHECK(dz(2, 0) == 0.0f);  // a certain step has no gradient
}

TEST_CASE("reinforce loss gradient w.r.t. the logits matches central differences") {
  const batch b;
  for (const double w : {0.0, 0.001, 0.5}) {
    INFO("entropy_weight = " << w);
    embplan::rng gen(11);
    matrix z = nn_test::random_matrix(13, 1, gen, 2.0);
    const reinforce_options o{.entropy_weight = w};
    matrix dz;
    embplan::rl::reinforce_loss(z, b.group_of, b.groups, b.actions, b.rewards, o, &dz);
    const matrix numeric = nn_test::numeric_gradient(
        z,
        [&] {
          return embplan::rl::reinforce_loss(z, b.group_of, b.groups, b.actions, b.rewards, o,
                                             nullptr);
        },
        1e-2f);
    CHECK(nn_test::relative_error(dz, numeric) < 1e-3);
  }
}

TEST_CASE("reinforce: better-than-average actions get more probability after a step") {
  // Gradient descent on the loss raises log pi of the actions with a positive
  // normalised reward and lowers the others.
  const batch b;
  embplan::rng gen(2);
  matrix z = nn_test::random_matrix(13, 1, gen);
  matrix dz;
  matrix lp0;
  matrix lp1;
  embplan::rl::ragged_log_softmax(z, b.group_of, b.groups, lp0);
  embplan::rl::reinforce_loss(z, b.group_of, b.groups, b.actions, b.rewards,
                              {.entropy_weight = 0.0}, &dz);
  z -= 0.1f * dz;
  embplan::rl::ragged_log_softmax(z, b.group_of, b.groups, lp1);
  std::vector<double> rn;
  embplan::rl::normalise_rewards(b.rewards, rn);
  for (std::size_t g = 0; g < b.actions.size(); ++g) {
    if (g == 1) continue;  // a single-action step cannot move
    const auto a = b.actions[g];
    if (rn[g] > 0) CHECK(lp1(a, 0) > lp0(a, 0));
    if (rn[g] < 0) CHECK(lp1(a, 0) < lp0(a, 0));
  }
}

TEST_CASE("clip_policy_gradient: off by default, else clip_grad_norm_") {
  embplan::nn::linear g(3, 2);
  g.weight.setConstant(3.0f);  // norm sqrt(6 * 9) = sqrt(54)
  embplan::nn::linear copy = g;
  CHECK(embplan::rl::clip_policy_gradient(copy, {}) == doctest::Approx(std::sqrt(54.0)));
  CHECK(copy.weight == g.weight);
  const double norm = embplan::rl::clip_policy_gradient(copy, {.max_grad_norm = 1.0});
  CHECK(norm == doctest::Approx(std::sqrt(54.0)));
  CHECK(std::sqrt(static_cast<double>(copy.weight.squaredNorm())) ==
        doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("reinforce: bad input names the field and the value") {
  const batch b;
  const matrix z = matrix::Zero(13, 1);
  const auto loss = [&](auto group, Eigen::Index groups, auto actions, auto rewards,
                        reinforce_options o, const matrix& logits) {
    return message_of(
        [&] { embplan::rl::reinforce_loss(logits, group, groups, actions, rewards, o, nullptr); });
  };
  const reinforce_options o{};

  auto msg = loss(b.group_of, b.groups, std::vector<std::int64_t>{7, 3, 4}, b.rewards, o, z);
  CHECK(msg.find("reinforce.actions.size' = 3") != std::string::npos);
  msg = loss(b.group_of, b.groups, b.actions, std::vector<double>{1.0}, o, z);
  CHECK(msg.find("reinforce.rewards.size' = 1") != std::string::npos);
  // An action outside its group, and one outside every group.
  msg = loss(b.group_of, b.groups, std::vector<std::int64_t>{7, 3, 4, 0, 11}, b.rewards, o, z);
  CHECK(msg.find("reinforce.actions[3]' = 0") != std::string::npos);
  msg = loss(b.group_of, b.groups, std::vector<std::int64_t>{7, 3, 4, 9, 13}, b.rewards, o, z);
  CHECK(msg.find("reinforce.actions[4]' = 13") != std::string::npos);
  msg = loss(b.group_of, b.groups, std::vector<std::int64_t>{-1, 3, 4, 9, 11}, b.rewards, o, z);
  CHECK(msg.find("reinforce.actions[0]' = -1") != std::string::npos);
  // Rewards must be finite.
  auto r = b.rewards;
  r[2] = std::numeric_limits<double>::quiet_NaN();
  msg = loss(b.group_of, b.groups, b.actions, r, o, z);
  CHECK(msg.find("reinforce.rewards[2]' = nan") != std::string::npos);
  // Groups: out of range, empty.
  auto gr = b.group_of;
  gr[4] = 7;
  msg = loss(gr, b.groups, b.actions, b.rewards, o, z);
  CHECK(msg.find("reinforce.group_of[4]' = 7") != std::string::npos);
  msg = loss(b.group_of, 6, std::vector<std::int64_t>{7, 3, 4, 9, 11, 0},
             std::vector<double>(6, 1.0), o, z);
  CHECK(msg.find("reinforce.group_size[5]' = 0") != std::string::npos);
  // NaN logits.
  matrix bad = z;
  bad(5, 0) = std::numeric_limits<float>::quiet_NaN();
  msg = loss(b.group_of, b.groups, b.actions, b.rewards, o, bad);
  CHECK(msg.find("reinforce.logits[5, 0]' = nan") != std::string::npos);
  // Options.
  msg = loss(b.group_of, b.groups, b.actions, b.rewards, {.entropy_weight = -0.5}, z);
  CHECK(msg.find("reinforce_options.entropy_weight' = -0.5") != std::string::npos);
  msg = loss(b.group_of, b.groups, b.actions, b.rewards,
             {.entropy_weight = std::numeric_limits<double>::infinity()}, z);
  CHECK(msg.find("reinforce_options.entropy_weight' = inf") != std::string::npos);
  msg = loss(b.group_of, b.groups, b.actions, b.rewards, {.max_grad_norm = -1.0}, z);
  CHECK(msg.find("reinforce_options.max_grad_norm' = -1") != std::string::npos);
  embplan::nn::linear g(2, 2);
  msg = message_of([&] { embplan::rl::clip_policy_gradient(g, {.max_grad_norm = -2.0}); });
  CHECK(msg.find("reinforce_options.max_grad_norm' = -2") != std::string::npos);
}
