#include "embplan/kernel/detail/cuda_index.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/kernel/tbe.hpp"

namespace k = embplan::kernel;
namespace kd = embplan::kernel::detail;

namespace {

// offsets of `bags` bags, each 0..max_length lookups (so some are empty)
std::vector<std::int64_t> random_offsets(embplan::rng& gen, std::int64_t bags,
                                         std::uint64_t max_length) {
  std::vector<std::int64_t> offsets(1, 0);
  for (std::int64_t b = 0; b < bags; ++b) {
    offsets.push_back(offsets.back() + static_cast<std::int64_t>(gen.below(max_length + 1)));
  }
  return offsets;
}

}  // namespace

TEST_CASE("segment_of finds the segment holding a position, skipping empty segments") {
  const std::vector<std::int64_t> starts{0, 0, 3, 3, 3, 5, 9};  // 6 segments, end 9 not a start
  const std::vector<std::int64_t> expected{1, 1, 1, 4, 4, 5, 5, 5, 5};
  for (std::int64_t p = 0; p < 9; ++p) {
    CHECK(kd::segment_of(starts.data(), 6, p) == expected[static_cast<std::size_t>(p)]);
  }
  const std::vector<std::int32_t> one{0};
  CHECK(kd::segment_of(one.data(), 1, std::int32_t{0}) == 0);
  CHECK(kd::segment_of(one.data(), 1, std::int32_t{41}) == 0);
}

TEST_CASE("bag_of_position agrees with a linear scan over random offsets with empty bags") {
  embplan::rng gen(11);
  for (int trial = 0; trial < 30; ++trial) {
    const auto tables = static_cast<std::int64_t>(1 + gen.below(5));
    const auto batch = static_cast<std::int64_t>(1 + gen.below(40));
    const auto offsets = random_offsets(gen, tables * batch, trial % 2 == 0 ? 3 : 12);
    for (std::int64_t bag = 0; bag < tables * batch; ++bag) {
      const auto ub = static_cast<std::size_t>(bag);
      for (std::int64_t p = offsets[ub]; p < offsets[ub + 1]; ++p) {
        const std::int64_t table = k::index::bag_table(bag, batch);
        REQUIRE(kd::bag_of_position(offsets.data(), table, batch, p) == bag);
        // the whole-array search (the backward's linearisation) finds it too
        REQUIRE(kd::segment_of(offsets.data(), tables * batch, p) == bag);
      }
    }
  }
}

TEST_CASE("hot rows get disjoint scratch rows below hot_rows_bound") {
  embplan::rng gen(5);
  for (int trial = 0; trial < 50; ++trial) {
    const auto chunk = static_cast<std::int64_t>(1 + gen.below(40));
    // segment lengths as the run-length encoding gives them: every one >= 1,
    // a few celebrity rows among many short ones
    std::vector<std::int64_t> lengths;
    std::int64_t lookups = 0;
    const auto segments = 1 + gen.below(200);
    for (std::uint64_t s = 0; s < segments; ++s) {
      const auto len =
          static_cast<std::int64_t>(gen.below(10) == 0 ? 1 + gen.below(3000) : 1 + gen.below(3));
      lengths.push_back(len);
      lookups += len;
    }
    const std::int64_t bound = kd::hot_rows_bound(lookups, chunk);
    std::vector<int> used(static_cast<std::size_t>(bound), 0);
    std::int64_t chunk_start = 0;
    for (std::size_t s = 0; s < lengths.size(); ++s) {
      const std::int64_t chunks = k::index::segment_chunks(lengths[s], chunk);
      if (chunks > 1) {
        const std::int64_t rank = kd::hot_rank(chunk_start, static_cast<std::int64_t>(s));
        REQUIRE(rank >= 0);
        REQUIRE(rank < bound);
        REQUIRE(used[static_cast<std::size_t>(rank)] == 0);
        used[static_cast<std::size_t>(rank)] = 1;
      }
      chunk_start += chunks;
    }
  }
  CHECK(kd::hot_rows_bound(0, 32) == 1);
  CHECK(kd::hot_rows_bound(100, 32) == 3);
}

TEST_CASE("lower_bound_of: the first element not below a value, or n") {
  const std::vector<std::int64_t> sorted{2, 2, 5, 9, 9, 9, 14};
  const auto n = static_cast<std::int64_t>(sorted.size());
  CHECK(kd::lower_bound_of(sorted.data(), n, std::int64_t{0}) == 0);
  CHECK(kd::lower_bound_of(sorted.data(), n, std::int64_t{2}) == 0);
  CHECK(kd::lower_bound_of(sorted.data(), n, std::int64_t{3}) == 2);
  CHECK(kd::lower_bound_of(sorted.data(), n, std::int64_t{9}) == 3);
  CHECK(kd::lower_bound_of(sorted.data(), n, std::int64_t{10}) == 6);
  CHECK(kd::lower_bound_of(sorted.data(), n, std::int64_t{15}) == n);
  CHECK(kd::lower_bound_of(sorted.data(), std::int64_t{0}, std::int64_t{1}) == 0);
}

TEST_CASE("table_work_begin splits the work items into per-table ranges, empty tables too") {
  // 4 tables of 10 rows (row_offsets 0, 10, 20, 30, 40); table 2 has no lookups.
  // Unique rows after sort + run-length encoding, and chunks per segment:
  const std::vector<std::int64_t> unique_rows{1, 4, 9, 10, 33, 39};
  const std::vector<std::int32_t> chunks{1, 3, 1, 2, 1, 1};
  std::vector<std::int32_t> chunk_starts{0};
  for (std::size_t s = 0; s + 1 < chunks.size(); ++s)
    chunk_starts.push_back(chunk_starts.back() + chunks[s]);
  const std::int64_t total = chunk_starts.back() + chunks.back();  // 9
  const auto segments = static_cast<std::int64_t>(unique_rows.size());
  const auto begin = [&](std::int64_t row) {
    return kd::table_work_begin(unique_rows.data(), chunk_starts.data(), segments, total, row);
  };
  CHECK(begin(0) == 0);   // table 0: segments 0-2, work items 0-4
  CHECK(begin(10) == 5);  // table 1: segment 3, items 5-6
  CHECK(begin(20) == 7);  // table 2: nothing, an empty range [7, 7)
  CHECK(begin(30) == 7);  // table 3: segments 4-5, items 7-8
  CHECK(begin(40) == 9);  // past the last table: all work
  // every work item belongs to exactly the table whose range holds it
  const std::vector<std::int64_t> row_offsets{0, 10, 20, 30, 40};
  for (std::int64_t s = 0; s < segments; ++s) {
    const auto t = k::index::table_of_linear_row(row_offsets.data(), 4,
                                                 unique_rows[static_cast<std::size_t>(s)]);
    const auto w = chunk_starts[static_cast<std::size_t>(s)];
    CHECK(begin(row_offsets[static_cast<std::size_t>(t)]) <= w);
    CHECK(w < begin(row_offsets[static_cast<std::size_t>(t) + 1]));
  }
  // no segments at all: every table's range is empty
  CHECK(kd::table_work_begin(unique_rows.data(), chunk_starts.data(), 0, 0, 10) == 0);
}
