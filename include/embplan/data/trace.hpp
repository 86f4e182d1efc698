#pragma once
// Index traces generated from table statistics, for the kernels and meters
// that need real lookups where only a table_spec is known (a synthetic pool,
// a table_configs.json). A trace of one table is B bags of row ids:
//   - lookups: round(B x pooling_factor) in all, so the pooling factor
//     extracted back (data/features.hpp) is the spec's to within 1 / (2B);
//   - bag lengths: the spacings of B - 1 uniform cut points, mean = the
//     pooling factor, roughly geometric (empty bags allowed, a long tail);
//   - reuse: about lookups / mean_reuse unique rows, each bin of the 17-bin
//     histogram getting its share of them and each of those an occurrence
//     count inside the bin, summing to the lookups exactly; the rows are a
//     seeded sample of distinct rows of [0, rows), and the lookups are
//     shuffled into the bags. Extracting the histogram back gives the spec's
//     up to the rounding of per-bin shares onto whole rows: over the
//     synthetic pool at B = 512..4096, L1 <= 0.02 for every table with 100 or
//     more unique rows; with fewer, the number of unique rows is searched for
//     the closest histogram, and a handful of rows cannot show 17 bins.
// A table whose rows are fewer than the unique indices its histogram needs
// uses (up to) all its rows, each occurring more often than the histogram says.
// A table with pooling factor 0 or an all-zero histogram gives an empty trace.
// Same spec, options and seed: the same trace, on every platform.
//
// Several tables concatenate in FBGEMM's TBE layout (table-major: bag (t, b)
// is offsets[t*B+b] .. offsets[t*B+b+1]); table i draws from
// derive_seed(seed, i), so its trace does not depend on its neighbours.

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/detail/trace_generation.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data {

struct trace_options {
  std::int64_t batch_size = 65536;  // B bags per table
  std::uint64_t seed = 0;
};

// One table: offsets has B + 1 entries, offsets[0] = 0, non-decreasing,
// offsets.back() = indices.size(); every index in [0, rows).
struct bag_trace {
  std::vector<std::int64_t> indices{};
  std::vector<std::int64_t> offsets{};
};

// Several tables in TBE layout: indices table-major, offsets T*B+1.
struct tbe_trace {
  std::int64_t batch_size = 0;
  std::vector<std::int64_t> indices{};
  std::vector<std::int64_t> offsets{};
};

namespace detail {

// Above this a trace would not fit in memory anyway (2^40 lookups = 8 TB).
inline constexpr double max_trace_lookups = 1099511627776.0;

inline void check_batch_size(std::int64_t batch_size) {
  if (batch_size <= 0) {
    embplan::detail::fail("batch_size", batch_size, "a positive number of bags");
  }
}

// The lookups of `t` in a batch of `batch_size`: 0 for an unused table.
inline std::int64_t trace_lookups(const table_spec& t, std::int64_t batch_size,
                                  std::string_view where) {
  using embplan::detail::fail;
  using embplan::detail::path;
  if (t.rows <= 0) fail(path(where, "rows"), t.rows, "a positive integer");
  if (!std::isfinite(t.pooling_factor) || t.pooling_factor < 0.0) {
    fail(path(where, "pooling_factor"), t.pooling_factor, "a finite number >= 0");
  }
  double hist_sum = 0.0;
  for (std::size_t k = 0; k < reuse_bin_count; ++k) {
    const double v = t.reuse_hist[k];
    if (!std::isfinite(v) || v < 0.0) {
      fail(path(where, "bin_" + std::to_string(k)), v, "a finite fraction >= 0");
    }
    hist_sum += v;
  }
  if (hist_sum <= 0.0) return 0;
  const double lookups = std::round(static_cast<double>(batch_size) * t.pooling_factor);
  if (lookups > max_trace_lookups) {
    fail(path(where, "pooling_factor"), t.pooling_factor,
         "at most 2^40 lookups in a batch of " + std::to_string(batch_size) + " bags");
  }
  return static_cast<std::int64_t>(lookups);
}

inline bag_trace make_trace(const table_spec& t, std::int64_t batch_size, std::uint64_t seed,
                            std::string_view where) {
  check_batch_size(batch_size);
  const std::int64_t lookups = trace_lookups(t, batch_size, where);
  rng g(seed);
  bag_trace out;
  const auto counts = occurrence_counts(t.reuse_hist, lookups, t.rows, g);
  const auto rows = distinct_rows(t.rows, static_cast<std::int64_t>(counts.size()), g);
  out.indices = shuffled_lookups(rows, counts, lookups, g);
  out.offsets = bag_offsets(lookups, batch_size, g);
  return out;
}

}  // namespace detail

inline bag_trace generate_trace(const table_spec& t, const trace_options& o = {}) {
  return detail::make_trace(t, o.batch_size, o.seed, t.name.empty() ? "table" : t.name);
}

namespace detail {

// Appends one table's bags to a TBE trace being built (its offsets shifted
// past the lookups already there); the closing offset is the caller's.
inline void append_table(tbe_trace& out, const bag_trace& t) {
  const auto base = static_cast<std::int64_t>(out.indices.size());
  for (std::int64_t bag = 0; bag < out.batch_size; ++bag)
    out.offsets.push_back(base + t.offsets[static_cast<std::size_t>(bag)]);
  out.indices.insert(out.indices.end(), t.indices.begin(), t.indices.end());
}

}  // namespace detail

// Calls fn(i, const bag_trace&) for table i, i = 0, 1, ...; one trace alive at
// a time, so a pool of 856 tables at B = 65536 never holds more than its
// largest table. Table i uses seed derive_seed(o.seed, i), as
// generate_tbe_trace does.
template <class Fn>
requires std::invocable<Fn&, std::size_t, const bag_trace&>
void for_each_trace(std::span<const table_spec> tables, const trace_options& o, Fn&& fn) {
  detail::check_batch_size(o.batch_size);
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const bag_trace trace = detail::make_trace(tables[i], o.batch_size, derive_seed(o.seed, i),
                                               embplan::detail::path("tables", i));
    std::invoke(fn, i, trace);
  }
}

inline tbe_trace generate_tbe_trace(std::span<const table_spec> tables,
                                    const trace_options& o = {}) {
  detail::check_batch_size(o.batch_size);
  std::size_t total = 0;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    total += static_cast<std::size_t>(
        detail::trace_lookups(tables[i], o.batch_size, embplan::detail::path("tables", i)));
  }
  const auto b = static_cast<std::size_t>(o.batch_size);
  tbe_trace out;
  out.batch_size = o.batch_size;
  out.indices.reserve(total);
  out.offsets.reserve(tables.size() * b + 1);
  for_each_trace(tables, o, [&](std::size_t, const bag_trace& t) { detail::append_table(out, t); });
  out.offsets.push_back(static_cast<std::int64_t>(out.indices.size()));
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::data
