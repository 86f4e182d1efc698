#pragma once
// Validation of index traces in FBGEMM's TBE layout, shared by feature
// extraction and the kernels: one flat indices array; offsets of length
// T*B+1, table-major, bag (t, b) = indices[offsets[t*B+b] .. offsets[t*B+b+1]).
// A bad trace would read out of bounds in a kernel, so every rule is checked
// and the message names the entry that breaks it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data {

// Offsets of `bags` bags over `index_count` indices: bags + 1 entries,
// offsets[0] == 0, non-decreasing, offsets.back() == index_count. One table
// has bags = B; a TBE batch has bags = T * B.
inline void validate_offsets(std::span<const std::int64_t> offsets, std::size_t index_count,
                             std::size_t bags) {
  using embplan::detail::fail;
  if (offsets.size() != bags + 1) {
    fail("offsets.size", offsets.size(),
         std::to_string(bags + 1) + " entries (one per bag + 1, bags = " + std::to_string(bags) +
             ")");
  }
  if (offsets.front() != 0) fail("offsets[0]", offsets.front(), "0");
  for (std::size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) {
      fail(embplan::detail::path("offsets", i), offsets[i],
           "non-decreasing offsets (offsets[" + std::to_string(i - 1) +
               "] = " + std::to_string(offsets[i - 1]) + ")");
    }
  }
  if (offsets.back() != static_cast<std::int64_t>(index_count)) {
    fail(embplan::detail::path("offsets", offsets.size() - 1), offsets.back(),
         "the number of indices, " + std::to_string(index_count) + " (offsets.back())");
  }
}

// A whole TBE batch of rows.size() tables and `batch_size` bags per table:
// the offsets as above (T*B+1 entries) and every index of table t in
// [0, rows[t]). O(indices + T*B).
inline void validate_tbe_trace(std::span<const std::int64_t> indices,
                               std::span<const std::int64_t> offsets, std::int64_t batch_size,
                               std::span<const std::int64_t> rows) {
  using embplan::detail::fail;
  if (batch_size <= 0) fail("batch_size", batch_size, "a positive number of bags per table");
  const auto tables = rows.size();
  const auto b = static_cast<std::size_t>(batch_size);
  if (tables != 0 && offsets.size() != tables * b + 1) {
    fail("offsets.size", offsets.size(),
         "T*B+1 = " + std::to_string(tables * b + 1) + " entries (T = " + std::to_string(tables) +
             " tables, B = " + std::to_string(b) + " bags)");
  }
  validate_offsets(offsets, indices.size(), tables * b);
  for (std::size_t t = 0; t < tables; ++t) {
    const std::int64_t r = rows[t];
    if (r <= 0) fail(embplan::detail::path("rows", t), r, "a positive number of rows");
    for (std::size_t bag = 0; bag < b; ++bag) {
      const std::size_t begin = static_cast<std::size_t>(offsets[t * b + bag]);
      const std::size_t end = static_cast<std::size_t>(offsets[t * b + bag + 1]);
      for (std::size_t p = begin; p < end; ++p) {
        const std::int64_t v = indices[p];
        if (v < 0 || v >= r) {
          fail(embplan::detail::path("indices", p), v,
               "a row of table " + std::to_string(t) + " (bag " + std::to_string(bag) +
                   ") in [0, rows) with rows = " + std::to_string(r));
        }
      }
    }
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::data
