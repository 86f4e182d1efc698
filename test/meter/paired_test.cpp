// meter/paired.hpp: Student's t against published quantiles, the paired
// ratio interval's coverage on log-normal ratios of known geometric mean,
// and the interleaved measurement order.
#include "embplan/meter/paired.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"

#include "support/message_of.hpp"

namespace {

using namespace embplan;

// A standard normal draw (Box-Muller on two uniforms of the library's rng).
double paired_test_normal(rng& gen) {
  const double u = gen.uniform(1e-12, 1.0);
  const double v = gen.uniform(0.0, 1.0);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * 3.14159265358979323846 * v);
}

// A cost model that records the order in which plans are priced: each plan
// of the test holds one table on device 0, whose index names the plan.
struct recording_meter {
  std::vector<std::uint32_t>* seen;
  std::string_view name() const noexcept { return "recording"; }
  double shard_cost(const task&, const shard&) const { return 1.0; }
  compute_cost compute(const task&, std::span<const shard> group, std::size_t device) const {
    if (device == 0 && !group.empty()) seen->push_back(group[0].table);
    return {.fwd_ms = 1.0 + static_cast<double>(group.size()), .bwd_ms = 0.0};
  }
  void communication(const task&, std::span<const std::int64_t>, std::span<const double>,
                     std::span<comm_cost> out) const {
    for (auto& c : out)
      c = {};
  }
};
static_assert(cost_model<recording_meter>);

}  // namespace

TEST_CASE("paired: Student's t quantiles as published") {
  // 97.5 % (two-sided 95 %) and 99.5 % quantiles, to nine digits.
  CHECK(meter::student_t_quantile(0.975, 1) == doctest::Approx(12.70620474).epsilon(1e-7));
  CHECK(meter::student_t_quantile(0.975, 2) == doctest::Approx(4.30265273).epsilon(1e-7));
  CHECK(meter::student_t_quantile(0.975, 5) == doctest::Approx(2.570581836).epsilon(1e-7));
  CHECK(meter::student_t_quantile(0.975, 10) == doctest::Approx(2.228138852).epsilon(1e-7));
  CHECK(meter::student_t_quantile(0.975, 30) == doctest::Approx(2.042272456).epsilon(1e-7));
  CHECK(meter::student_t_quantile(0.995, 20) == doctest::Approx(2.845339731).epsilon(1e-7));
  CHECK(meter::student_t_quantile(0.975, 100000) == doctest::Approx(1.9599877).epsilon(1e-6));
  CHECK(meter::student_t_quantile(0.025, 10) == doctest::Approx(-2.228138852).epsilon(1e-7));
  CHECK(meter::student_t_cdf(0.0, 7) == doctest::Approx(0.5));
}

TEST_CASE("paired: the interval covers the true geometric mean about as often as it says") {
  // Ratios exp(N(log 0.97, 0.05^2)): the true geometric mean is 0.97.
  const double truth = 0.97;
  for (const std::size_t n : {5u, 20u}) {
    CAPTURE(n);
    rng gen(n);
    int covered = 0;
    const int trials = 2000;
    double width = 0.0;
    for (int k = 0; k < trials; ++k) {
      std::vector<double> ratios(n);
      for (auto& r : ratios)
        r = std::exp(std::log(truth) + 0.05 * paired_test_normal(gen));
      const auto ci = meter::paired_ratio_interval(ratios);
      REQUIRE(ci.tasks == n);
      CHECK(ci.low < ci.ratio);
      CHECK(ci.ratio < ci.high);
      covered += ci.low <= truth && truth <= ci.high ? 1 : 0;
      width += (ci.high - ci.low) / trials;
    }
    // 95 % nominal; 2000 trials give a standard error of 0.5 %.
    CHECK(covered >= 0.93 * trials);
    CHECK(covered <= 0.97 * trials);
    // Half-width about t * 0.05 / sqrt(n) of the log.
    const double t = meter::student_t_quantile(0.975, n - 1);
    CHECK(width / 2.0 == doctest::Approx(truth * t * 0.05 / std::sqrt(double(n))).epsilon(0.1));
  }
}

TEST_CASE("paired: failed tasks are left out; one task has no interval; bad levels named") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> ratios{1.1, nan, 0.9, std::numeric_limits<double>::infinity(), 0.0};
  const auto ci = meter::paired_ratio_interval(ratios);
  CHECK(ci.tasks == 2);
  CHECK(ci.ratio == doctest::Approx(std::sqrt(1.1 * 0.9)));
  const std::vector<double> one{1.2};
  const auto single = meter::paired_ratio_interval(one);
  CHECK(single.tasks == 1);
  CHECK(single.ratio == doctest::Approx(1.2));
  CHECK(std::isnan(single.low));
  // A planner against itself: ratio 1, interval [1, 1].
  const std::vector<double> same(5, 1.0);
  const auto flat = meter::paired_ratio_interval(same);
  CHECK(flat.ratio == 1.0);
  CHECK(flat.low == 1.0);
  CHECK(flat.high == 1.0);
  const auto msg = test::message_of([&] { meter::paired_ratio_interval(one, 1.5); });
  CHECK(msg.find("confidence") != std::string::npos);
  CHECK(msg.find("1.5") != std::string::npos);
  CHECK(test::message_of([] { meter::student_t_quantile(0.975, 0); }).find("df") !=
        std::string::npos);
}

TEST_CASE("paired: plans are measured interleaved, round by round (A B C A B C)") {
  task t;
  t.cluster = uniform_topology(2);
  for (int i = 0; i < 3; ++i) {
    table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 1000;
    s.dim = 8;
    s.pooling_factor = 1.0;
    t.tables.push_back(s);
  }
  // Plan p: table p on device 0, the others on device 1.
  std::vector<plan> plans(3);
  for (std::size_t p = 0; p < 3; ++p)
    for (std::size_t i = 0; i < 3; ++i)
      plans[p].shards.push_back(whole_table(t, i, i == p ? 0 : 1));
  std::vector<std::uint32_t> seen;
  const auto out = meter::measure_interleaved(t, plans, recording_meter{&seen}, 2);
  CHECK(seen == std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2});
  REQUIRE(out.size() == 3);
  for (const auto& rounds : out) {
    REQUIRE(rounds.size() == 2);
    CHECK(rounds[0].max_ms() == 3.0);  // device 1: two tables, 1 + 2 ms
  }
  const auto msg =
      test::message_of([&] { meter::measure_interleaved(t, plans, recording_meter{&seen}, 0); });
  CHECK(msg.find("rounds") != std::string::npos);
}
