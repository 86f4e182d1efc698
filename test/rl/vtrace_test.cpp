#include "embplan/rl/vtrace.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "support/message_of.hpp"

using embplan::rl::vtrace;
using embplan::rl::vtrace_input;
using embplan::rl::vtrace_options;
using embplan::test::message_of;

namespace {

// Three steps, the episode ending at the last (discount 0 there); the
// learner's policy twice, then half, then as likely as the actor's.
struct three_steps {
  std::vector<double> log_ratio{std::log(2.0), std::log(0.5), 0.0};
  std::vector<double> discount{1.0, 1.0, 0.0};
  std::vector<double> reward{0.0, 0.0, 1.0};
  std::vector<double> value{0.2, 0.4, 0.6};
  vtrace_input input() const { return {log_ratio, discount, reward, value, 0.0}; }
};

}  // namespace

TEST_CASE("vtrace: a hand-computed off-policy trajectory") {
  // rho = c = min(1, ratio) = 1, 0.5, 1.
  // delta_2 = 1 (1 + 0 - 0.6) = 0.4; delta_1 = 0.5 (0 + 0.6 - 0.4) = 0.1;
  // delta_0 = 1 (0 + 0.4 - 0.2) = 0.2.
  // v_2 = 0.6 + 0.4 = 1.0
  // v_1 = 0.4 + 0.1 + c_1 delta_2 = 0.5 + 0.5 x 0.4 = 0.7
  // v_0 = 0.2 + 0.2 + c_0 delta_1 + c_0 c_1 delta_2 = 0.4 + 0.1 + 0.2 = 0.7
  // advantage_s = min(1, ratio) (r_s + gamma_s v_{s+1} - V(x_s)):
  //   1 (0 + 0.7 - 0.2) = 0.5; 0.5 (0 + 1.0 - 0.4) = 0.3; 1 (1 + 0 - 0.6) = 0.4.
  const three_steps t;
  const auto out = vtrace(t.input());
  REQUIRE(out.vs.size() == 3);
  CHECK(out.vs[0] == doctest::Approx(0.7));
  CHECK(out.vs[1] == doctest::Approx(0.7));
  CHECK(out.vs[2] == doctest::Approx(1.0));
  CHECK(out.advantage[0] == doctest::Approx(0.5));
  CHECK(out.advantage[1] == doctest::Approx(0.3));
  CHECK(out.advantage[2] == doctest::Approx(0.4));

  // rho_bar = 2 lets step 0's weight of 2 through: delta_0 = 2 x 0.2 = 0.4,
  // v_0 = 0.2 + 0.4 + 0.1 + 0.2 = 0.9; the traces (c_bar = 1) and the
  // advantages (pg_rho_bar = 1) stay.
  const auto wide = vtrace(t.input(), {.rho_bar = 2.0});
  CHECK(wide.vs[0] == doctest::Approx(0.9));
  CHECK(wide.vs[1] == doctest::Approx(0.7));
  CHECK(wide.advantage[0] == doctest::Approx(0.5));
  // lambda = 0 cuts the traces: v_s = V(x_s) + delta_s.
  const auto cut = vtrace(t.input(), {.lambda = 0.0});
  CHECK(cut.vs[0] == doctest::Approx(0.4));
  CHECK(cut.vs[1] == doctest::Approx(0.5));
  CHECK(cut.vs[2] == doctest::Approx(1.0));
}

TEST_CASE("vtrace: on-policy targets are the n-step returns, episodes cut by discount 0") {
  embplan::rng gen(3);
  for (int trial = 0; trial < 20; ++trial) {
    CAPTURE(trial);
    const std::size_t n = 1 + static_cast<std::size_t>(trial % 9);
    std::vector<double> log_ratio(n, 0.0), discount(n), reward(n), value(n);
    for (std::size_t s = 0; s < n; ++s) {
      discount[s] = gen.uniform(0.0, 1.0) < 0.2 ? 0.0 : 0.9;
      reward[s] = gen.uniform(-1.0, 1.0);
      value[s] = gen.uniform(-2.0, 2.0);
    }
    const double bootstrap = gen.uniform(-2.0, 2.0);
    const auto out = vtrace({log_ratio, discount, reward, value, bootstrap});
    for (std::size_t s = 0; s < n; ++s) {
      // sum_{t >= s} (prod_{s <= i < t} gamma_i) r_t + (prod_{s <= i < n} gamma_i) V(x_n)
      double ret = 0.0;
      double scale = 1.0;
      for (std::size_t k = s; k < n; ++k) {
        ret += scale * reward[k];
        scale *= discount[k];
      }
      ret += scale * bootstrap;
      CHECK(out.vs[s] == doctest::Approx(ret));
      const double next = s + 1 < n ? out.vs[s + 1] : bootstrap;
      CHECK(out.advantage[s] == doctest::Approx(reward[s] + discount[s] * next - value[s]));
    }
  }
}

TEST_CASE("vtrace: bad input names the field and value") {
  three_steps t;
  const auto with = [&](auto edit) {
    three_steps u = t;
    edit(u);
    return message_of([&] { (void)vtrace(u.input()); });
  };
  CHECK(with([](three_steps& u) { u.reward.pop_back(); }).find("'vtrace_input.reward.size' = 2") !=
        std::string::npos);
  CHECK(with([](three_steps& u) {
          u.value.push_back(0.0);
        }).find("'vtrace_input.value.size' = 4") != std::string::npos);
  CHECK(with([](three_steps& u) {
          u.discount[1] = 1.5;
        }).find("'vtrace_input.discount[1]' = 1.5") != std::string::npos);
  CHECK(with([](three_steps& u) {
          u.log_ratio[2] = std::numeric_limits<double>::infinity();
        }).find("'vtrace_input.log_ratio[2]' = inf") != std::string::npos);
  CHECK(with([](three_steps& u) {
          u.reward[0] = std::numeric_limits<double>::quiet_NaN();
        }).find("'vtrace_input.reward[0]' = nan") != std::string::npos);
  CHECK(message_of([&] {
          auto in = t.input();
          in.bootstrap_value = std::numeric_limits<double>::infinity();
          (void)vtrace(in);
        }).find("'vtrace_input.bootstrap_value' = inf") != std::string::npos);
  CHECK(message_of([&] {
          (void)vtrace(t.input(), {.rho_bar = 0.0});
        }).find("'vtrace_options.rho_bar' = 0") != std::string::npos);
  CHECK(message_of([&] {
          (void)vtrace(t.input(), {.c_bar = -1.0});
        }).find("'vtrace_options.c_bar' = -1") != std::string::npos);
  CHECK(message_of([&] {
          (void)vtrace(t.input(), {.rho_bar = 1.0, .c_bar = 2.0});
        }).find("'vtrace_options.c_bar' = 2") != std::string::npos);
  CHECK(message_of([&] {
          (void)vtrace(t.input(), {.lambda = 1.5});
        }).find("'vtrace_options.lambda' = 1.5") != std::string::npos);
  // An empty trajectory is no error: no targets.
  CHECK(vtrace({}).vs.empty());
}
