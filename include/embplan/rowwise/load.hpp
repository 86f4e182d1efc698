#pragma once
// Load analysis of an index trace over a row-partitioned table (embedding-
// tables chapter §4): rows stored per shard, lookups per shard, the skew factor
// max_s L_s / mean_s L_s (>= 1; 1 is perfect balance), and the hottest IDs
// with their hit counts. Storage balances under a good hash; load follows
// popularity and does not.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rowwise {

struct id_hits {
  std::int64_t id = 0;
  std::uint64_t hits = 0;

  friend bool operator==(const id_hits&, const id_hits&) = default;
};

// Throws embplan::error naming the first ID outside [0, rows): its position
// in the trace and its value ("ids[17]" = 20000).
inline void check_ids(std::span<const std::int64_t> ids, std::int64_t rows) {
  for (std::size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] < 0 || ids[j] >= rows) {
      embplan::detail::fail(embplan::detail::path("ids", j), ids[j],
                            "a row ID in [0, " + std::to_string(rows) + ")");
    }
  }
}

// Every distinct ID of the trace with its hit count, hottest first (ties: the
// smaller ID first). Counts densely when the table is not much larger than the
// trace, otherwise sorts a copy of the trace: O(R + N) or O(R log R).
inline std::vector<id_hits> id_frequency(std::span<const std::int64_t> ids, std::int64_t rows) {
  check_ids(ids, rows);
  std::vector<id_hits> out;
  const auto dense_limit = static_cast<std::int64_t>(2 * ids.size() + (std::size_t{1} << 16));
  if (rows <= dense_limit) {
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(rows), 0);
    for (const auto id : ids)
      ++counts[static_cast<std::size_t>(id)];
    for (std::size_t i = 0; i < counts.size(); ++i)
      if (counts[i] != 0) out.push_back({static_cast<std::int64_t>(i), counts[i]});
  } else {
    std::vector<std::int64_t> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t j = 0; j < sorted.size();) {
      std::size_t e = j;
      while (e < sorted.size() && sorted[e] == sorted[j])
        ++e;
      out.push_back({sorted[j], static_cast<std::uint64_t>(e - j)});
      j = e;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const id_hits& a, const id_hits& b) { return a.hits > b.hits; });
  return out;
}

// max / mean of the loads; 1 when there is no load at all.
inline double skew_factor(std::span<const std::uint64_t> loads) noexcept {
  std::uint64_t max = 0;
  double sum = 0.0;
  for (const auto l : loads) {
    max = std::max(max, l);
    sum += static_cast<double>(l);
  }
  if (sum <= 0.0) return 1.0;
  return static_cast<double>(max) * static_cast<double>(loads.size()) / sum;
}

struct load_report {
  std::vector<std::int64_t> rows_per_shard{};      // storage
  std::vector<std::uint64_t> lookups_per_shard{};  // access load
  double skew = 1.0;                               // max / mean lookups
  std::vector<id_hits> hottest{};                  // up to `top` IDs, hottest first
};

// Lookups per shard of a trace (IDs checked against the partition's rows).
template <row_partitioner P>
std::vector<std::uint64_t> lookups_per_shard(const P& part, std::span<const std::int64_t> ids) {
  check_ids(ids, part.rows());
  std::vector<std::uint64_t> load(part.shards(), 0);
  for (const auto id : ids)
    ++load[part.shard_of(id)];
  return load;
}

template <row_partitioner P>
load_report analyze_load(const P& part, std::span<const std::int64_t> ids, std::size_t top = 3) {
  load_report r;
  r.lookups_per_shard = lookups_per_shard(part, ids);
  r.rows_per_shard.resize(part.shards());
  for (std::uint32_t s = 0; s < part.shards(); ++s)
    r.rows_per_shard[s] = part.rows_in(s);
  r.skew = skew_factor(r.lookups_per_shard);
  auto freq = id_frequency(ids, part.rows());
  freq.resize(std::min(top, freq.size()));
  r.hottest = std::move(freq);
  return r;
}

}  // namespace embplan::inline EMBPLAN_ABI::rowwise
