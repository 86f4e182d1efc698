#pragma once
// Index arithmetic of the CUDA kernels beyond tbe.hpp's, host/device so the
// CPU tests (test/kernel/cuda_index_test.cpp) run what the device runs. The
// backward finds each lookup's bag by searching the offsets once, before the
// radix sort (linearize), and each table's range of work items by searching
// the sorted unique rows.
#include <cstdint>

#include "embplan/kernel/tbe.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::kernel::detail {

// The segment s in [0, segments) with starts[s] <= position < starts[s+1]:
// the last s with starts[s] <= position, so empty segments (equal starts) are
// skipped. Requires segments >= 1 and starts[0] <= position.
template <class T>
EMBPLAN_HOST_DEVICE constexpr std::int64_t segment_of(const T* starts, std::int64_t segments,
                                                      T position) noexcept {
  std::int64_t lo = 0;
  std::int64_t hi = segments;  // invariant: starts[lo] <= position, and hi == segments or
                               // starts[hi] > position
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (starts[mid] <= position) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The bag (table-major id, as index::bag) holding lookup `position`, which is
// known to belong to `table`: the search covers only that table's batch_size
// bags of the offsets array (T*B+1 entries).
EMBPLAN_HOST_DEVICE constexpr std::int64_t bag_of_position(const std::int64_t* offsets,
                                                           std::int64_t table,
                                                           std::int64_t batch_size,
                                                           std::int64_t position) noexcept {
  const std::int64_t first = index::bag(table, 0, batch_size);
  return first + segment_of(offsets + first, batch_size, position);
}

// Hot rows (segments split into more than one chunk) sum their chunks in a
// scratch row each. chunk_start - segment counts the extra chunks of the
// segments before this one, so hot rows get distinct ranks, each below
// hot_rows_bound: scratch of hot_rows_bound x max_dim floats needs no host
// sync to size.
EMBPLAN_HOST_DEVICE constexpr std::int64_t hot_rank(std::int64_t chunk_start,
                                                    std::int64_t segment) noexcept {
  return chunk_start - segment;
}
// ceil(c / chunk) - 1 <= (c - 1) / chunk for each segment of c >= 1 lookups,
// so all extra chunks together number at most lookups / chunk (at least 1, so
// a buffer of that size is never empty).
EMBPLAN_HOST_DEVICE constexpr std::int64_t hot_rows_bound(std::int64_t lookups,
                                                          std::int64_t chunk) noexcept {
  return lookups / chunk > 1 ? lookups / chunk : 1;
}

// The first s in [0, n) with sorted[s] >= value, or n: where a table's rows
// start among the sorted unique rows (the backward's per-table work ranges).
template <class T>
EMBPLAN_HOST_DEVICE constexpr std::int64_t lower_bound_of(const T* sorted, std::int64_t n,
                                                          T value) noexcept {
  std::int64_t lo = 0;
  std::int64_t hi = n;  // invariant: sorted[< lo] < value <= sorted[>= hi]
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The work items of one table: the chunks of the segments whose linear rows lie
// in [row_begin, row_end). unique_rows is sorted (radix sort + run-length
// encoding); chunk_starts is the exclusive scan of the chunks per segment, and
// total_work the sum of all. Returns the first work item of the table; the
// table's range is [work_begin(t), work_begin(t + 1)).
EMBPLAN_HOST_DEVICE constexpr std::int64_t table_work_begin(const std::int64_t* unique_rows,
                                                            const std::int32_t* chunk_starts,
                                                            std::int64_t segments,
                                                            std::int64_t total_work,
                                                            std::int64_t row_begin) noexcept {
  const std::int64_t s = lower_bound_of(unique_rows, segments, row_begin);
  return s < segments ? std::int64_t{chunk_starts[s]} : total_work;
}

}  // namespace embplan::inline EMBPLAN_ABI::kernel::detail
