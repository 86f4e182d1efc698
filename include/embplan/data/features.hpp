#pragma once
// Feature extraction: the table_spec of a table from its real indices and
// offsets, computed as the papers' preprocessing computes table_configs.json
// (DreamShard / NeuroShard tools/gen_dlrm_data.py, on Meta's dlrm_datasets):
//   rows           = max(index) + 1, floored at min_rows (the papers floor at
//                    100; pass min_rows = 100 to match them);
//   pooling_factor = indices / B (the papers then truncate it to an integer;
//                    embplan keeps the exact mean);
//   bin_k          = share of the unique indices whose occurrence count in the
//                    batch lies in (0,1], (1,2], (2,4], ..., (16384,32768],
//                    (32768,inf); all zero when the table has no lookups.
// tools/convert_dlrm_dataset.py computes the same numbers from the .pt file.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/detail/reuse_bins.hpp"
#include "embplan/data/trace_check.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data {

struct feature_options {
  std::int64_t min_rows = 1;  // floor of the extracted rows
  std::int32_t dim = 0;       // copied into the spec (0: unknown)
  std::string name{};         // copied into the spec
};

namespace detail {

// Histogram of occurrence counts over the reuse bins, as fractions of the
// unique indices. Indices must be >= 0. A dense count array when the largest
// index is within a few times the number of lookups, a sorted copy otherwise
// (a 2e9-row table with a few lookups costs no 8 GB array).
inline reuse_histogram reuse_of(std::span<const std::int64_t> indices, std::int64_t max_index) {
  reuse_histogram bins{};
  std::vector<std::uint64_t> per_bin(reuse_bin_count, 0);
  std::uint64_t unique = 0;
  const auto n = static_cast<std::uint64_t>(indices.size());
  if (n == 0) return bins;
  const auto span_rows = static_cast<std::uint64_t>(max_index) + 1;
  if (span_rows <= 4 * n + (std::uint64_t{1} << 20) &&
      n < std::numeric_limits<std::uint32_t>::max()) {
    std::vector<std::uint32_t> counts(static_cast<std::size_t>(span_rows), 0);
    for (const auto v : indices)
      ++counts[static_cast<std::size_t>(v)];
    for (const auto c : counts) {
      if (c == 0) continue;
      ++per_bin[reuse_bin_of(c)];
      ++unique;
    }
  } else {
    std::vector<std::int64_t> sorted(indices.begin(), indices.end());
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size();) {
      std::size_t j = i + 1;
      while (j < sorted.size() && sorted[j] == sorted[i])
        ++j;
      ++per_bin[reuse_bin_of(j - i)];
      ++unique;
      i = j;
    }
  }
  for (std::size_t k = 0; k < reuse_bin_count; ++k)
    bins[k] = static_cast<double>(per_bin[k]) / static_cast<double>(unique);
  return bins;
}

// The spec of the indices of `bags` bags (offsets already checked).
inline table_spec spec_of(std::span<const std::int64_t> indices, std::size_t bags,
                          std::int64_t min_rows, std::int32_t dim, std::string name,
                          std::size_t first_position) {
  if (min_rows <= 0) embplan::detail::fail("min_rows", min_rows, "a positive row floor");
  std::int64_t max_index = -1;
  for (std::size_t p = 0; p < indices.size(); ++p) {
    const std::int64_t v = indices[p];
    if (v < 0) {
      embplan::detail::fail(embplan::detail::path("indices", first_position + p), v,
                            "a row id >= 0");
    }
    max_index = std::max(max_index, v);
  }
  table_spec t;
  t.name = std::move(name);
  t.rows = std::max(min_rows, max_index + 1);
  t.dim = dim;
  t.pooling_factor = static_cast<double>(indices.size()) / static_cast<double>(bags);
  t.reuse_hist = reuse_of(indices, max_index);
  return t;
}

}  // namespace detail

// The spec of one table from its indices and its B + 1 offsets (B >= 1).
inline table_spec extract_table_spec(std::span<const std::int64_t> indices,
                                     std::span<const std::int64_t> offsets,
                                     const feature_options& o = {}) {
  if (offsets.size() < 2) {
    embplan::detail::fail("offsets.size", offsets.size(),
                          "at least 2 entries (B + 1 offsets for B >= 1 bags)");
  }
  validate_offsets(offsets, indices.size(), offsets.size() - 1);
  return detail::spec_of(indices, offsets.size() - 1, o.min_rows, o.dim, o.name, 0);
}

// The specs of the `tables` tables of a TBE batch (offsets T*B+1, table-major).
// dims: one per table, or empty (dim 0, unknown). Table t is named "t<t>",
// as in the synthetic pool.
inline std::vector<table_spec> extract_tbe_specs(std::span<const std::int64_t> indices,
                                                 std::span<const std::int64_t> offsets,
                                                 std::int64_t tables,
                                                 std::span<const std::int32_t> dims = {},
                                                 std::int64_t min_rows = 1) {
  using embplan::detail::fail;
  if (tables <= 0) fail("tables", tables, "a positive number of tables");
  const auto t_count = static_cast<std::size_t>(tables);
  if (offsets.size() < t_count + 1 || (offsets.size() - 1) % t_count != 0) {
    fail("offsets.size", offsets.size(),
         "T*B+1 entries with B >= 1 (T = " + std::to_string(tables) + " tables)");
  }
  if (!dims.empty() && dims.size() != t_count) {
    fail("dims.size", dims.size(), "one dim per table (" + std::to_string(tables) + ") or none");
  }
  validate_offsets(offsets, indices.size(), offsets.size() - 1);
  const std::size_t b = (offsets.size() - 1) / t_count;
  std::vector<table_spec> out;
  out.reserve(t_count);
  for (std::size_t t = 0; t < t_count; ++t) {
    const auto begin = static_cast<std::size_t>(offsets[t * b]);
    const auto end = static_cast<std::size_t>(offsets[(t + 1) * b]);
    out.push_back(detail::spec_of(indices.subspan(begin, end - begin), b, min_rows,
                                  dims.empty() ? 0 : dims[t], "t" + std::to_string(t), begin));
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::data
