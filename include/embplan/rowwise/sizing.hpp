#pragma once
// Memory tiers and sizes (embedding-tables chapter §1 and §6):
//  - table bytes N * d * b at fp32 / fp16 / int8, plus optimizer state (SGD
//    none, Adam two fp32 moments per weight, row-wise Adagrad one fp32 per
//    row; core/table_spec.hpp's block_bytes), and the shards a per-server
//    budget needs (§2: shard bytes ~ N * d * b / S; a row is never split);
//  - the share of lookups a cache of the c hottest rows in fast memory serves,
//    from a trace (§6: the skew that hurts training is what makes a small
//    cache of hot rows effective);
//  - quotient-remainder compression (§6 and its exercise): ID i reads row
//    i mod m of one table and row floor(i / m) of another, (m + ceil(N/m)) d b
//    bytes instead of N d b, minimised near m = sqrt(N).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

namespace detail {

inline void check_shape(std::int64_t rows, std::int32_t dim) {
  if (rows <= 0) embplan::detail::fail("rows", rows, "a positive number of rows");
  if (dim <= 0) embplan::detail::fail("dim", dim, "a positive dimension");
}

}  // namespace detail

// Bytes of one row with its optimizer state (block_bytes is linear in rows).
inline std::uint64_t row_bytes(std::int32_t dim, dtype t, optimizer opt = optimizer::none) {
  detail::check_shape(1, dim);
  return block_bytes(1, static_cast<std::uint64_t>(dim), t, opt);
}

inline std::uint64_t rowwise_table_bytes(std::int64_t rows, std::int32_t dim, dtype t,
                                         optimizer opt = optimizer::none) {
  detail::check_shape(rows, dim);
  return block_bytes(static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(dim), t, opt);
}

// Rows that fit a per-server budget, and the servers the table then needs.
struct shard_sizing {
  std::uint64_t rows_per_shard = 0;
  std::uint64_t shards = 0;
};

// A budget smaller than one row is an error naming the budget and the row size.
inline shard_sizing shards_needed(std::int64_t rows, std::int32_t dim, dtype t, optimizer opt,
                                  std::uint64_t budget_bytes) {
  detail::check_shape(rows, dim);
  const std::uint64_t row = row_bytes(dim, t, opt);
  if (budget_bytes < row) {
    embplan::detail::fail("budget_bytes", budget_bytes,
                          "at least one row (" + std::to_string(row) + " bytes at dim " +
                              std::to_string(dim) + ", " + std::string(to_string(t)) +
                              ", optimizer " + std::string(to_string(opt)) + ")");
  }
  shard_sizing out;
  out.rows_per_shard = budget_bytes / row;
  const auto n = static_cast<std::uint64_t>(rows);
  out.shards = n / out.rows_per_shard + (n % out.rows_per_shard != 0 ? 1 : 0);
  return out;
}

// Lookups a cache of the `cache_rows` hottest rows serves, and their share of
// all lookups (freq from id_frequency; 0 for an empty trace).
inline std::uint64_t cache_hits(std::span<const id_hits> freq, std::uint64_t cache_rows) noexcept {
  std::uint64_t hits = 0;
  for (std::size_t h = 0; h < freq.size() && h < cache_rows; ++h)
    hits += freq[h].hits;
  return hits;
}

inline double cache_hit_fraction(std::span<const id_hits> freq, std::uint64_t cache_rows) noexcept {
  std::uint64_t total = 0;
  for (const auto& f : freq)
    total += f.hits;
  if (total == 0) return 0.0;
  return static_cast<double>(cache_hits(freq, cache_rows)) / static_cast<double>(total);
}

struct qr_sizing {
  std::int64_t m = 1;                  // remainder table rows (ID mod m)
  std::int64_t quotient_rows = 1;      // ceil(N / m) (floor(ID / m))
  std::uint64_t full_bytes = 0;        // N d b
  std::uint64_t compressed_bytes = 0;  // (m + ceil(N/m)) d b
  double ratio = 1.0;                  // full / compressed
  // Two distinct IDs drawn uniformly from [0, N) share their remainder row:
  // sum over residues c of n_c (n_c - 1) / (N (N - 1)), about 1/m.
  double remainder_collision_probability = 0.0;
};

inline qr_sizing quotient_remainder(std::int64_t rows, std::int32_t dim, dtype t, std::int64_t m) {
  detail::check_shape(rows, dim);
  if (m < 1 || m > rows) {
    embplan::detail::fail("m", m,
                          "a remainder-table size in [1, rows = " + std::to_string(rows) + "]");
  }
  qr_sizing out;
  out.m = m;
  out.quotient_rows = rows / m + (rows % m != 0 ? 1 : 0);
  const auto d = static_cast<std::uint64_t>(dim);
  out.full_bytes = block_bytes(static_cast<std::uint64_t>(rows), d, t);
  out.compressed_bytes = block_bytes(
      static_cast<std::uint64_t>(m) + static_cast<std::uint64_t>(out.quotient_rows), d, t);
  out.ratio = static_cast<double>(out.full_bytes) / static_cast<double>(out.compressed_bytes);
  if (rows > 1) {
    // r residues hold q + 1 IDs, m - r hold q.
    const double q = static_cast<double>(rows / m);
    const double r = static_cast<double>(rows % m);
    const double n = static_cast<double>(rows);
    const double pairs = r * (q + 1.0) * q + (static_cast<double>(m) - r) * q * (q - 1.0);
    out.remainder_collision_probability = pairs / (n * (n - 1.0));
  }
  return out;
}

// m = ceil(sqrt(N)): it minimises m + ceil(N/m) (the minimum is ceil(2 sqrt(N)),
// checked against brute force in the tests) and, of the minimisers, gives
// the two tables the closest sizes (ceil(N/m) <= m).
inline qr_sizing optimal_quotient_remainder(std::int64_t rows, std::int32_t dim, dtype t) {
  detail::check_shape(rows, dim);
  auto m = static_cast<std::int64_t>(std::sqrt(static_cast<double>(rows)));
  while (m > 1 && (m - 1) * (m - 1) >= rows)
    --m;
  while (m * m < rows)
    ++m;
  return quotient_remainder(rows, dim, t, m);
}

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
