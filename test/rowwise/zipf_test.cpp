#include "embplan/rowwise/zipf.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"

using embplan::rowwise::zipf_sampler;

namespace {

// Frequencies of ranks 1..n from `draws` samples against the exact law.
double max_abs_error(std::int64_t n, double s, std::size_t draws, std::uint64_t seed) {
  const auto ids = embplan::rowwise::zipf_ids(n, s, draws, seed);
  std::vector<double> freq(static_cast<std::size_t>(n), 0.0);
  for (auto id : ids) {
    REQUIRE(id >= 0);
    REQUIRE(id < n);
    freq[static_cast<std::size_t>(id)] += 1.0;
  }
  double norm = 0.0;
  for (std::int64_t k = 1; k <= n; ++k)
    norm += std::pow(static_cast<double>(k), -s);
  double err = 0.0;
  for (std::int64_t k = 1; k <= n; ++k) {
    const double p = std::pow(static_cast<double>(k), -s) / norm;
    err = std::max(err, std::abs(freq[static_cast<std::size_t>(k - 1)] / double(draws) - p));
  }
  return err;
}

}  // namespace

TEST_CASE("Zipf sampler matches the truncated law for s = 1.3, 1 and 0") {
  CHECK(max_abs_error(50, 1.3, 200'000, 1) < 0.004);
  CHECK(max_abs_error(50, 1.0, 200'000, 2) < 0.004);
  CHECK(max_abs_error(10, 0.0, 100'000, 3) < 0.006);  // uniform
}

TEST_CASE("Zipf IDs are deterministic in the seed, and ID 0 is the hottest") {
  const auto a = embplan::rowwise::zipf_ids(20'000, 1.3, 5'000, 7);
  const auto b = embplan::rowwise::zipf_ids(20'000, 1.3, 5'000, 7);
  const auto c = embplan::rowwise::zipf_ids(20'000, 1.3, 5'000, 8);
  CHECK(a == b);
  CHECK(a != c);
  std::size_t zeros = 0;
  for (auto id : a)
    zeros += id == 0 ? 1 : 0;
  // P(rank 1) = 1 / H(20000, 1.3) ~ 0.27.
  CHECK(zeros > 1'200);
  CHECK(zeros < 1'550);
}

TEST_CASE("Zipf over a huge table stays in range") {
  const zipf_sampler z(2'000'000'000, 1.05);
  embplan::rng g(3);
  for (int i = 0; i < 10'000; ++i) {
    const auto id = z(g);
    REQUIRE(id >= 0);
    REQUIRE(id < 2'000'000'000);
  }
}

TEST_CASE("bad input: a negative or NaN exponent, no rows") {
  CHECK_THROWS_WITH_AS(zipf_sampler(10, -0.5), doctest::Contains("field 'zipf.exponent' = -0.5"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(zipf_sampler(10, std::numeric_limits<double>::quiet_NaN()),
                       doctest::Contains("field 'zipf.exponent' = nan"), embplan::error);
  CHECK_THROWS_WITH_AS(zipf_sampler(0, 1.0), doctest::Contains("field 'zipf.rows' = 0"),
                       embplan::error);
}
