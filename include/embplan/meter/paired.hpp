#pragma once
// Paired comparison of planners on measured cost: the plans of one task
// measured back to back and interleaved, and a confidence interval for the
// ratio of one planner's cost to another's over tasks.
//
// measure_interleaved: `rounds` rounds over a task's plans, each round
// pricing every plan once in the order given (A B C A B C ...), so that a
// drift of the machine (another tenant, frequency, cache state) falls on
// every plan alike instead of on whichever was measured last; each plan's
// figure per round is evaluate()'s plan_cost under the meter.
//
// paired_ratio_interval: per task the ratio cost(planner) / cost(baseline)
// of the same task's plans; the summary is their geometric mean with a
// Student-t interval on the log ratios, exp(mean ± t(1 - α/2, n - 1) s/√n).
// Logs because the ratios multiply (a planner 5 % faster on one task and
// 5 % slower on another is not "even" in the arithmetic mean of ratios) and
// their distribution over tasks is near log-normal; a t-interval because the
// tasks are independent draws and n is often small (the interval widens
// accordingly). Its coverage is tested on log-normal ratios of known mean.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter {

namespace detail {

// Continued fraction of the regularised incomplete beta function (modified
// Lentz), for x below (a + 1) / (a + b + 2).
inline double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  constexpr double eps = 1e-15;
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::abs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + num * d;
    if (std::abs(d) < tiny) d = tiny;
    c = 1.0 + num / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + num * d;
    if (std::abs(d) < tiny) d = tiny;
    c = 1.0 + num / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1.0) < eps) break;
  }
  return h;
}

// I_x(a, b), the regularised incomplete beta function.
inline double incomplete_beta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_fraction(a, b, x) / a;
  return 1.0 - front * beta_fraction(b, a, 1.0 - x) / b;
}

}  // namespace detail

// P(T <= t) for Student's t with `df` degrees of freedom.
inline double student_t_cdf(double t, double df) {
  const double tail = 0.5 * detail::incomplete_beta(0.5 * df, 0.5, df / (df + t * t));
  return t >= 0.0 ? 1.0 - tail : tail;
}

// The p-quantile of Student's t with `df` >= 1 degrees of freedom, p in
// (0, 1): bisection on student_t_cdf to a relative 1e-12.
inline double student_t_quantile(double p, std::size_t df) {
  if (!(p > 0.0 && p < 1.0))
    embplan::detail::fail("student_t_quantile.p", p, "a probability in (0, 1)");
  if (df == 0) embplan::detail::fail("student_t_quantile.df", df, "at least 1 degree of freedom");
  if (p < 0.5) return -student_t_quantile(1.0 - p, df);
  const double nu = static_cast<double>(df);
  double lo = 0.0;
  double hi = 1.0;
  while (student_t_cdf(hi, nu) < p)
    hi *= 2.0;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, nu) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

struct ratio_interval {
  std::size_t tasks = 0;                                    // ratios that entered (finite and > 0)
  double ratio = std::numeric_limits<double>::quiet_NaN();  // geometric mean
  double low = std::numeric_limits<double>::quiet_NaN();    // the interval; NaN below 2 tasks
  double high = std::numeric_limits<double>::quiet_NaN();
  double confidence = 0.95;
};

// The geometric mean of `ratios` (NaN, infinite and non-positive ones are
// left out: a task one of the two planners failed) with its `confidence`
// t-interval on the log ratios.
inline ratio_interval paired_ratio_interval(std::span<const double> ratios,
                                            double confidence = 0.95) {
  if (!(confidence > 0.0 && confidence < 1.0))
    embplan::detail::fail("confidence", confidence, "a level in (0, 1), e.g. 0.95");
  std::vector<double> logs;
  logs.reserve(ratios.size());
  for (const double r : ratios)
    if (std::isfinite(r) && r > 0.0) logs.push_back(std::log(r));
  ratio_interval out;
  out.confidence = confidence;
  out.tasks = logs.size();
  if (logs.empty()) return out;
  const double n = static_cast<double>(logs.size());
  double mean = 0.0;
  for (const double l : logs)
    mean += l;
  mean /= n;
  out.ratio = std::exp(mean);
  if (logs.size() < 2) return out;
  double ss = 0.0;
  for (const double l : logs)
    ss += (l - mean) * (l - mean);
  const double se = std::sqrt(ss / (n - 1.0) / n);
  const double t = student_t_quantile(0.5 + 0.5 * confidence, logs.size() - 1);
  out.low = std::exp(mean - t * se);
  out.high = std::exp(mean + t * se);
  return out;
}

// `rounds` interleaved measurements of one task's plans: out[p][r] is plan
// p's plan_cost in round r; round r prices plans 0, 1, ..., P-1 in turn.
template <cost_model Meter>
std::vector<std::vector<plan_cost>> measure_interleaved(const task& t, std::span<const plan> plans,
                                                        const Meter& meter, std::size_t rounds) {
  if (rounds == 0) embplan::detail::fail("rounds", rounds, "at least 1 round");
  std::vector<std::vector<plan_cost>> out(plans.size());
  for (auto& o : out)
    o.reserve(rounds);
  for (std::size_t r = 0; r < rounds; ++r)
    for (std::size_t p = 0; p < plans.size(); ++p)
      out[p].push_back(evaluate(t, plans[p], meter));
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::meter
