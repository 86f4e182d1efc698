#pragma once
// TorchRec's planner vocabulary, as release v0.3.2 defines it, on embplan's
// data model: sharding types and compute kernels (in the order TorchRec
// enumerates them), Storage (hbm, ddr) with its ordering, the constants of
// torchrec/distributed/planner/constants.py, the planner's options, and the
// few Python number semantics the planner's arithmetic depends on (true
// division of integers, round(), ceil()), reproduced exactly so that every
// perf and storage figure, and so every comparison and tie, is TorchRec's.
// docs/torchrec.md describes the whole port and how it is checked.

#include <bit>
#include <cmath>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::torchrec {

namespace detail {
using embplan::detail::fail;
}  // namespace detail

// torchrec/distributed/types.py, ShardingType; the order is
// BaseEmbeddingSharder.sharding_types("cuda") (embedding_types.py), which is
// the enumerator's order.
enum class sharding_type : std::uint8_t {
  data_parallel,
  table_wise,
  column_wise,
  table_column_wise,
  row_wise,
  table_row_wise,
};

inline constexpr sharding_type all_sharding_types[] = {
    sharding_type::data_parallel,     sharding_type::table_wise, sharding_type::column_wise,
    sharding_type::table_column_wise, sharding_type::row_wise,   sharding_type::table_row_wise,
};

constexpr std::string_view to_string(sharding_type s) noexcept {
  switch (s) {
    case sharding_type::data_parallel:
      return "data_parallel";
    case sharding_type::table_wise:
      return "table_wise";
    case sharding_type::column_wise:
      return "column_wise";
    case sharding_type::table_column_wise:
      return "table_column_wise";
    case sharding_type::row_wise:
      return "row_wise";
    case sharding_type::table_row_wise:
      return "table_row_wise";
  }
  return "table_wise";
}

inline sharding_type parse_sharding_type(std::string_view s, std::string_view field) {
  for (const auto t : all_sharding_types)
    if (s == to_string(t)) return t;
  detail::fail(field, s,
               "one of \"data_parallel\", \"table_wise\", \"column_wise\", "
               "\"table_column_wise\", \"row_wise\", \"table_row_wise\"");
}

// enumerators.py, get_partition_by_type.
enum class partition_by : std::uint8_t { device, host, uniform };

constexpr partition_by partition_of(sharding_type s) noexcept {
  switch (s) {
    case sharding_type::table_wise:
    case sharding_type::column_wise:
      return partition_by::device;
    case sharding_type::table_row_wise:
    case sharding_type::table_column_wise:
      return partition_by::host;
    case sharding_type::row_wise:
    case sharding_type::data_parallel:
      return partition_by::uniform;
  }
  return partition_by::device;
}

// embedding_types.py, EmbeddingComputeKernel (the training kernels); the
// order is BaseEmbeddingSharder.compute_kernels(type, "cuda").
enum class compute_kernel : std::uint8_t { dense, fused, fused_uvm, fused_uvm_caching };

inline constexpr compute_kernel all_compute_kernels[] = {
    compute_kernel::dense, compute_kernel::fused, compute_kernel::fused_uvm,
    compute_kernel::fused_uvm_caching};

constexpr std::string_view to_string(compute_kernel k) noexcept {
  switch (k) {
    case compute_kernel::dense:
      return "dense";
    case compute_kernel::fused:
      return "fused";
    case compute_kernel::fused_uvm:
      return "fused_uvm";
    case compute_kernel::fused_uvm_caching:
      return "fused_uvm_caching";
  }
  return "fused";
}

inline compute_kernel parse_compute_kernel(std::string_view s, std::string_view field) {
  for (const auto k : all_compute_kernels)
    if (s == to_string(k)) return k;
  detail::fail(field, s, "one of \"dense\", \"fused\", \"fused_uvm\", \"fused_uvm_caching\"");
}

// The kernels BaseEmbeddingSharder.compute_kernels(type, "cuda") offers, in
// its order: dense for data_parallel, else fused, fused_uvm,
// fused_uvm_caching.
inline std::vector<compute_kernel> sharder_kernels(sharding_type s) {
  if (s == sharding_type::data_parallel) return {compute_kernel::dense};
  return {compute_kernel::fused, compute_kernel::fused_uvm, compute_kernel::fused_uvm_caching};
}

// types.py, Storage: bytes of device memory (hbm) and host memory (ddr).
// Python ints: a reserved capacity may go below zero. Ordered as TorchRec's
// dataclass(order=True): by hbm, then ddr.
struct storage {
  std::int64_t hbm = 0;
  std::int64_t ddr = 0;

  constexpr storage& operator+=(const storage& o) noexcept {
    hbm += o.hbm;
    ddr += o.ddr;
    return *this;
  }
  constexpr storage& operator-=(const storage& o) noexcept {
    hbm -= o.hbm;
    ddr -= o.ddr;
    return *this;
  }
  friend constexpr storage operator+(storage a, const storage& b) noexcept { return a += b; }
  friend constexpr storage operator-(storage a, const storage& b) noexcept { return a -= b; }
  constexpr bool fits_in(const storage& o) const noexcept { return hbm <= o.hbm && ddr <= o.ddr; }

  friend constexpr auto operator<=>(const storage&, const storage&) = default;
};

// constants.py of v0.3.2 (bandwidths in bytes per ms, as TorchRec keeps them).
namespace constants {
inline constexpr std::int64_t gib = std::int64_t{1} << 30;
// 600 * 1024^3 / 1000 and 12.5 * 1024^3 / 1000: exact in double, divided once.
inline const double intra_node_bandwidth = 600.0 * 1024 * 1024 * 1024 / 1000;
inline const double cross_node_bandwidth = 12.5 * 1024 * 1024 * 1024 / 1000;
inline constexpr std::int32_t min_cw_dim = 128;
inline constexpr std::int64_t bigint_dtype = 8;
inline constexpr std::int64_t hbm_cap = 32 * gib;
inline constexpr std::int64_t ddr_cap = 128 * gib;
inline const double ddr_mem_bw = 51.0 * 1024 * 1024 * 1024 / 1000;
inline const double hbm_mem_bw = 897.0 * 1024 * 1024 * 1024 / 1000;
inline constexpr double uvm_caching_ratio = 0.2;
inline constexpr std::int64_t batch_size = 512;
inline constexpr double batched_copy_perf_factor = 2.455;
inline constexpr std::int32_t full_block_emb_dim = 128;
inline constexpr double half_block_penalty = 1.15;
inline constexpr double quarter_block_penalty = 1.75;
inline constexpr double bwd_compute_multiplier = 2;
inline constexpr double dp_elementwise_kernels_perf_factor = 9.22;
// proposers.py, MAX_PROPOSALS (GridSearchProposer's limit).
inline constexpr std::uint64_t max_proposals = 10000;
// planners.py: HeuristicalStorageReservation(percentage=0.15) and its
// multipliers (storage_reservations.py: dense 6, KJT 20).
inline constexpr double reservation_percentage = 0.15;
inline constexpr std::int64_t kjt_multiplier = 20;
// Main branch only (constants.py, HBM_TO_DDR_MEM_BW): the uvm kernels' host
// side, 32 GB/s (main_branch_changes::uvm_bandwidth).
inline const double hbm_to_ddr_mem_bw = 32.0 * 1024 * 1024 * 1024 / 1000;
}  // namespace constants

// Where TorchRec's main branch (commit a48cef79, 2025-10-04) plans
// differently from v0.3.2, each a named switch, off by default: the preset is
// v0.3.2's (docs/torchrec.md, "v0.3.2 and TorchRec's main branch", cites
// each source). all() turns every one on. The first four change the
// estimators' figures (estimators.hpp, through cluster_inputs), the last the
// partitioner's choice of device.
struct main_branch_changes {
  // Column-wise and table-column-wise blocks all equal: the first multiple
  // of 4 from min_partition (or 128) up, below the dim, that divides it, else
  // the whole dim (448: 2 x 224), not v0.3.2's min_partition-wide blocks with
  // the rest in the last (128 + 128 + 192).
  bool even_column_blocks = false;
  // The uvm kernels' host side at 32 GB/s (HBM_TO_DDR_MEM_BW), not 51
  // (DDR_MEM_BW): fused_uvm host / 10, fused_uvm_caching (share x hbm + (1 -
  // share) x host) / 10, as before.
  bool uvm_bandwidth = false;
  // The uvm cache's own state in HBM, beside the cache: ceil(shard rows x (4
  // + 16 x cache share)) bytes per fused_uvm_caching shard.
  bool uvm_cache_state = false;
  // Table-row-wise inter-host all-to-all, forward and backward: batch x
  // (world / local) x dim x bytes (one rank per host), not v0.3.2's output
  // (batch x world x dim x bytes) x local / world.
  bool twrw_inter_host = false;
  // Devices of equal perf: the lower local rank first, across hosts
  // (0, 8, 1, 9, ... on hosts of 8), then the lower rank; v0.3.2: the lower
  // rank.
  bool local_rank_ties = false;

  static constexpr main_branch_changes all() noexcept { return {true, true, true, true, true}; }
  friend constexpr bool operator==(const main_branch_changes&,
                                   const main_branch_changes&) = default;
};

// How the planner is run: TorchRec's EmbeddingShardingPlanner arguments and
// the sharder's, on embplan's task (docs/torchrec.md, "From a task to
// TorchRec's inputs").
struct planner_options {
  // Per-rank batch (TorchRec's batch_size, whose default is 512); 0: the
  // task's global batch_size / devices, rounded down (at least 1).
  std::int64_t batch_size = 0;
  // Host memory per rank (Topology's ddr_cap); 0: each device's dram_bytes
  // where set, else TorchRec's 128 GiB.
  std::int64_t ddr_cap = 0;
  // HeuristicalStorageReservation's percentage.
  double reservation_percentage = constants::reservation_percentage;
  // Sharding types the sharder offers (a subset, kept in TorchRec's order);
  // empty: all six.
  std::vector<sharding_type> sharding_types{};
  // Compute kernels the sharder offers (a subset, kept in TorchRec's order);
  // empty: by each table's tier (hbm: fused, and dense for data_parallel;
  // uvm_caching: fused_uvm_caching; host: fused_uvm), as a ParameterConstraints
  // compute_kernels of the table's own kernel would. `all_kernels` offers
  // every kernel, as TorchRec's default sharder does.
  std::vector<compute_kernel> kernels{};
  bool all_kernels = false;
  // ParameterConstraints.min_partition (column-wise block width) for every
  // table; 0: none (TorchRec's MIN_CW_DIM, 128).
  std::int32_t min_partition = 0;
  // The fused_uvm_caching cache's share of rows (the sharder's
  // fused_params cache_load_factor); 0: a uvm_caching table's own
  // load_factor, else TorchRec's 0.2.
  double caching_ratio = 0.0;
  // GridSearchProposer's limit on the number of proposals.
  std::uint64_t max_proposals = constants::max_proposals;
  // Topology bandwidths, bytes per ms (TorchRec's defaults).
  double intra_host_bw = constants::intra_node_bandwidth;
  double inter_host_bw = constants::cross_node_bandwidth;
  // TorchRec main's differences (above); none by default.
  main_branch_changes main_branch{};
  // Partition every distinct proposal, as TorchRec does, so that `plans`
  // counts TorchRec's num_plans. Off by default: a proposal whose rating
  // cannot be below the best plan so far (a lower bound, planner.hpp) or
  // whose storage exceeds all devices' together is not partitioned; the plan
  // is the same, only `plans` then counts the partitions that ran.
  bool exhaustive = false;
  // Main's DynamicProgrammingProposer (proposers.py), alone in place of the
  // default proposers, as EmbeddingShardingPlanner(proposer=
  // DynamicProgrammingProposer(hbm_bins_per_device)) has it: per total-HBM
  // bin of the devices' reserved HBM, the options of least summed perf.
  // Not in v0.3.2; off by default.
  bool dynamic_programming = false;
  std::int32_t hbm_bins_per_device = 100;

  void validate() const {
    if (batch_size < 0)
      detail::fail("torchrec.batch_size", batch_size, "0 (auto) or a positive batch");
    if (ddr_cap < 0) detail::fail("torchrec.ddr_cap", ddr_cap, "0 (auto) or a positive byte count");
    if (!(reservation_percentage >= 0.0 && reservation_percentage <= 1.0)) {
      detail::fail("torchrec.reservation_percentage", reservation_percentage, "a share in [0, 1]");
    }
    if (min_partition < 0) {
      detail::fail("torchrec.min_partition", min_partition, "0 (none) or a positive width");
    }
    if (!(caching_ratio >= 0.0 && caching_ratio <= 1.0)) {
      detail::fail("torchrec.caching_ratio", caching_ratio, "0 (auto) or a share in (0, 1]");
    }
    if (!(std::isfinite(intra_host_bw) && intra_host_bw > 0.0)) {
      detail::fail("torchrec.intra_host_bw", intra_host_bw, "a positive bandwidth (bytes/ms)");
    }
    if (!(std::isfinite(inter_host_bw) && inter_host_bw > 0.0)) {
      detail::fail("torchrec.inter_host_bw", inter_host_bw, "a positive bandwidth (bytes/ms)");
    }
    if (hbm_bins_per_device < 1 || hbm_bins_per_device > 1'000'000) {
      detail::fail("torchrec.hbm_bins_per_device", hbm_bins_per_device,
                   "a bin count per device in [1, 1000000]");
    }
  }
};

namespace detail {

// Python's round(x) of a float: to the nearest integer, ties to even.
inline std::int64_t py_round(double x) {
  return static_cast<std::int64_t>(std::nearbyint(x));
}

// math.ceil(x) of a float.
inline std::int64_t py_ceil(double x) {
  return static_cast<std::int64_t>(std::ceil(x));
}

// Products of two byte or element counts (each below 2^63) are exact here
// (GCC and Clang; the library's compilers).
__extension__ typedef unsigned __int128 uint128;

// math.ceil(a / b) of Python ints a, b > 0: the true division rounds the exact
// quotient to the nearest double (ties to even), then ceil. Exact where the
// quotient is below 2^53 (the byte counts here are), refused above.
inline std::int64_t ceil_true_division(uint128 a, uint128 b) {
  if (b == 0) fail("torchrec: divisor", 0, "a positive integer");
  const uint128 q = a / b;
  const uint128 r = a % b;
  if (q >= (uint128{1} << 53)) {
    fail("torchrec: storage quotient", static_cast<double>(q), "below 2^53");
  }
  if (r == 0) return static_cast<std::int64_t>(q);
  if (q == 0) return 1;
  // q in [2^k, 2^(k+1)), k <= 52: the doubles there are 2^(k-52) apart, and
  // q + r/b rounds down to q where r/b < 2^(k-53) (a tie goes to the even
  // mantissa: q's where k < 52, whose last bit is 0).
  const int k = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(q))) - 1;
  const uint128 scaled = r << (53 - k);
  if (scaled < b) return static_cast<std::int64_t>(q);
  if (scaled == b && (k < 52 || (static_cast<std::uint64_t>(q) & 1u) == 0)) {
    return static_cast<std::int64_t>(q);
  }
  return static_cast<std::int64_t>(q + 1);
}

}  // namespace detail

}  // namespace embplan::inline EMBPLAN_ABI::torchrec
