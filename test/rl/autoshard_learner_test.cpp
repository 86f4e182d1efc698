#include "embplan/rl/autoshard_learner.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/init.hpp"
#include "support/message_of.hpp"

namespace autoshard_learner_test {

using embplan::nn::matrix;

embplan::nn::autoshard_net small_random_net(std::uint64_t seed) {
  embplan::nn::autoshard_net net(21, 1, 1);
  embplan::rng gen(seed);
  for (auto& [name, p] : net.named_parameters())
    for (Eigen::Index i = 0; i < p->size(); ++i)
      p->data()[i] = static_cast<float>(gen.uniform(-0.2, 0.2));
  return net;
}

// A 3-step episode on 2 shards that puts every table on `shard`: its
// inputs, actions, the current policy's log-probabilities (on-policy) and a
// final reward.
embplan::rl::autoshard_trajectory all_on(const embplan::nn::autoshard_net& net, std::int64_t shard,
                                         double reward) {
  embplan::rl::autoshard_trajectory tr;
  auto& ep = tr.inputs;
  ep.tables.resize(3, 21);
  for (Eigen::Index i = 0; i < ep.tables.size(); ++i)
    ep.tables.data()[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)));
  ep.state_other.resize(3, 1);
  ep.actions_other.resize(6, 1);
  ep.held_tables.resize(3, 21);
  ep.held_tables.setZero();
  Eigen::Index held = 0;
  for (Eigen::Index t = 0; t < 3; ++t) {
    ep.state_other(t, 0) = static_cast<float>(3 - t) / 3.0f;
    ep.action_count.push_back(2);
    for (std::int64_t s = 0; s < 2; ++s) {
      ep.held_count.push_back(s == shard ? t : 0);
      ep.actions_other(2 * t + s, 0) = s == shard ? static_cast<float>(t) : 0.0f;
    }
    for (Eigen::Index i = 0; i < t; ++i)
      ep.held_tables.row(held++) = ep.tables.row(i);
    tr.action.push_back(shard);
    tr.reward.push_back(t == 2 ? reward : 0.0);
  }
  ep.held_tables.conservativeResize(held, 21);
  embplan::rl::autoshard_tape tape;
  embplan::rl::autoshard_forward(net, ep, tape);
  for (Eigen::Index t = 0; t < 3; ++t) {
    const double a = tape.logits(2 * t + shard, 0);
    const double b = tape.logits(2 * t + 1 - shard, 0);
    tr.behaviour_logp.push_back(a - std::log(std::exp(a) + std::exp(b)));
  }
  return tr;
}

}  // namespace autoshard_learner_test

TEST_CASE("autoshard learner: rewarded placements become likelier, values move to the returns") {
  using namespace autoshard_learner_test;
  auto net = small_random_net(3);
  embplan::nn::adam opt({.lr = 3e-3});
  const auto rewarded = all_on(net, 0, 1.0);
  const auto unrewarded = all_on(net, 1, 0.0);
  // Step 0 is symmetric (both shards empty, probability 1/2 whatever the
  // weights); at the last step shard 0 holds two tables.
  CHECK(rewarded.behaviour_logp[0] == doctest::Approx(std::log(0.5)));
  const auto first_logp = rewarded.behaviour_logp[2];
  std::vector<embplan::rl::autoshard_trajectory> batch{rewarded, unrewarded};
  embplan::rl::autoshard_learner_stats first, last;
  for (int i = 0; i < 60; ++i) {
    // Behaviour log-probabilities from the policy before this update (the
    // actors lag the learner by one step).
    batch[0] = all_on(net, 0, 1.0);
    batch[1] = all_on(net, 1, 0.0);
    last = embplan::rl::autoshard_learner_step(net, opt, batch);
    if (i == 0) first = last;
  }
  CHECK(first.steps == 6);
  CHECK(std::isfinite(last.loss));
  const auto after = all_on(net, 0, 1.0);
  MESSAGE("log pi(shard 0) at the last step: " << first_logp << " -> " << after.behaviour_logp[2]
                                               << "; value loss " << first.baseline << " -> "
                                               << last.baseline);
  CHECK(after.behaviour_logp[2] > first_logp + 0.1);  // shard 0 at the last step: likelier
  CHECK(last.baseline < first.baseline);              // values closer to the returns
  // The cost head is not on this loss: untouched.
  const auto fresh = small_random_net(3);
  CHECK(net.c_fc_0.weight == fresh.c_fc_0.weight);
  CHECK(net.c_fc_1.bias == fresh.c_fc_1.bias);
  CHECK_FALSE(net.p_fc_0.weight == fresh.p_fc_0.weight);
}

TEST_CASE("autoshard learner: the same network, optimizer and batch give the same network") {
  using namespace autoshard_learner_test;
  auto a = small_random_net(5);
  auto b = small_random_net(5);
  embplan::nn::adam oa, ob;
  const std::vector<embplan::rl::autoshard_trajectory> batch{all_on(a, 0, 0.7), all_on(a, 1, 0.2)};
  for (int i = 0; i < 3; ++i) {
    const auto sa = embplan::rl::autoshard_learner_step(a, oa, batch, {.max_grad_norm = 0.5});
    const auto sb = embplan::rl::autoshard_learner_step(b, ob, batch, {.max_grad_norm = 0.5});
    CHECK(sa.loss == sb.loss);
    CHECK(sa.grad_norm == sb.grad_norm);
  }
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    CAPTURE(pa[i].first);
    CHECK(*pa[i].second == *pb[i].second);
  }
}

TEST_CASE("autoshard learner: bad options and an empty batch name the field") {
  using namespace autoshard_learner_test;
  using embplan::test::message_of;
  auto net = small_random_net(1);
  embplan::nn::adam opt;
  const std::vector<embplan::rl::autoshard_trajectory> batch{all_on(net, 0, 1.0)};
  CHECK(message_of([&] {
          (void)embplan::rl::autoshard_learner_step(net, opt, batch, {.max_grad_norm = -1.0});
        }).find("'autoshard_learner_options.max_grad_norm' = -1") != std::string::npos);
  CHECK(message_of([&] {
          (void)embplan::rl::autoshard_learner_step(
              net, opt, std::span<const embplan::rl::autoshard_trajectory>());
        }).find("'autoshard_learner_step.batch.size' = 0") != std::string::npos);
  auto broken = batch;
  broken[0].action[1] = 5;
  CHECK(message_of([&] {
          (void)embplan::rl::autoshard_learner_step(net, opt, broken);
        }).find("'impala_episode.action[1]' = 5") != std::string::npos);
}
