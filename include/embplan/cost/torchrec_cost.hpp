#pragma once
// torchrec_cost: a plan priced as TorchRec v0.3.2 prices it -- each shard's
// perf by EmbeddingPerfEstimator (torchrec/estimators.hpp: forward and
// backward compute with its dim penalties, and the outputs' all-to-all), a
// device's figure the sum of its shards' perfs, the plan's the largest of
// them (NoopPerfModel.rate). TorchRec's perf is one number per shard, compute
// and communication together: compute() returns it as the device's forward
// figure (bwd_ms 0) and communication() returns zeros, so that a device's
// total is exactly TorchRec's per-rank sum (the sum taken in the group's
// order, which for a plan is the table order TorchRec sums in).
// A shard is read as the TorchRec sharding it is a piece of:
//  - a data-parallel copy: data_parallel, compute kernel dense;
//  - the whole table: table_wise; a block of its columns: column_wise (the
//    same formula as table_column_wise);
//  - a block of its rows: row_wise where it is one of TorchRec's row-wise
//    blocks over all D devices (ceil(rows / D) rows from row 0, the last one
//    short), table_row_wise where it is one over a host's L devices; a block
//    of neither layout (another planner's cut) is row_wise where it holds less
//    than 1/L of the rows (it must span hosts), else table_row_wise. On one
//    host (D = L) the two formulas agree. An empty block, which TorchRec
//    prices on its rank, is no shard in a plan: a table of fewer rows than
//    devices is priced without it.
// The kernel is the table's tier's: hbm fused, uvm_caching fused_uvm_caching
// with the table's load factor as the caching ratio, host fused_uvm. The
// per-rank batch is the task's batch / devices, TorchRec's bandwidths its
// defaults (torchrec::planner_options), as the `torchrec` preset plans.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/torchrec/estimators.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct torchrec_cost {
  torchrec::planner_options options{};

  std::string_view name() const noexcept { return "torchrec"; }

  // TorchRec's perf of one piece (ms).
  double shard_cost(const task& t, const shard& s) const {
    const auto& spec = t.tables[s.table];
    const auto c = torchrec::cluster_of(t, options);
    const auto x = torchrec::table_of(t, s.table, options);
    torchrec::sharding_type type = torchrec::sharding_type::table_wise;
    if (s.data_parallel) {
      type = torchrec::sharding_type::data_parallel;
    } else if (s.rows() < spec.rows) {
      // TorchRec's row blocks: ceil(rows / n) from row 0, the last one short.
      const auto block_of = [&](std::int64_t n) {
        const std::int64_t b = (spec.rows + n - 1) / n;
        if (s.row_end == spec.rows) {  // the last block: where that layout's last one starts
          return s.row_begin == (spec.rows % b == 0 ? spec.rows - b : spec.rows / b * b);
        }
        return s.rows() == b && s.row_begin % b == 0;
      };
      const bool twrw = block_of(c.local_world_size);
      const bool rw = block_of(c.world_size);
      type = !rw && (twrw || s.rows() * c.local_world_size >= spec.rows)
                 ? torchrec::sharding_type::table_row_wise
                 : torchrec::sharding_type::row_wise;
    } else if (s.cols() < spec.dim) {
      type = torchrec::sharding_type::column_wise;
    }
    torchrec::compute_kernel kernel = torchrec::compute_kernel::fused;
    if (type == torchrec::sharding_type::data_parallel) {
      kernel = torchrec::compute_kernel::dense;
    } else if (spec.placement.tier == memory_tier::uvm_caching) {
      kernel = torchrec::compute_kernel::fused_uvm_caching;
    } else if (spec.placement.tier == memory_tier::host) {
      kernel = torchrec::compute_kernel::fused_uvm;
    }
    const std::vector<torchrec::shard_block> block{{s.rows(), s.cols(), s.row_begin, s.col_begin}};
    return torchrec::shard_perfs(type, kernel, block, x, c)[0];
  }

  // The sum of the group's perfs, as the forward figure.
  compute_cost compute(const task& t, std::span<const shard> group, std::size_t) const {
    double sum = 0;
    for (const auto& s : group)
      sum += shard_cost(t, s);
    return {sum, 0.0};
  }

  // TorchRec's perf of a data-parallel shard holds its all-reduce, and of a
  // table-row-wise shard its intra-host traffic: evaluate() adds neither.
  bool prices_collectives(const task&) const noexcept { return true; }

  // Within each shard's perf: nothing apart.
  void communication(const task&, std::span<const std::int64_t>, std::span<const double>,
                     std::span<comm_cost> out) const {
    std::fill(out.begin(), out.end(), comm_cost{});
  }
};

}  // namespace embplan::inline EMBPLAN_ABI
