#pragma once
// A small, fully specified random number generator. std::normal_distribution
// and friends are implementation-defined, so the same seed would give another
// pool on another standard library; embplan promises "same seed, same result"
// everywhere, so it brings its own distributions on top of xoshiro256**.

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>

#include "embplan/core/checked.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// SplitMix64 (Steele, Lea, Flood 2014): seeds xoshiro and derives stream seeds.
constexpr std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A seed for an independent sub-stream, e.g. per task or per table.
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) noexcept {
  std::uint64_t s = seed ^ (0xd1b54a32d192ed03ULL * (stream + 1));
  return splitmix64(s);
}

// xoshiro256** 1.0 (Blackman & Vigna). Satisfies std::uniform_random_bit_generator.
class rng {
 public:
  using result_type = std::uint64_t;

  constexpr explicit rng(std::uint64_t seed = 0) noexcept {
    std::uint64_t sm = seed;
    for (auto& word : s_)
      word = splitmix64(sm);
  }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return ~result_type{0}; }

  constexpr result_type operator()() noexcept {
    const std::uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }

  double uniform(double lo, double hi) noexcept { return lo + (hi - lo) * uniform(); }

  // Uniform integer in [0, n) without modulo bias (Lemire 2019); 0 when n == 0.
  std::uint64_t below(std::uint64_t n) noexcept {
    if (n == 0) return 0;
    detail::uint128 m = static_cast<detail::uint128>((*this)()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<detail::uint128>((*this)()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  // Uniform integer in [lo, hi] (both inclusive); lo when hi <= lo.
  std::int64_t between(std::int64_t lo, std::int64_t hi) noexcept {
    if (hi <= lo) return lo;
    return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
  }

  // Standard normal by the Box-Muller transform (no cached second value, so the
  // stream position depends only on the number of calls).
  double normal() noexcept {
    double u1 = uniform();
    while (u1 <= 0.0)
      u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

  // Gamma(shape, 1) by Marsaglia & Tsang (2000); shape < 1 by the boost u^(1/a).
  // A shape that is not a positive finite number gives 0.
  double gamma(double shape) noexcept {
    if (!(shape > 0.0) || !std::isfinite(shape)) return 0.0;
    if (shape < 1.0) {
      double u = uniform();
      while (u <= 0.0)
        u = uniform();
      return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x = normal();
      double v = 1.0 + c * x;
      if (v <= 0.0) continue;
      v = v * v * v;
      const double u = uniform();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
      if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
    }
  }

  // Dirichlet(alpha) written into out (same length as alpha).
  void dirichlet(std::span<const double> alpha, std::span<double> out) noexcept {
    double sum = 0.0;
    for (std::size_t i = 0; i < alpha.size(); ++i) {
      out[i] = alpha[i] > 0.0 ? gamma(alpha[i]) : 0.0;
      sum += out[i];
    }
    if (sum <= 0.0) return;
    for (std::size_t i = 0; i < alpha.size(); ++i)
      out[i] /= sum;
  }

 private:
  std::array<std::uint64_t, 4> s_{};
};

}  // namespace embplan::inline EMBPLAN_ABI
