#include "embplan/data/split.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "embplan/data/tasks.hpp"
#include "support/message_of.hpp"

namespace {

using embplan::data::index_split;
using embplan::data::seeded_split;
using embplan::data::split_order;
using embplan::test::message_of;
using ids = std::vector<std::size_t>;

bool split_contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The three parts together, sorted.
ids joined(const index_split& s) {
  ids all = s.train;
  all.insert(all.end(), s.validation.begin(), s.validation.end());
  all.insert(all.end(), s.test.begin(), s.test.end());
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace

TEST_CASE("seeded_split: every index in exactly one part, parts of the asked sizes") {
  for (const std::size_t n : {0, 1, 2, 3, 10, 11, 100, 857}) {
    for (const double train : {0.0, 0.5, 0.8, 1.0}) {
      for (const double validation : {0.0, 0.1}) {
        if (train + validation > 1.0) continue;
        CAPTURE(n);
        CAPTURE(train);
        CAPTURE(validation);
        const auto s = seeded_split(
            n,
            {.train_fraction = train, .validation_fraction = validation, .seed = n, .stream = 3});
        ids expected(n);
        std::iota(expected.begin(), expected.end(), std::size_t{0});
        CHECK(joined(s) == expected);  // disjoint and covering
        const auto floor_of = [&](double f) {
          return static_cast<std::size_t>(std::floor(f * static_cast<double>(n)));
        };
        CHECK(s.train.size() == floor_of(train));
        CHECK(s.validation.size() == floor_of(validation));
        CHECK(s.test.size() == n - s.train.size() - s.validation.size());
      }
    }
  }
  const auto s = seeded_split(100, {});
  CHECK(s.train.size() == 80);  // the default is 80/10/10
  CHECK(s.validation.size() == 10);
  CHECK(s.test.size() == 10);
}

TEST_CASE("seeded_split: same seed and stream, same split; another, another") {
  const embplan::data::split_options o{.seed = 7, .stream = 11};
  const auto a = seeded_split(200, o);
  const auto b = seeded_split(200, o);
  CHECK(a.train == b.train);
  CHECK(a.validation == b.validation);
  CHECK(a.test == b.test);

  auto other_seed = o;
  other_seed.seed = 8;
  CHECK(seeded_split(200, other_seed).train != a.train);
  auto other_stream = o;
  other_stream.stream = 12;
  CHECK(seeded_split(200, other_stream).train != a.train);

  // Shuffled parts keep the permutation's order; ascending parts are the same
  // sets, sorted.
  CHECK(!std::is_sorted(a.train.begin(), a.train.end()));
  auto sorted = o;
  sorted.order = split_order::ascending;
  const auto c = seeded_split(200, sorted);
  ids train = a.train;
  std::sort(train.begin(), train.end());
  CHECK(c.train == train);
  CHECK(std::is_sorted(c.validation.begin(), c.validation.end()));
  CHECK(std::is_sorted(c.test.begin(), c.test.end()));
}

// Bundled models record which pool half trained them and golden tests depend
// on the trainers' splits: these values were printed by the code before it
// became seeded_split, and must not change.
TEST_CASE("seeded_split: the pool halves and the trainers' splits are pinned") {
  using embplan::data::detail::split_indices;
  CHECK(split_indices(10, 0).first == ids{4, 5, 6, 8, 9});
  CHECK(split_indices(10, 0).second == ids{0, 1, 2, 3, 7});
  CHECK(split_indices(11, 42).first == ids{2, 4, 7, 8, 9});
  CHECK(split_indices(11, 42).second == ids{0, 1, 3, 5, 6, 10});

  // learn/train.hpp (stream 0x5917) and learn/train_comm.hpp (stream 0xc033).
  const auto compute = seeded_split(11, {.seed = 0, .stream = 0x5917});
  CHECK(compute.train == ids{0, 6, 4, 9, 1, 8, 2, 5});
  CHECK(compute.validation == ids{7});
  CHECK(compute.test == ids{3, 10});
  const auto comm = seeded_split(10, {.seed = 42, .stream = 0xc033});
  CHECK(comm.train == ids{6, 0, 7, 4, 5, 2, 9, 3});
  CHECK(comm.validation == ids{1});
  CHECK(comm.test == ids{8});

  // The halves are the 50/0 split, in pool order.
  for (const std::uint64_t seed : {0u, 1u, 99u}) {
    const auto halves = split_indices(857, seed);
    const auto s = seeded_split(857, {.train_fraction = 0.5,
                                      .validation_fraction = 0.0,
                                      .seed = seed,
                                      .stream = embplan::data::detail::split_stream,
                                      .order = split_order::ascending});
    CHECK(s.train == halves.first);
    CHECK(s.test == halves.second);
    CHECK(s.validation.empty());
  }
}

TEST_CASE("seeded_split: bad fractions name the field and the value") {
  const auto bad = [](double train, double validation) {
    return message_of([&] {
      (void)seeded_split(10, {.train_fraction = train, .validation_fraction = validation});
    });
  };
  CHECK(split_contains(bad(-0.5, 0.1),
                       "field 'split.train_fraction' = -0.5: expected a fraction in [0, 1]"));
  CHECK(split_contains(bad(1.5, 0.0), "field 'split.train_fraction' = 1.5: expected a fraction"));
  CHECK(split_contains(bad(std::numeric_limits<double>::quiet_NaN(), 0.1),
                       "field 'split.train_fraction' = nan"));
  CHECK(split_contains(bad(0.5, -1.0),
                       "field 'split.validation_fraction' = -1: expected a fraction in [0, 1]"));
  CHECK(split_contains(bad(0.8, 0.3),
                       "field 'split.validation_fraction' = 0.29999999999999999: "
                       "expected at most 1 - train_fraction (train_fraction = 0.8"));
  CHECK(bad(0.9, 0.1) == "no error");  // exactly 1: no test part
}
