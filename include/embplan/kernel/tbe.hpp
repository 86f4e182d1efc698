#pragma once
// The table-batched embedding (TBE) layout of FBGEMM, shared by the CPU embedding
// bag (kernel/embedding_bag.hpp) and the CUDA one (kernel/embedding_bag.cuh):
//
//   weights      one flat array; table t's [rows_t x dim_t] block starts at
//                weights_offsets[t] (elements), row-major
//   indices      one flat int64 array of row ids, table-major
//   offsets      T*B+1 entries; bag (t, b) is indices[offsets[t*B+b] ..
//                offsets[t*B+b+1])
//   output       [B][sum of dims]; table t writes columns d_offsets[t] ..
//                d_offsets[t+1] of every sample row
//
// The index arithmetic is written once, as EMBPLAN_HOST_DEVICE functions, so the
// CPU tests exercise exactly what the CUDA kernels compute.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/checked.hpp"
#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

#if defined(__CUDACC__)
#define EMBPLAN_HOST_DEVICE __host__ __device__
#else
#define EMBPLAN_HOST_DEVICE
#endif

namespace embplan::inline EMBPLAN_ABI::kernel {

// kernel::detail (the kernels' internals) exists too; these keep `detail::fail`
// below meaning embplan's error helpers whichever header opened it first.
namespace detail {
using embplan::detail::fail;
using embplan::detail::path;
}  // namespace detail

enum class pooling_mode : std::uint8_t { sum, mean };

// IEEE binary16 storage, bit-compatible with CUDA's __half (so a device buffer
// of __half and a host vector<half> hold the same bytes). Arithmetic happens in
// fp32: to_float is exact, to_half rounds to nearest even, as __float2half_rn.
struct half {
  std::uint16_t bits = 0;
  friend constexpr bool operator==(half, half) = default;
};
static_assert(sizeof(half) == 2);

EMBPLAN_HOST_DEVICE inline float to_float(half h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  std::uint32_t exponent = (h.bits >> 10) & 0x1fu;
  std::uint32_t mantissa = h.bits & 0x3ffu;
  std::uint32_t out = 0;
  if (exponent == 0x1f) {  // inf / nan
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    out = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    out = sign;
  }
  float f;
  std::memcpy(&f, &out, sizeof f);
  return f;
}

EMBPLAN_HOST_DEVICE inline half to_half(float f) noexcept {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf / nan (nan keeps a quiet payload bit)
    return half{static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477ff000u) return half{static_cast<std::uint16_t>(sign | 0x7c00u)};  // overflow
  if (abs < 0x38800000u) {                     // result is subnormal or zero: shift with rounding
    if (abs < 0x33000000u) return half{sign};  // below half the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exp;  // value = mant * 2^(exp-150) = v * 2^-24; in [14, 24]
    std::uint32_t v = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (v & 1u) != 0)) ++v;
    return half{static_cast<std::uint16_t>(sign | v)};
  }
  // normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even
  std::uint32_t v = abs - 0x38000000u;
  const std::uint32_t rem = v & 0x1fffu;
  v >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1u) != 0)) ++v;  // may carry into exponent: fine
  return half{static_cast<std::uint16_t>(sign | v)};
}

EMBPLAN_HOST_DEVICE inline float to_float(float f) noexcept {
  return f;
}

// ---------------------------------------------------------------- index arithmetic
namespace index {

// Bag (t, b) of a batch of B samples, table-major.
EMBPLAN_HOST_DEVICE constexpr std::int64_t bag(std::int64_t table, std::int64_t sample,
                                               std::int64_t batch) noexcept {
  return table * batch + sample;
}
EMBPLAN_HOST_DEVICE constexpr std::int64_t bag_table(std::int64_t bag_id,
                                                     std::int64_t batch) noexcept {
  return bag_id / batch;
}
EMBPLAN_HOST_DEVICE constexpr std::int64_t bag_sample(std::int64_t bag_id,
                                                      std::int64_t batch) noexcept {
  return bag_id % batch;
}
// First output element of (sample, table) in the [B][total_dim] output.
EMBPLAN_HOST_DEVICE constexpr std::int64_t output_offset(std::int64_t sample,
                                                         std::int64_t total_dim,
                                                         std::int64_t d_offset) noexcept {
  return sample * total_dim + d_offset;
}
// First weight element of `row` of a table whose block starts at weights_offset.
EMBPLAN_HOST_DEVICE constexpr std::int64_t weight_offset(std::int64_t weights_offset,
                                                         std::int64_t row,
                                                         std::int64_t dim) noexcept {
  return weights_offset + row * dim;
}
// Linearised row id (FBGEMM's hash_size_cumsum + row): one key space over all
// tables, so the backward sorts and groups all tables' rows in one pass.
EMBPLAN_HOST_DEVICE constexpr std::int64_t linear_row(std::int64_t row_offset,
                                                      std::int64_t row) noexcept {
  return row_offset + row;
}
// The table owning linear row `id`: the t with row_offsets[t] <= id <
// row_offsets[t+1] (row_offsets has T+1 entries; empty tables are skipped).
EMBPLAN_HOST_DEVICE constexpr std::int64_t table_of_linear_row(const std::int64_t* row_offsets,
                                                               std::int64_t tables,
                                                               std::int64_t id) noexcept {
  std::int64_t lo = 0;
  std::int64_t hi = tables;  // invariant: row_offsets[lo] <= id < row_offsets[hi]
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (row_offsets[mid] <= id) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}
// Radix-sort key bits needed for linear row ids in [0, total_rows): sorting only
// these bits is what makes the backward's sort cheap (at least 1 bit).
EMBPLAN_HOST_DEVICE constexpr int radix_end_bit(std::int64_t total_rows) noexcept {
  int bits = 1;
  while (bits < 63 && (std::int64_t{1} << bits) < total_rows)
    ++bits;
  return bits;
}
// Lanes given to one bag: one 4-float vector per lane per row, so dim/4
// vectors, rounded up to a power of two in [8, 32] (a sub-warp for small dims).
EMBPLAN_HOST_DEVICE constexpr int lanes_per_bag(std::int64_t dim) noexcept {
  const std::int64_t vectors = (dim + 3) / 4;
  int lanes = 8;
  while (lanes < 32 && lanes < vectors)
    lanes *= 2;
  return lanes;
}
// Pieces a segment of `length` gradient rows is split into, `chunk` rows each:
// a hot row's long segment spreads over several thread groups.
EMBPLAN_HOST_DEVICE constexpr std::int64_t segment_chunks(std::int64_t length,
                                                          std::int64_t chunk) noexcept {
  return length <= 0 ? 0 : (length + chunk - 1) / chunk;
}
// Scale of a bag's rows: 1 for sum pooling, 1/length for mean (0 for an empty
// bag, whose output is zero either way).
EMBPLAN_HOST_DEVICE constexpr float bag_scale(pooling_mode mode, std::int64_t length) noexcept {
  if (mode == pooling_mode::sum || length == 0) return 1.0f;
  return 1.0f / static_cast<float>(length);
}

}  // namespace index

// ---------------------------------------------------------------- layout
// The tables of one TBE: per-table rows and dims, and the offsets derived from
// them. Built by make_tbe_layout, which checks every product for overflow.
struct tbe_layout {
  std::vector<std::int64_t> rows{};             // T
  std::vector<std::int32_t> dims{};             // T
  std::vector<std::int64_t> weights_offsets{};  // T+1; back() = total weight elements
  std::vector<std::int64_t> d_offsets{};        // T+1; back() = output columns
  std::vector<std::int64_t> row_offsets{};      // T+1; back() = total rows

  std::int64_t tables() const noexcept { return static_cast<std::int64_t>(rows.size()); }
  std::int64_t total_weights() const noexcept { return weights_offsets.back(); }
  std::int64_t total_dim() const noexcept { return d_offsets.back(); }
  std::int64_t total_rows() const noexcept { return row_offsets.back(); }
};

inline tbe_layout make_tbe_layout(std::span<const std::int64_t> rows,
                                  std::span<const std::int32_t> dims) {
  if (rows.size() != dims.size()) {
    detail::fail("tbe.dims.size", dims.size(),
                 "one dim per table (" + std::to_string(rows.size()) + " tables)");
  }
  tbe_layout out;
  out.rows.assign(rows.begin(), rows.end());
  out.dims.assign(dims.begin(), dims.end());
  out.weights_offsets.assign(1, 0);
  out.d_offsets.assign(1, 0);
  out.row_offsets.assign(1, 0);
  for (std::size_t t = 0; t < rows.size(); ++t) {
    const std::string where = "tbe.tables[" + std::to_string(t) + "]";
    if (rows[t] <= 0) detail::fail(detail::path(where, "rows"), rows[t], "a positive integer");
    if (dims[t] <= 0) detail::fail(detail::path(where, "dim"), dims[t], "a positive integer");
    const auto block = checked_mul(static_cast<std::uint64_t>(rows[t]),
                                   static_cast<std::uint64_t>(dims[t]), where + ".rows*dim");
    const auto w = checked_add(static_cast<std::uint64_t>(out.weights_offsets.back()), block,
                               "tbe.weights_offsets");
    const auto r = checked_add(static_cast<std::uint64_t>(out.row_offsets.back()),
                               static_cast<std::uint64_t>(rows[t]), "tbe.row_offsets");
    if (w > static_cast<std::uint64_t>(INT64_MAX) || r > static_cast<std::uint64_t>(INT64_MAX)) {
      detail::fail(detail::path(where, "rows"), rows[t], "a layout below 2^63 elements");
    }
    out.weights_offsets.push_back(static_cast<std::int64_t>(w));
    out.row_offsets.push_back(static_cast<std::int64_t>(r));
    out.d_offsets.push_back(out.d_offsets.back() + dims[t]);
  }
  return out;
}

// One batch of lookups against a layout (non-owning).
struct tbe_batch_view {
  std::int64_t batch_size = 0;                  // B
  std::span<const std::int64_t> indices{};      // row ids, table-major
  std::span<const std::int64_t> offsets{};      // T*B+1
  std::span<const float> per_sample_weights{};  // empty, or one per index
};

// Everything a kernel relies on, checked before it runs: a wrong offset or
// index is an error naming table, position, value and rows, never a wild read.
inline void validate(const tbe_layout& layout, const tbe_batch_view& batch) {
  if (batch.batch_size < 0) detail::fail("tbe.batch_size", batch.batch_size, "a count >= 0");
  const auto bags = checked_mul(static_cast<std::uint64_t>(layout.tables()),
                                static_cast<std::uint64_t>(batch.batch_size), "tbe.bags");
  if (batch.offsets.size() != bags + 1) {
    detail::fail("tbe.offsets.size", batch.offsets.size(),
                 "tables x batch_size + 1 = " + std::to_string(bags + 1));
  }
  if (batch.offsets.front() != 0) detail::fail("tbe.offsets[0]", batch.offsets.front(), "0");
  for (std::size_t i = 1; i < batch.offsets.size(); ++i) {
    if (batch.offsets[i] < batch.offsets[i - 1]) {
      detail::fail(
          "tbe.offsets[" + std::to_string(i) + "]", batch.offsets[i],
          "non-decreasing offsets (previous " + std::to_string(batch.offsets[i - 1]) + ")");
    }
  }
  if (batch.offsets.back() != static_cast<std::int64_t>(batch.indices.size())) {
    detail::fail("tbe.offsets[" + std::to_string(bags) + "]", batch.offsets.back(),
                 "the number of indices (" + std::to_string(batch.indices.size()) + ")");
  }
  if (!batch.per_sample_weights.empty() &&
      batch.per_sample_weights.size() != batch.indices.size()) {
    detail::fail("tbe.per_sample_weights.size", batch.per_sample_weights.size(),
                 "0 or one weight per index (" + std::to_string(batch.indices.size()) + ")");
  }
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const auto begin = batch.offsets[static_cast<std::size_t>(index::bag(t, 0, batch.batch_size))];
    const auto end =
        batch.offsets[static_cast<std::size_t>(index::bag(t + 1, 0, batch.batch_size))];
    const std::int64_t rows = layout.rows[static_cast<std::size_t>(t)];
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t v = batch.indices[static_cast<std::size_t>(i)];
      if (v < 0 || v >= rows) {
        detail::fail("tbe.indices[" + std::to_string(i) + "] (table " + std::to_string(t) + ")", v,
                     "a row id in [0, " + std::to_string(rows) + ")");
      }
    }
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel
