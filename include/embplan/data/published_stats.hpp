#pragma once
// The published statistics of Meta's synthetic DLRM dataset (MetaSyn,
// facebookresearch/dlrm_datasets, file fbgemm_t856_bs65536.pt), copied from
// data/dlrm_datasets_stats.json. The synthetic pool (data/synthetic_pool.hpp)
// is generated to match them; test/data/published_stats_test.cpp checks every
// constant here against the file.

#include <cstddef>
#include <cstdint>

#include "embplan/core/table_spec.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::data::published {

// AutoShard Table 1, "Statistics of Meta synthetic embedding tables".
inline constexpr std::size_t num_tables = 856;
inline constexpr std::int64_t batch_size = 65536;
inline constexpr std::int64_t hash_size_max = 12'543'670;
inline constexpr std::int64_t hash_size_mean = 4'107'458;
inline constexpr std::int64_t hash_size_min = 1;
inline constexpr double pooling_factor_max = 193.0;
inline constexpr double pooling_factor_mean = 15.0;
inline constexpr double pooling_factor_min = 0.0;

// dlrm_datasets embedding_bag/2021 locality_stats.txt for fbgemm_t856_bs65536.pt.
// Fraction of UNIQUE indices of a batch per reuse bin (0,1], (1,2], (2,4], ...
inline constexpr reuse_histogram col_size_hist = {0.473, 0.152, 0.139, 0.112, 0.072, 0.032,
                                                  0.011, 0.005, 0.002, 0.001, 0.0,   0.0,
                                                  0.0,   0.0,   0.0,   0.0,   0.0};
// Fraction of ALL index accesses that go to indices of each reuse bin.
inline constexpr reuse_histogram index_ratio_hist = {0.069, 0.044, 0.068, 0.101, 0.121, 0.104,
                                                     0.073, 0.058, 0.052, 0.050, 0.049, 0.048,
                                                     0.048, 0.043, 0.031, 0.023, 0.019};
inline constexpr std::int64_t indices = 887'017'990;
inline constexpr std::int64_t unique_indices = 128'435'723;
inline constexpr double mean_reuse = 6.9;  // indices / unique_indices, as published

}  // namespace embplan::inline EMBPLAN_ABI::data::published
