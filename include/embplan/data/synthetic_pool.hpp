#pragma once
// A synthetic table pool that matches the published statistics of Meta's
// synthetic DLRM dataset (MetaSyn, 856 tables; AutoShard Table 1 and App. A.2,
// data/dlrm_datasets_stats.json) without its 4 GB of indices:
//   - hash sizes: mean, max and min as published; mostly millions, a few tiny;
//   - pooling factors: mean, max and min as published; power-law, most < 50,
//     a few unused tables (pooling factor 0, all-zero reuse histogram);
//   - hash size and pooling factor drawn independently (no relation, A.2);
//   - 17-bin reuse histograms that differ between tables and pool, weighted by
//     each table's expected unique indices in a batch of 65536, to the
//     published col_size_hist (data/pool_stats.hpp measures all of this).
// Same options, same pool; another seed, another pool with the same statistics.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/detail/pool_generation.hpp"
#include "embplan/data/published_stats.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data {

struct pool_options {
  std::size_t tables = published::num_tables;
  std::uint64_t seed = 0;
  std::int32_t dim = 16;  // MetaSyn has no dimensions; DreamShard §4.1 uses one fixed dim
};

// Tables "t0", "t1", ...; fp32 weights. The statistics hold for pools of about
// a hundred tables or more; a smaller pool still hits the published max (and,
// from two tables on, the min) but cannot also reach the means.
inline std::vector<table_spec> synthetic_pool(const pool_options& options = {}) {
  if (options.tables == 0) embplan::detail::fail("tables", options.tables, "at least one table");
  if (options.dim <= 0) embplan::detail::fail("dim", options.dim, "a positive embedding dimension");
  const std::size_t n = options.tables;
  const auto rows = detail::draw_hash_sizes(n, options.seed);
  const auto pooling = detail::draw_pooling_factors(n, options.seed);
  const auto hists = detail::draw_reuse_histograms(rows, pooling, options.seed);
  std::vector<table_spec> pool(n);
  for (std::size_t i = 0; i < n; ++i) {
    pool[i].name = "t" + std::to_string(i);
    pool[i].rows = rows[i];
    pool[i].dim = options.dim;
    pool[i].pooling_factor = pooling[i];
    pool[i].reuse_hist = hists[i];
    pool[i].weight_dtype = dtype::fp32;
  }
  return pool;
}

}  // namespace embplan::inline EMBPLAN_ABI::data
