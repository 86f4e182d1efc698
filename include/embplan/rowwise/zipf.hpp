#pragma once
// Zipf-distributed row IDs, the heavy-tailed popularity of the embedding-tables
// chapter (§4; the §5 demo draws numpy's zipf(1.3)). P(rank k) ~ k^-s over the
// ranks 1..n, truncated to n and renormalised (numpy's sampler is unbounded and
// the demo clamps the tail onto row N-1; a truncated law keeps the tail
// spread). ID = rank - 1, so ID 0 is the hottest.
//
// Sampling is Hörmann & Derflinger's rejection-inversion ("Rejection-inversion
// to generate variates from monotone discrete distributions", ACM TOMACS 1996),
// as in Apache Commons RNG: O(1) memory and expected O(1) time for any n (a
// billion-row table needs no CDF table), any exponent s >= 0 (s = 0 is
// uniform; s = 1 is handled by the series expansions of the helpers).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

class zipf_sampler {
 public:
  // Throws embplan::error for n < 1 or an exponent that is negative or not finite.
  zipf_sampler(std::int64_t n, double exponent) : n_(n), exponent_(exponent) {
    if (n < 1) embplan::detail::fail("zipf.rows", n, "a positive number of ranks");
    if (!std::isfinite(exponent) || exponent < 0.0) {
      embplan::detail::fail("zipf.exponent", exponent, "a finite exponent >= 0");
    }
    h_integral_x1_ = h_integral(1.5) - 1.0;
    h_integral_n_ = h_integral(static_cast<double>(n) + 0.5);
    s_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
  }

  std::int64_t rows() const noexcept { return n_; }
  double exponent() const noexcept { return exponent_; }

  // A rank in [1, n].
  std::int64_t rank(rng& g) const noexcept {
    for (;;) {
      const double u = h_integral_n_ + g.uniform() * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      auto k = static_cast<std::int64_t>(x + 0.5);
      if (k < 1) {
        k = 1;
      } else if (k > n_) {
        k = n_;
      }
      const auto kd = static_cast<double>(k);
      if (kd - x <= s_ || u >= h_integral(kd + 0.5) - h(kd)) return k;
    }
  }

  // An ID in [0, n): rank - 1.
  std::int64_t operator()(rng& g) const noexcept { return rank(g) - 1; }

 private:
  // H(x) = integral of h = x^-s, shifted so that it is continuous in s at 1.
  double h_integral(double x) const noexcept {
    const double log_x = std::log(x);
    return helper2((1.0 - exponent_) * log_x) * log_x;
  }
  double h(double x) const noexcept { return std::exp(-exponent_ * std::log(x)); }
  double h_integral_inverse(double x) const noexcept {
    double t = x * (1.0 - exponent_);
    if (t < -1.0) t = -1.0;  // guards rounding near the lower end
    return std::exp(helper1(t) * x);
  }
  // log1p(x) / x and expm1(x) / x, with their series near 0.
  static double helper1(double x) noexcept {
    if (std::abs(x) > 1e-8) return std::log1p(x) / x;
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) noexcept {
    if (std::abs(x) > 1e-8) return std::expm1(x) / x;
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
  }

  std::int64_t n_ = 1;
  double exponent_ = 1.0;
  double h_integral_x1_ = 0.0;
  double h_integral_n_ = 0.0;
  double s_ = 0.0;
};

// `count` Zipf(exponent) IDs over `rows` rows from embplan::rng(seed).
inline std::vector<std::int64_t> zipf_ids(std::int64_t rows, double exponent, std::size_t count,
                                          std::uint64_t seed) {
  const zipf_sampler z(rows, exponent);
  rng g(seed);
  std::vector<std::int64_t> ids(count);
  for (auto& id : ids)
    id = z(g);
  return ids;
}

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
