#pragma once
// The steps of index-trace generation (data/trace.hpp): how often each unique
// row occurs in a batch, which rows those are, and how lookups fall into bags.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/detail/reuse_bins.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data::detail {

// Splits `total` into parts proportional to `weights` (largest remainder, ties
// to the lower index), so the parts sum to `total` exactly.
inline std::vector<std::int64_t> apportion(std::int64_t total, std::span<const double> weights) {
  std::vector<std::int64_t> parts(weights.size(), 0);
  double sum = 0.0;
  for (const double w : weights)
    sum += w;
  if (sum <= 0.0 || total <= 0) return parts;
  std::vector<std::pair<double, std::size_t>> remainders;
  std::int64_t given = 0;
  for (std::size_t k = 0; k < weights.size(); ++k) {
    const double exact = static_cast<double>(total) * weights[k] / sum;
    parts[k] = static_cast<std::int64_t>(std::floor(exact));
    given += parts[k];
    remainders.emplace_back(exact - static_cast<double>(parts[k]), k);
  }
  // Zero weights have zero remainders and sort last, so they never get one.
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; given < total && i < remainders.size(); ++i) {
    if (weights[remainders[i].second] <= 0.0) continue;
    ++parts[remainders[i].second];
    ++given;
  }
  return parts;
}

// Moves sum(counts) by `delta` (either sign), count i staying within
// [lo(i), hi(i)]: first in proportion to the room each has (so the shape of
// the counts inside a bin is kept), then one at a time, starting at a random
// unit. Returns what could not be moved.
template <class Lo, class Hi>
std::int64_t shift_counts(std::span<std::int64_t> counts, std::int64_t delta, Lo lo, Hi hi,
                          rng& g) {
  const std::size_t n = counts.size();
  if (delta == 0 || n == 0) return delta;
  const bool up = delta > 0;
  const auto room = [&](std::size_t i) { return up ? hi(i) - counts[i] : counts[i] - lo(i); };
  double total_room = 0.0;
  for (std::size_t i = 0; i < n; ++i)
    total_room += static_cast<double>(room(i));
  std::int64_t left = up ? delta : -delta;
  if (total_room <= 0.0) return delta;
  const double share = std::min(1.0, static_cast<double>(left) / total_room);
  for (std::size_t i = 0; i < n && left > 0; ++i) {
    const auto step =
        std::min({room(i), left,
                  static_cast<std::int64_t>(std::floor(share * static_cast<double>(room(i))))});
    counts[i] += up ? step : -step;
    left -= step;
  }
  // What the floors left over: fewer than one per unit with room, up to rounding.
  const std::size_t start = static_cast<std::size_t>(g.below(n));
  for (bool moved = true; left > 0 && moved;) {
    moved = false;
    for (std::size_t j = 0; j < n && left > 0; ++j) {
      const std::size_t i = (start + j) % n;
      if (room(i) > 0) {
        counts[i] += up ? 1 : -1;
        --left;
        moved = true;
      }
    }
  }
  return up ? left : -left;
}

// Occurrence counts of the unique rows of one table's batch: their histogram
// over the reuse bins follows `hist` (fractions of unique rows) and they sum
// to `lookups` exactly. There are about lookups / mean_reuse(hist) of them,
// at most max_unique (the table's rows) and at most `lookups`.
//
// Each bin gets its share of the unique rows (largest remainder) and each of
// those a count drawn uniformly within the bin; the sum is then moved onto
// `lookups` inside the bins. Only when that cannot work — the bins' integer
// ranges cannot reach `lookups` after rounding (a bin whose share is a
// fraction of one row but whose counts are most of the lookups), or the table
// has fewer rows than the histogram needs unique indices (a small table cannot
// show the reuse of a big one) — the hottest rows take up the difference and
// leave their bins, so that as few rows as possible do.
inline std::vector<std::int64_t> counts_for_unique(const reuse_histogram& hist,
                                                   std::int64_t lookups, std::int64_t unique,
                                                   rng& g) {
  const auto per_bin = apportion(unique, hist);
  std::vector<std::int64_t> counts;
  std::vector<std::uint8_t> bin;  // bin of counts[i]
  counts.reserve(static_cast<std::size_t>(unique));
  bin.reserve(static_cast<std::size_t>(unique));
  std::int64_t sum = 0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    const auto r = reuse_bin_counts(k);
    for (std::int64_t i = 0; i < per_bin[k]; ++i) {
      const std::int64_t c = g.between(r.lo, r.hi);
      counts.push_back(c);
      bin.push_back(static_cast<std::uint8_t>(k));
      sum += c;
    }
  }
  std::int64_t left = shift_counts(
      counts, lookups - sum, [&](std::size_t i) { return reuse_bin_counts(bin[i]).lo; },
      [&](std::size_t i) { return reuse_bin_counts(bin[i]).hi; }, g);
  if (counts.empty()) return counts;  // an all-zero histogram
  // Out of the bins, moving as few rows as possible: the hottest ones, last
  // in `counts` (they are grouped by bin, coldest first).
  if (left > 0) counts.back() += left;
  for (std::size_t i = counts.size(); left < 0 && i-- > 0;) {
    const std::int64_t step = std::min(counts[i] - 1, -left);
    counts[i] -= step;
    left += step;
  }
  return counts;
}

// L1 distance between the reuse histogram of `counts` and `hist` (normalised).
inline double counts_l1(std::span<const std::int64_t> counts, const reuse_histogram& hist) {
  reuse_histogram got{};
  for (const auto c : counts)
    got[reuse_bin_of(static_cast<std::uint64_t>(c))] += 1.0;
  double hist_sum = 0.0;
  for (const double v : hist)
    hist_sum += v;
  double d = 0.0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k)
    d += std::abs(got[k] / static_cast<double>(counts.size()) - hist[k] / hist_sum);
  return d;
}

// Below this many unique rows, rounding a histogram onto whole rows is coarse
// enough that the number of unique rows is chosen by trying each nearby one.
inline constexpr std::int64_t unique_search_limit = 256;

inline std::vector<std::int64_t> occurrence_counts(const reuse_histogram& hist,
                                                   std::int64_t lookups, std::int64_t max_unique,
                                                   rng& g) {
  if (lookups <= 0 || max_unique <= 0) return {};
  const double reuse = mean_reuse(hist);
  const std::int64_t most = std::min(lookups, max_unique);
  const auto unique =
      std::clamp<std::int64_t>(std::llround(static_cast<double>(lookups) / reuse), 1, most);
  if (unique > unique_search_limit) return counts_for_unique(hist, lookups, unique, g);
  // Few rows: the count of unique rows (from half to twice the estimate) whose
  // counts come closest to the histogram, the estimate's nearest on ties.
  // Every candidate draws from the same sub-stream, so the choice is
  // deterministic.
  const rng base(g());
  std::vector<std::int64_t> best;
  double best_l1 = 0.0;
  std::int64_t best_gap = 0;
  for (std::int64_t u = std::max<std::int64_t>(1, unique / 2); u <= std::min(most, 2 * unique);
       ++u) {
    rng candidate_g = base;
    auto counts = counts_for_unique(hist, lookups, u, candidate_g);
    const double l1 = counts_l1(counts, hist);
    const std::int64_t gap = u > unique ? u - unique : unique - u;
    if (best.empty() || l1 < best_l1 - 1e-12 || (l1 < best_l1 + 1e-12 && gap < best_gap)) {
      best = std::move(counts);
      best_l1 = l1;
      best_gap = gap;
    }
  }
  return best;
}

// Fisher-Yates with the library's generator (std::shuffle's use of the
// generator is implementation-defined, so it would break "same seed, same
// trace" across standard libraries). Below 2^32 elements each 64-bit draw
// serves two swaps: Lemire's unbiased bounded integers at 32 bits.
template <class T>
void shuffle_in_place(std::span<T> v, rng& g) noexcept {
  std::size_t i = v.size();
  for (; i > 0xffffffffu; --i)
    std::swap(v[i - 1], v[static_cast<std::size_t>(g.below(i))]);
  std::uint64_t bits = 0;
  bool have_half = false;
  for (; i > 1; --i) {
    const auto range = static_cast<std::uint32_t>(i);
    std::uint64_t m = 0;
    for (;;) {
      if (!have_half) bits = g();
      const auto x = static_cast<std::uint32_t>(have_half ? bits >> 32 : bits);
      have_half = !have_half;
      m = static_cast<std::uint64_t>(x) * range;
      const auto low = static_cast<std::uint32_t>(m);
      if (low < range && low < (0u - range) % range) continue;
      break;
    }
    std::swap(v[i - 1], v[static_cast<std::size_t>(m >> 32)]);
  }
}

// `k` distinct rows of [0, rows), in random order. A bitmap (rows bits) when
// k is a sizeable share of rows, drawing the complement when k > rows / 2;
// otherwise sorted draws with replacement, redrawn until distinct, in O(k)
// memory — a 2e9-row table costs no 250 MB bitmap.
inline std::vector<std::int64_t> distinct_rows(std::int64_t rows, std::int64_t k, rng& g) {
  std::vector<std::int64_t> out;
  if (k <= 0 || rows <= 0) return out;
  k = std::min(k, rows);
  out.reserve(static_cast<std::size_t>(k));
  const auto n = static_cast<std::uint64_t>(rows);
  if (rows / 64 <= k) {
    std::vector<std::uint64_t> marked((n + 63) / 64, 0);
    const bool complement = k > rows / 2;
    const std::int64_t draw = complement ? rows - k : k;
    for (std::int64_t drawn = 0; drawn < draw;) {
      const std::uint64_t r = g.below(n);
      std::uint64_t& word = marked[r / 64];
      const std::uint64_t bit = std::uint64_t{1} << (r % 64);
      if ((word & bit) != 0) continue;
      word |= bit;
      ++drawn;
      if (!complement) out.push_back(static_cast<std::int64_t>(r));
    }
    if (complement) {
      for (std::uint64_t r = 0; r < n; ++r)
        if ((marked[r / 64] >> (r % 64) & 1u) == 0) out.push_back(static_cast<std::int64_t>(r));
    }
  } else {
    while (static_cast<std::int64_t>(out.size()) < k) {
      const auto missing = k - static_cast<std::int64_t>(out.size());
      for (std::int64_t i = 0; i < missing; ++i)
        out.push_back(static_cast<std::int64_t>(g.below(n)));
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    }
  }
  // Sorted or complement output would tie a row's id to its count.
  shuffle_in_place(std::span<std::int64_t>(out), g);
  return out;
}

// The lookups of a batch, counts[i] copies of rows[i], in uniformly random
// order. A plain Fisher-Yates over a 100 MB trace misses the cache on every
// swap; Rao-Sandelius' method keeps it fast and uniform: each lookup goes to
// one of 256 buckets at random, then each bucket (a few hundred KB for the
// largest MetaSyn table) is shuffled by Fisher-Yates where it sits.
inline std::vector<std::int64_t> shuffled_lookups(std::span<const std::int64_t> rows,
                                                  std::span<const std::int64_t> counts,
                                                  std::int64_t lookups, rng& g) {
  const auto n = static_cast<std::size_t>(lookups);
  std::vector<std::int64_t> out(n);
  constexpr std::size_t small = std::size_t{1} << 16;
  if (n <= small) {
    std::size_t p = 0;
    for (std::size_t i = 0; i < counts.size(); ++i)
      for (std::int64_t c = 0; c < counts[i]; ++c)
        out[p++] = rows[i];
    shuffle_in_place(std::span<std::int64_t>(out), g);
    return out;
  }
  constexpr std::size_t buckets = 256;
  std::vector<std::uint8_t> bucket(n);
  std::vector<std::size_t> next(buckets + 1, 0);
  for (std::size_t j = 0; j < n; j += 8) {
    std::uint64_t bits = g();
    for (std::size_t b = j; b < std::min(n, j + 8); ++b, bits >>= 8) {
      bucket[b] = static_cast<std::uint8_t>(bits & 0xffu);
      ++next[bucket[b] + 1];
    }
  }
  for (std::size_t b = 1; b <= buckets; ++b)
    next[b] += next[b - 1];
  std::vector<std::size_t> begin(next.begin(), next.end());
  std::size_t j = 0;
  for (std::size_t i = 0; i < counts.size(); ++i)
    for (std::int64_t c = 0; c < counts[i]; ++c)
      out[next[bucket[j++]]++] = rows[i];
  for (std::size_t b = 0; b < buckets; ++b)
    shuffle_in_place(std::span<std::int64_t>(out.data() + begin[b], begin[b + 1] - begin[b]), g);
  return out;
}

// B + 1 offsets of `lookups` lookups in `bags` bags: B - 1 cut points uniform
// on [0, lookups], sorted. Bag lengths are the spacings: mean lookups / B,
// roughly geometric (many empty bags and a long tail, as in real DLRM
// traces), summing to `lookups` exactly.
inline std::vector<std::int64_t> bag_offsets(std::int64_t lookups, std::int64_t bags, rng& g) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(bags) + 1, 0);
  if (lookups <= 0) return offsets;
  for (std::size_t b = 1; b < offsets.size() - 1; ++b)
    offsets[b] = static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(lookups) + 1));
  offsets.back() = lookups;
  std::sort(offsets.begin() + 1, offsets.end() - 1);
  return offsets;
}

}  // namespace embplan::inline EMBPLAN_ABI::data::detail
