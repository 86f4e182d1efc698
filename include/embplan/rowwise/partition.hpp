#pragma once
// Row partitioners: which shard holds a row of a table split by rows, and at
// which local row. Nothing is materialised per row, so a billion-row table
// costs O(S) memory; every map is computed on the fly.
//   hash_partition   shard(id) = (id * A) mod S, the chapter's multiplicative
//                    hash (embedding-tables chapter §2 and the §5 demo, A =
//                    2654435761). With gcd(A, S) = 1 the shard of id depends
//                    on id mod S alone and is a bijection of residues, so
//                    shard s holds exactly the IDs id = c_s (mod S), i.e.
//                    ceil or floor of N/S rows, and local row = id / S.
//   range_partition  contiguous row ranges [b_s, b_{s+1}), even or uneven
//                    (proportional to device memory); what a plan records.

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

struct row_location {
  std::uint32_t shard = 0;
  std::int64_t local = 0;  // row inside the shard's storage

  friend bool operator==(const row_location&, const row_location&) = default;
};

// What the load analysis, the gather and the replication need of a partition.
template <class P>
concept row_partitioner = std::copy_constructible<P> &&
    requires(const P& p, std::int64_t id, std::uint32_t s) {
  { p.rows() } -> std::same_as<std::int64_t>;
  { p.shards() } -> std::same_as<std::uint32_t>;
  { p.shard_of(id) } -> std::same_as<std::uint32_t>;
  { p.locate(id) } -> std::same_as<row_location>;
  { p.rows_in(s) } -> std::same_as<std::int64_t>;
  { p.global_id(s, id) } -> std::same_as<std::int64_t>;
};

namespace detail {

inline void check_shard_count(std::int64_t rows, std::uint64_t shards) {
  if (rows <= 0) embplan::detail::fail("rows", rows, "a positive number of rows");
  if (shards == 0 || shards > static_cast<std::uint64_t>(rows) ||
      shards > std::uint64_t{0xffffffff}) {
    embplan::detail::fail("shards", shards,
                          "a shard count in [1, rows = " + std::to_string(rows) + "]");
  }
}

// Inverse of a modulo m (gcd(a, m) = 1), by the extended Euclidean algorithm.
inline std::uint64_t inverse_mod(std::uint64_t a, std::uint64_t m) noexcept {
  if (m == 1) return 0;
  __extension__ typedef __int128 int128;
  int128 t = 0, new_t = 1, r = m, new_r = a % m;
  while (new_r != 0) {
    const auto q = r / new_r;
    const auto t2 = t - q * new_t;
    t = new_t;
    new_t = t2;
    const auto r2 = r - q * new_r;
    r = new_r;
    new_r = r2;
  }
  if (t < 0) t += m;
  return static_cast<std::uint64_t>(t);
}

}  // namespace detail

class hash_partition {
 public:
  static constexpr std::uint64_t knuth_multiplier = 2654435761ULL;  // the chapter's A

  // Throws embplan::error for rows <= 0, shards outside [1, rows], or a
  // multiplier sharing a factor with the shard count (then the hash reaches
  // only every gcd-th shard and the others stay empty).
  hash_partition(std::int64_t rows, std::uint64_t shards,
                 std::uint64_t multiplier = knuth_multiplier)
      : rows_(rows), shards_(static_cast<std::uint32_t>(shards)), multiplier_(multiplier) {
    detail::check_shard_count(rows, shards);
    if (std::gcd(multiplier, shards) != 1) {
      embplan::detail::fail("multiplier", multiplier,
                            "a multiplier coprime to the shard count " + std::to_string(shards) +
                                " (gcd " + std::to_string(std::gcd(multiplier, shards)) +
                                " would leave shards empty)");
    }
    a_mod_ = multiplier % shards;
    a_inv_ = detail::inverse_mod(a_mod_, shards);
    if ((shards & (shards - 1)) == 0) {  // S = 2^b: masks and shifts, no division
      mask_ = shards - 1;
      shift_ = std::countr_zero(shards);
    }
  }

  std::int64_t rows() const noexcept { return rows_; }
  std::uint32_t shards() const noexcept { return shards_; }
  std::uint64_t multiplier() const noexcept { return multiplier_; }

  // (id * A) mod S, computed as ((id mod S) * (A mod S)) mod S: no overflow.
  std::uint32_t shard_of(std::int64_t id) const noexcept {
    if (mask_ != 0 || shards_ == 1) {
      return static_cast<std::uint32_t>((static_cast<std::uint64_t>(id) * a_mod_) & mask_);
    }
    const auto s = static_cast<std::uint64_t>(shards_);
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(id) % s) * a_mod_ % s);
  }

  row_location locate(std::int64_t id) const noexcept {
    if (mask_ != 0 || shards_ == 1) return {shard_of(id), id >> shift_};
    return {shard_of(id), id / static_cast<std::int64_t>(shards_)};
  }

  // The residue class mod S that shard s holds.
  std::int64_t residue_of(std::uint32_t s) const noexcept {
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(s) * a_inv_ %
                                     static_cast<std::uint64_t>(shards_));
  }

  std::int64_t rows_in(std::uint32_t s) const noexcept {
    const auto c = residue_of(s);
    const auto n = static_cast<std::int64_t>(shards_);
    return c < rows_ ? (rows_ - c + n - 1) / n : 0;
  }

  std::int64_t global_id(std::uint32_t s, std::int64_t local) const noexcept {
    return local * static_cast<std::int64_t>(shards_) + residue_of(s);
  }

 private:
  std::int64_t rows_ = 0;
  std::uint32_t shards_ = 1;
  std::uint64_t multiplier_ = knuth_multiplier;
  std::uint64_t a_mod_ = 0;
  std::uint64_t a_inv_ = 0;
  std::uint64_t mask_ = 0;  // S - 1 when S is a power of two (else 0)
  int shift_ = 0;           // log2(S) then
};
static_assert(row_partitioner<hash_partition>);

// Rows split as close to proportional to `weights` as whole rows allow:
// floor(rows * w_i / W) each, the remainder one row apiece to the largest
// fractional parts (ties: lower index). Exact in 128-bit arithmetic.
inline std::vector<std::int64_t> proportional_row_counts(std::int64_t rows,
                                                         std::span<const std::uint64_t> weights) {
  if (rows < 0) embplan::detail::fail("rows", rows, "a number of rows >= 0");
  if (weights.empty()) embplan::detail::fail("weights.size", 0, "at least one weight");
  embplan::detail::uint128 total = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0) {
      embplan::detail::fail(embplan::detail::path("weights", i), 0, "a positive weight");
    }
    total += weights[i];
  }
  std::vector<std::int64_t> counts(weights.size());
  std::vector<embplan::detail::uint128> remainder(weights.size());
  std::int64_t assigned = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const embplan::detail::uint128 num = static_cast<embplan::detail::uint128>(rows) * weights[i];
    counts[i] = static_cast<std::int64_t>(num / total);
    remainder[i] = num % total;
    assigned += counts[i];
  }
  std::vector<std::size_t> order(weights.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  for (std::size_t k = 0; assigned < rows; ++k, ++assigned)
    ++counts[order[k % order.size()]];
  return counts;
}

class range_partition {
 public:
  // Shard s holds rows [bounds[s], bounds[s+1]); bounds start at 0, never
  // decrease and end at rows. Empty shards are allowed (a tiny weight).
  explicit range_partition(std::vector<std::int64_t> bounds) : bounds_(std::move(bounds)) {
    if (bounds_.size() < 2 || bounds_.size() - 1 > std::uint64_t{0xffffffff}) {
      embplan::detail::fail("bounds.size", bounds_.size(), "at least 2 (one shard)");
    }
    if (bounds_.front() != 0) embplan::detail::fail("bounds[0]", bounds_.front(), "0");
    for (std::size_t i = 1; i < bounds_.size(); ++i) {
      if (bounds_[i] < bounds_[i - 1]) {
        embplan::detail::fail(embplan::detail::path("bounds", i), bounds_[i],
                              "bounds that never decrease");
      }
    }
    if (bounds_.back() <= 0) embplan::detail::fail("rows", bounds_.back(), "a positive count");
  }

  // S shards of ceil/floor(rows / S) rows.
  static range_partition even(std::int64_t rows, std::uint64_t shards) {
    detail::check_shard_count(rows, shards);
    const std::vector<std::uint64_t> ones(shards, 1);
    return proportional(rows, ones);
  }

  // Shard sizes proportional to weights (e.g. each device's free memory).
  static range_partition proportional(std::int64_t rows, std::span<const std::uint64_t> weights) {
    detail::check_shard_count(rows, weights.size());
    const auto counts = proportional_row_counts(rows, weights);
    std::vector<std::int64_t> bounds(counts.size() + 1, 0);
    std::partial_sum(counts.begin(), counts.end(), bounds.begin() + 1);
    return range_partition(std::move(bounds));
  }

  std::int64_t rows() const noexcept { return bounds_.back(); }
  std::uint32_t shards() const noexcept { return static_cast<std::uint32_t>(bounds_.size() - 1); }
  std::int64_t row_begin(std::uint32_t s) const noexcept { return bounds_[s]; }
  std::int64_t row_end(std::uint32_t s) const noexcept { return bounds_[s + 1]; }
  std::int64_t rows_in(std::uint32_t s) const noexcept { return bounds_[s + 1] - bounds_[s]; }

  // The last shard whose begin is <= id (skipping empty shards): O(log S).
  std::uint32_t shard_of(std::int64_t id) const noexcept {
    const auto it = std::upper_bound(bounds_.begin(), bounds_.end() - 1, id);
    return static_cast<std::uint32_t>(it - bounds_.begin() - 1);
  }

  row_location locate(std::int64_t id) const noexcept {
    const auto s = shard_of(id);
    return {s, id - bounds_[s]};
  }

  std::int64_t global_id(std::uint32_t s, std::int64_t local) const noexcept {
    return bounds_[s] + local;
  }

  const std::vector<std::int64_t>& bounds() const noexcept { return bounds_; }

 private:
  std::vector<std::int64_t> bounds_;
};
static_assert(row_partitioner<range_partition>);

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
