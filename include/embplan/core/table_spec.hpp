#pragma once
// table_spec: what the planner knows about one embedding table
// (docs/design.md, "The data model"). The reuse histogram has NeuroShard's 17
// bins (bin_0 .. bin_16): the fraction of *unique* indices of a batch whose
// occurrence count falls in (0,1], (1,2], (2,4], ..., (16384,32768], (32768,inf).

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

inline constexpr std::size_t reuse_bin_count = 17;
using reuse_histogram = std::array<double, reuse_bin_count>;

// Upper edge of reuse bin k: 2^k occurrences (the last bin is open-ended).
constexpr double reuse_bin_upper(std::size_t k) noexcept {
  return static_cast<double>(std::uint64_t{1} << k);
}

enum class dtype : std::uint8_t { fp32, fp16, int8 };

constexpr std::uint64_t dtype_bytes(dtype t) noexcept {
  switch (t) {
    case dtype::fp32:
      return 4;
    case dtype::fp16:
      return 2;
    case dtype::int8:
      return 1;
  }
  return 4;
}

constexpr std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::fp32:
      return "fp32";
    case dtype::fp16:
      return "fp16";
    case dtype::int8:
      return "int8";
  }
  return "fp32";
}

inline dtype parse_dtype(std::string_view s, std::string_view field) {
  if (s == "fp32" || s == "float32" || s == "float") return dtype::fp32;
  if (s == "fp16" || s == "float16" || s == "half") return dtype::fp16;
  if (s == "int8") return dtype::int8;
  detail::fail(field, s, "one of \"fp32\", \"fp16\", \"int8\"");
}

// Optimizer state kept next to the weights, which the memory constraint counts.
enum class optimizer : std::uint8_t { none, sgd, adam, rowwise_adagrad };

constexpr std::string_view to_string(optimizer o) noexcept {
  switch (o) {
    case optimizer::none:
      return "none";
    case optimizer::sgd:
      return "sgd";
    case optimizer::adam:
      return "adam";
    case optimizer::rowwise_adagrad:
      return "rowwise_adagrad";
  }
  return "none";
}

inline optimizer parse_optimizer(std::string_view s, std::string_view field) {
  if (s == "none") return optimizer::none;
  if (s == "sgd") return optimizer::sgd;
  if (s == "adam") return optimizer::adam;
  if (s == "rowwise_adagrad") return optimizer::rowwise_adagrad;
  detail::fail(field, s, "one of \"none\", \"sgd\", \"adam\", \"rowwise_adagrad\"");
}

struct table_spec {
  std::string name{};
  std::int64_t rows = 0;        // hash size
  std::int32_t dim = 0;         // embedding dimension (columns)
  double pooling_factor = 0.0;  // mean lookups per bag
  reuse_histogram reuse_hist{};
  dtype weight_dtype = dtype::fp32;
  // Where the table's rows live (memory tiers, docs/sharding.md); every shard
  // of the table is in this tier. hbm unless a task or a constraint says
  // otherwise.
  tier_placement placement{};

  friend bool operator==(const table_spec&, const table_spec&) = default;
};

// Bytes of a block of `rows` x `cols` weights plus the optimizer state it carries.
// SGD keeps no state; Adam two fp32 moments per weight; row-wise Adagrad one
// fp32 per row (FBGEMM's EXACT_ROWWISE_ADAGRAD).
inline std::uint64_t block_bytes(std::uint64_t rows, std::uint64_t cols, dtype t,
                                 optimizer opt = optimizer::none) {
  const std::uint64_t weights =
      checked_mul(checked_mul(rows, cols, "table bytes"), dtype_bytes(t), "table bytes");
  switch (opt) {
    case optimizer::none:
    case optimizer::sgd:
      return weights;
    case optimizer::adam:
      return checked_add(weights,
                         checked_mul(checked_mul(rows, cols, "adam state"), 8, "adam state"),
                         "table bytes");
    case optimizer::rowwise_adagrad:
      return checked_add(weights, checked_mul(rows, 4, "adagrad state"), "table bytes");
  }
  return weights;
}

inline std::uint64_t table_bytes(const table_spec& t, optimizer opt = optimizer::none) {
  return block_bytes(static_cast<std::uint64_t>(t.rows), static_cast<std::uint64_t>(t.dim),
                     t.weight_dtype, opt);
}

// Representative occurrence count of reuse bin k. Counts are whole numbers, so
// bin k >= 1 holds the integers 2^(k-1)+1 .. 2^k and we take their mean; bin 0
// is exactly 1; the open last bin (32768, inf) counts as 2^16.
constexpr double reuse_bin_middle(std::size_t k) noexcept {
  if (k == 0) return 1.0;
  if (k + 1 >= reuse_bin_count) return 65536.0;
  const double lo = static_cast<double>(std::uint64_t{1} << (k - 1));
  return (lo + 1.0 + 2.0 * lo) / 2.0;
}

// Mean occurrences per unique index implied by a reuse histogram; 1.0 for an
// all-zero (unused-table) histogram.
inline double mean_reuse(const reuse_histogram& h) noexcept {
  double num = 0.0;
  double den = 0.0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    num += h[k] * reuse_bin_middle(k);
    den += h[k];
  }
  return den > 0.0 ? num / den : 1.0;
}

inline constexpr double reuse_hist_tolerance = 1e-3;

// Throws embplan::error naming `where` (e.g. "tables[3]") and the bad field.
inline void validate(const table_spec& t, std::string_view where = "table") {
  if (t.rows <= 0) detail::fail(detail::path(where, "rows"), t.rows, "a positive integer");
  if (t.dim <= 0) detail::fail(detail::path(where, "dim"), t.dim, "a positive integer");
  if (!std::isfinite(t.pooling_factor) || t.pooling_factor < 0.0) {
    detail::fail(detail::path(where, "pooling_factor"), t.pooling_factor, "a finite number >= 0");
  }
  double sum = 0.0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    const double v = t.reuse_hist[k];
    if (!std::isfinite(v) || v < 0.0) {
      detail::fail(detail::path(where, "bin_" + std::to_string(k)), v, "a finite fraction >= 0");
    }
    sum += v;
  }
  if (sum != 0.0 && std::abs(sum - 1.0) > reuse_hist_tolerance) {
    detail::fail(detail::path(where, "reuse_hist"), sum,
                 "bins summing to 1 (within 1e-3), or all zero for an unused table");
  }
  validate(t.placement, where);
  try {
    (void)table_bytes(t);
  } catch (const error&) {
    detail::fail(detail::path(where, "rows"), t.rows,
                 "rows x dim x dtype bytes below 2^64 (dim = " + std::to_string(t.dim) + ")");
  }
}

}  // namespace embplan::inline EMBPLAN_ABI
