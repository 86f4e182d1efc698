#pragma once
// One seeded train / validation / test split of n items, used wherever data is
// held out:
//   - DreamShard's two disjoint pool halves (§4.1, tools/gen_tasks.py: shuffle
//     the table indices, the first half, rounded down, trains): fractions
//     0.5 / 0, each part in ascending order (data/tasks.hpp);
//   - the 80/10/10 split of cost records (NeuroShard App. C; learn/train.hpp,
//     learn/train_comm.hpp): each part in shuffled order, which is the order
//     mini-batches draw from.
// The split is a Fisher-Yates shuffle of 0..n-1 driven by
// rng(derive_seed(seed, stream)); the first floor(train_fraction * n) indices
// train, the next floor(validation_fraction * n) validate, the rest test.
// Same (n, options), same split, on every machine: bundled models record which
// half of the pool trained them, so this must never change for a given input.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data {

enum class split_order {
  shuffled,   // in the order of the seeded permutation
  ascending,  // each part sorted, e.g. a pool half in pool order
};

struct split_options {
  double train_fraction = 0.8;
  double validation_fraction = 0.1;  // the test part is what remains
  std::uint64_t seed = 0;
  // Independent splits of one seed use different streams (derive_seed).
  std::uint64_t stream = 0;
  split_order order = split_order::shuffled;
};

struct index_split {
  std::vector<std::size_t> train, validation, test;
};

// Splits the indices 0..n-1; together the three parts hold each index once.
// Throws embplan::error for a fraction outside [0, 1] (NaN included), or
// fractions that add up to more than 1, naming the field and value.
inline index_split seeded_split(std::size_t n, const split_options& o) {
  const auto is_fraction = [](double f) { return f >= 0.0 && f <= 1.0; };
  if (!is_fraction(o.train_fraction)) {
    embplan::detail::fail("split.train_fraction", o.train_fraction, "a fraction in [0, 1]");
  }
  if (!is_fraction(o.validation_fraction)) {
    embplan::detail::fail("split.validation_fraction", o.validation_fraction,
                          "a fraction in [0, 1]");
  }
  if (o.train_fraction + o.validation_fraction > 1.0) {
    embplan::detail::fail("split.validation_fraction", o.validation_fraction,
                          "at most 1 - train_fraction (train_fraction = " +
                              embplan::detail::to_display(o.train_fraction) + ")");
  }

  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  rng gen(derive_seed(o.seed, o.stream));
  for (std::size_t i = n; i > 1; --i)
    std::swap(order[i - 1], order[static_cast<std::size_t>(gen.below(i))]);

  // floor(0.5 * n) == n / 2 exactly for every n below 2^53.
  const auto n_train =
      std::min(n, static_cast<std::size_t>(o.train_fraction * static_cast<double>(n)));
  const auto n_val = std::min(
      n - n_train, static_cast<std::size_t>(o.validation_fraction * static_cast<double>(n)));
  const auto at = [&](std::size_t k) { return order.begin() + static_cast<std::ptrdiff_t>(k); };
  index_split out{.train = std::vector<std::size_t>(at(0), at(n_train)),
                  .validation = std::vector<std::size_t>(at(n_train), at(n_train + n_val)),
                  .test = std::vector<std::size_t>(at(n_train + n_val), order.end())};
  if (o.order == split_order::ascending) {
    std::sort(out.train.begin(), out.train.end());
    std::sort(out.validation.begin(), out.validation.end());
    std::sort(out.test.begin(), out.test.end());
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::data
