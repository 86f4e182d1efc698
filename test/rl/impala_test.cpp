#include "embplan/rl/impala.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "support/message_of.hpp"

namespace impala_test {

using embplan::nn::matrix;

// Three steps with 3, 2 and 4 actions; the reward at the end.
struct episode {
  std::vector<std::int64_t> count{3, 2, 4};
  std::vector<std::int64_t> action{2, 0, 1};
  std::vector<double> behaviour{std::log(0.5), std::log(0.25), std::log(0.4)};
  std::vector<double> reward{0.0, 0.0, 0.8};
  embplan::rl::impala_episode view() const { return {count, action, behaviour, reward}; }
};

matrix random_column(Eigen::Index n, embplan::rng& gen) {
  matrix m(n, 1);
  for (Eigen::Index i = 0; i < n; ++i)
    m(i, 0) = static_cast<float>(gen.uniform(-1.0, 1.0));
  return m;
}

}  // namespace impala_test

TEST_CASE("impala_loss: gradients against central differences, targets held") {
  using namespace impala_test;
  embplan::rng gen(12);
  const episode e;
  matrix logits = random_column(9, gen);
  matrix values = random_column(3, gen);
  const embplan::rl::impala_options o{.baseline_cost = 0.5, .entropy_cost = 0.3};
  const auto targets = embplan::rl::impala_vtrace(logits, values, e.view(), o);
  matrix dl, dv;
  const auto parts = embplan::rl::impala_loss(logits, values, e.view(), targets, o, dl, dv);
  CHECK(parts.total == doctest::Approx(parts.policy + 0.5 * parts.baseline - 0.3 * parts.entropy));
  CHECK(parts.entropy > 0.0);
  const auto loss = [&] {
    matrix a, b;
    return embplan::rl::impala_loss(logits, values, e.view(), targets, o, a, b).total;
  };
  const float eps = 1e-3f;
  for (matrix* m : {&logits, &values}) {
    const matrix& g = m == &logits ? dl : dv;
    for (Eigen::Index i = 0; i < m->rows(); ++i) {
      CAPTURE(i);
      const float saved = (*m)(i, 0);
      (*m)(i, 0) = saved + eps;
      const double up = loss();
      (*m)(i, 0) = saved - eps;
      const double down = loss();
      (*m)(i, 0) = saved;
      CHECK(g(i, 0) == doctest::Approx((up - down) / (2.0 * eps)).epsilon(1e-3).scale(1e-3));
    }
  }
}

TEST_CASE("impala_vtrace: on-policy, one reward at the end: every target is the return") {
  using namespace impala_test;
  embplan::rng gen(2);
  episode e;
  const matrix logits = random_column(9, gen);
  const matrix values = random_column(3, gen);
  // The actor's log-probabilities are the learner's: ratios of 1.
  const auto first = embplan::rl::impala_vtrace(logits, values, e.view());
  e.behaviour = first.log_pi;
  const auto t = embplan::rl::impala_vtrace(logits, values, e.view());
  for (std::size_t s = 0; s < 3; ++s) {
    CAPTURE(s);
    CHECK(t.vs[s] == doctest::Approx(0.8));
    CHECK(t.advantage[s] == doctest::Approx(0.8 - values(static_cast<Eigen::Index>(s), 0)));
  }
  // log pi of the taken actions: a log-softmax within each step.
  const double z0 = std::exp(logits(0, 0)) + std::exp(logits(1, 0)) + std::exp(logits(2, 0));
  CHECK(t.log_pi[0] == doctest::Approx(logits(2, 0) - std::log(z0)));
}

TEST_CASE("impala: bad input names the field and value") {
  using namespace impala_test;
  using embplan::test::message_of;
  embplan::rng gen(3);
  const matrix logits = random_column(9, gen);
  const matrix values = random_column(3, gen);
  const auto with = [&](auto edit, const matrix& l, const matrix& v) {
    episode e;
    edit(e);
    return message_of([&] { (void)embplan::rl::impala_vtrace(l, v, e.view()); });
  };
  const auto none = [](episode&) {};
  CHECK(with([](episode& e) { e.action[1] = 2; }, logits, values)
            .find("'impala_episode.action[1]' = 2") != std::string::npos);
  CHECK(with([](episode& e) { e.count[2] = 0; }, logits, values)
            .find("'impala_episode.action_count[2]' = 0") != std::string::npos);
  CHECK(with([](episode& e) { e.behaviour[0] = 0.5; }, logits, values)
            .find("'impala_episode.behaviour_logp[0]' = 0.5") != std::string::npos);
  CHECK(with([](episode& e) { e.reward.pop_back(); }, logits, values)
            .find("'impala_episode.reward.size' = 2") != std::string::npos);
  CHECK(with(none, random_column(8, gen), values).find("'impala.logits.rows' = 8") !=
        std::string::npos);
  CHECK(with(none, logits, random_column(4, gen)).find("'impala.values.rows' = 4") !=
        std::string::npos);
  const episode e;
  CHECK(message_of([&] {
          (void)embplan::rl::impala_vtrace(logits, values, e.view(), {.entropy_cost = -1.0});
        }).find("'impala_options.entropy_cost' = -1") != std::string::npos);
  CHECK(message_of([&] {
          (void)embplan::rl::impala_vtrace(logits, values, e.view(), {.gamma = 2.0});
        }).find("'impala_options.gamma' = 2") != std::string::npos);
}
