#pragma once
// TorchRec v0.3.2's shard layout and shard estimators, formula for formula:
//  - shard_layout: torchrec/distributed/sharding_plan.py,
//    calculate_shard_sizes_and_offsets (row-wise blocks of ceil(rows / n),
//    column-wise blocks of min_partition or 128 columns, the last block taking
//    the remainder);
//  - kernel_bandwidth: planner/constants.py, kernel_bw_lookup ("cuda");
//  - shard_perfs: planner/shard_estimators.py, EmbeddingPerfEstimator's
//    perf_func_emb_wall_time (_get_tw/_rw/_twrw/_dp_sharding_perf: forward
//    and backward compute, the outputs' all-to-all, the dim penalties, the
//    data-parallel all-reduce and optimizer kernels);
//  - shard_storages: planner/shard_estimators.py, EmbeddingStorageEstimator's
//    calculate_shard_storages (the tensor's share, its optimizer state, the
//    input and output buffers, the uvm cache).
// Each expression keeps Python's order of operations and its int/float
// semantics (types.hpp), so the doubles are TorchRec's to the last bit: the
// planner sorts and compares them, and a tie decides a plan.
// Only the training path of an EmbeddingBagCollection: pooled, unweighted,
// no feature processor, one input per table with num_poolings 1.
// cluster_inputs::main_branch turns on, one by one, what TorchRec's main
// branch (commit a48cef79) computes differently for such a collection
// planned with default arguments (types.hpp, main_branch_changes):
//  - even_column_blocks: sharding_plan.py, _get_block_size_for_cw_shard and
//    _find_base_dim;
//  - uvm_bandwidth: planner/constants.py, kernel_bw_lookup (HBM_TO_DDR_MEM_BW);
//  - uvm_cache_state: planner/shard_estimators.py,
//    _calculate_cache_aux_state_sizes;
//  - twrw_inter_host: planner/shard_estimators.py, EmbeddingPerfEstimator's
//    _get_twrw_sharding_perf.
// Each keeps the rest of the figure, its order of operations included, as
// v0.3.2 has it; all off, every figure is v0.3.2's.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/torchrec/types.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::torchrec {

// One shard of a sharding option: [rows, cols] at [row_offset, col_offset].
struct shard_block {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_offset = 0;
  std::int64_t col_offset = 0;

  friend bool operator==(const shard_block&, const shard_block&) = default;
};

// What the estimators read about the cluster (TorchRec's Topology) and the
// batch (the planner's batch_size, per rank).
struct cluster_inputs {
  std::int64_t world_size = 1;
  std::int64_t local_world_size = 1;
  std::int64_t batch_size = constants::batch_size;
  double intra_host_bw = constants::intra_node_bandwidth;
  double inter_host_bw = constants::cross_node_bandwidth;
  // TorchRec main's estimator changes to apply; none: v0.3.2's figures.
  main_branch_changes main_branch{};
};

// What they read about one table: its tensor and its ParameterConstraints.
struct table_inputs {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  double pooling_factor = 1.0;  // ParameterConstraints.pooling_factors[0]
  std::int64_t element_size = 4;
  optimizer optimizer_state = optimizer::none;  // the tensor's _optimizer_class
  double caching_ratio = constants::uvm_caching_ratio;
  std::int32_t min_partition = 0;  // 0: none
};

// The task's cluster and batch as TorchRec's (docs/torchrec.md, "From a task
// to TorchRec's inputs"): every device, local_world_size devices_per_host (at
// most the devices), the per-rank batch the global batch / devices (at least
// 1) unless o.batch_size, the options' bandwidths and main-branch changes.
inline cluster_inputs cluster_of(const task& t, const planner_options& o) {
  cluster_inputs c;
  const auto devices = static_cast<std::int64_t>(t.cluster.size());
  c.world_size = devices;
  c.local_world_size = std::min<std::int64_t>(t.cluster.devices_per_host, devices);
  c.batch_size =
      o.batch_size > 0 ? o.batch_size : std::max<std::int64_t>(1, t.batch_size / devices);
  c.intra_host_bw = o.intra_host_bw;
  c.inter_host_bw = o.inter_host_bw;
  c.main_branch = o.main_branch;
  return c;
}

// Table `i` of `t` as TorchRec reads it: its tensor (element size by dtype),
// pooling factor, the task's optimizer, the cache share (o.caching_ratio, else
// a uvm_caching table's load factor, else 0.2) and o.min_partition.
inline table_inputs table_of(const task& t, std::size_t i, const planner_options& o) {
  const auto& spec = t.tables[i];
  table_inputs x;
  x.rows = spec.rows;
  x.cols = spec.dim;
  x.pooling_factor = spec.pooling_factor;
  x.element_size = static_cast<std::int64_t>(dtype_bytes(spec.weight_dtype));
  x.optimizer_state = t.optimizer_state;
  x.caching_ratio = o.caching_ratio > 0.0 ? o.caching_ratio
                    : spec.placement.tier == memory_tier::uvm_caching
                        ? spec.placement.load_factor
                        : constants::uvm_caching_ratio;
  x.min_partition = o.min_partition;
  return x;
}

// calculate_shard_sizes_and_offsets.
inline std::vector<shard_block> shard_layout(sharding_type type, const table_inputs& table,
                                             const cluster_inputs& cluster) {
  const std::int64_t rows = table.rows;
  const std::int64_t cols = table.cols;
  std::vector<shard_block> out;
  // _calculate_rw_shard_sizes_and_offsets: blocks of ceil(rows / n), then the
  // remainder, then empty shards.
  const auto row_wise = [&](std::int64_t devices) {
    const std::int64_t block = (rows + devices - 1) / devices;
    const std::int64_t last_rank = rows / block;
    const std::int64_t last_block = rows - block * last_rank;
    std::int64_t offset = 0;
    for (std::int64_t rank = 0; rank < devices; ++rank) {
      const std::int64_t local = rank < last_rank ? block : rank == last_rank ? last_block : 0;
      out.push_back({local, cols, offset, 0});
      offset += local;
    }
  };
  switch (type) {
    case sharding_type::data_parallel:
      out.assign(static_cast<std::size_t>(cluster.world_size), shard_block{rows, cols, 0, 0});
      break;
    case sharding_type::table_wise:
      out.push_back({rows, cols, 0, 0});
      break;
    case sharding_type::row_wise:
      row_wise(cluster.world_size);
      break;
    case sharding_type::table_row_wise:
      row_wise(cluster.local_world_size);
      break;
    case sharding_type::column_wise:
    case sharding_type::table_column_wise: {
      const std::int64_t lower =
          table.min_partition > 0 ? table.min_partition : constants::min_cw_dim;
      if (cluster.main_branch.even_column_blocks) {
        // Main: _get_block_size_for_cw_shard, _find_base_dim: the first
        // multiple of 4 in [lower, cols) that divides cols, else cols; every
        // block that wide.
        std::int64_t block = cols;
        for (std::int64_t w = (lower + 3) / 4 * 4; w < cols; w += 4) {
          if (cols % w == 0) {
            block = w;
            break;
          }
        }
        for (std::int64_t i = 0; i < cols / block; ++i)
          out.push_back({rows, block, 0, block * i});
        break;
      }
      // _calculate_cw_shard_sizes_and_offsets.
      const std::int64_t block = std::min<std::int64_t>(lower, cols);
      const std::int64_t shards = cols / block;
      const std::int64_t residual = cols % block;
      for (std::int64_t i = 0; i < shards; ++i)
        out.push_back({rows, i + 1 < shards ? block : block + residual, 0, block * i});
      break;
    }
  }
  return out;
}

// kernel_bw_lookup("cuda", kernel, caching_ratio): bytes per ms. The uvm
// kernels' host side is DDR_MEM_BW, or with changes.uvm_bandwidth main's
// HBM_TO_DDR_MEM_BW (its kernel_bw_lookup keeps the / 10 and the mix).
inline double kernel_bandwidth(compute_kernel kernel, double caching_ratio,
                               const main_branch_changes& changes = {}) {
  using namespace constants;
  const double host_bw = changes.uvm_bandwidth ? hbm_to_ddr_mem_bw : ddr_mem_bw;
  switch (kernel) {
    case compute_kernel::dense:
      return 0.5 * hbm_mem_bw;
    case compute_kernel::fused:
      return 1 * hbm_mem_bw;
    case compute_kernel::fused_uvm:
      return host_bw / 10;
    case compute_kernel::fused_uvm_caching:
      return (caching_ratio * hbm_mem_bw + (1 - caching_ratio) * host_bw) / 10;
  }
  return hbm_mem_bw;
}

namespace detail {

// sum([x * y * z for x, y, z in zip(input_lengths, num_poolings, batch_sizes)])
// for one input with num_poolings 1.0: 0 + (pf * 1.0) * batch.
inline double batch_inputs(const table_inputs& table, const cluster_inputs& cluster) {
  return table.pooling_factor * 1.0 * static_cast<double>(cluster.batch_size);
}
// sum([x * y for x, y in zip(num_poolings, batch_sizes)]), pooled.
inline double batch_outputs(const cluster_inputs& cluster) {
  return 1.0 * static_cast<double>(cluster.batch_size);
}

}  // namespace detail

// perf_func_emb_wall_time: the perf (ms) of each shard of an option.
inline std::vector<double> shard_perfs(sharding_type type, compute_kernel kernel,
                                       const std::vector<shard_block>& shards,
                                       const table_inputs& table, const cluster_inputs& cluster) {
  using namespace constants;
  const double device_bw = kernel_bandwidth(kernel, table.caching_ratio, cluster.main_branch);
  const auto ws = static_cast<double>(cluster.world_size);
  const auto lws = static_cast<double>(cluster.local_world_size);
  const double out_size = static_cast<double>(table.element_size);
  const double in_size = static_cast<double>(bigint_dtype);
  const double bw_intra = cluster.intra_host_bw;
  const double bw_inter = cluster.inter_host_bw;
  const double comms_bw = cluster.world_size > cluster.local_world_size ? bw_inter : bw_intra;
  std::vector<double> out;
  out.reserve(shards.size());
  for (const auto& s : shards) {
    const auto emb_dim = static_cast<double>(s.cols);
    double perf = 0.0;
    switch (type) {
      case sharding_type::table_wise:
      case sharding_type::column_wise:
      case sharding_type::table_column_wise: {
        // _get_tw_sharding_perf.
        const double inputs = detail::batch_inputs(table, cluster);
        const double outputs = detail::batch_outputs(cluster);
        const auto input_read = static_cast<double>(detail::py_ceil(inputs * ws * in_size));
        const double lookup =
            inputs * ws * static_cast<double>(std::max<std::int64_t>(s.cols, 32)) * out_size;
        const double output_write = outputs * ws * emb_dim * out_size;
        double penalty = 1;
        if (s.cols < full_block_emb_dim) {
          penalty = s.cols >= 64 ? half_block_penalty : quarter_block_penalty;
        }
        const double fwd_comms = output_write / comms_bw;
        const double fwd_compute = (input_read + lookup + output_write) * penalty / device_bw;
        const double bwd_comms = fwd_comms;
        const double bwd_compute = fwd_compute * bwd_compute_multiplier;
        perf = bwd_comms + 0 + bwd_compute + fwd_compute + fwd_comms;
        break;
      }
      case sharding_type::row_wise: {
        // _get_rw_sharding_perf.
        const double inputs = detail::batch_inputs(table, cluster) / ws;
        const double outputs = detail::batch_outputs(cluster);
        const auto input_read = static_cast<double>(detail::py_ceil(inputs * ws * in_size));
        const double lookup = inputs * ws * emb_dim * out_size;
        const double output_write = outputs * ws * emb_dim * out_size;
        const double fwd_comms = output_write / comms_bw;
        const double fwd_compute = (input_read + lookup + output_write) / device_bw;
        const double bwd_comms = fwd_comms;
        const double bwd_batched_copy = output_write * batched_copy_perf_factor / device_bw;
        const double bwd_compute = fwd_compute * bwd_compute_multiplier;
        perf = bwd_comms + bwd_batched_copy + 0 + bwd_compute + fwd_compute + fwd_comms;
        break;
      }
      case sharding_type::table_row_wise: {
        // _get_twrw_sharding_perf.
        const double inputs = detail::batch_inputs(table, cluster) / lws;
        const double outputs = detail::batch_outputs(cluster);
        const auto input_read = static_cast<double>(detail::py_ceil(inputs * ws * in_size));
        const double lookup = inputs * ws * emb_dim * out_size;
        const double output_write = outputs * ws * emb_dim * out_size;
        double fwd_comms = output_write / bw_intra;
        if (cluster.world_size > cluster.local_world_size) {
          // Main: an all-to-all among one rank per host, batch x (world /
          // local) x dim x bytes, both ways (bwd_comms is the same sum).
          fwd_comms += cluster.main_branch.twrw_inter_host
                           ? outputs * (ws / lws) * emb_dim * out_size / bw_inter
                           : output_write * (lws / ws) / bw_inter;
        }
        const double fwd_compute = (input_read + lookup + output_write) / device_bw;
        const double bwd_comms = fwd_comms;
        const double bwd_batched_copy = output_write * batched_copy_perf_factor / device_bw;
        const double bwd_compute = fwd_compute * bwd_compute_multiplier;
        perf = bwd_comms + 0 + bwd_batched_copy + bwd_compute + fwd_compute + fwd_comms;
        break;
      }
      case sharding_type::data_parallel: {
        // _get_dp_sharding_perf; its input_data_type_size is the output's.
        const double inputs = detail::batch_inputs(table, cluster);
        const double outputs = detail::batch_outputs(cluster);
        const auto input_read = static_cast<double>(detail::py_ceil(inputs * out_size));
        const double lookup = inputs * emb_dim * out_size;
        const double output_write = outputs * emb_dim * out_size;
        // grad_num_elem * output_data_type_size: a Python int.
        const auto table_size = static_cast<double>(s.rows * s.cols * table.element_size);
        const double fwd_compute = (input_read + lookup + output_write) / device_bw;
        const double num_nodes = std::min(ws / lws, 2.0);
        double all_reduce = table_size * (2 * num_nodes - 1) / num_nodes / (bw_inter * lws);
        if (cluster.world_size > 2 * cluster.local_world_size) all_reduce *= 2;
        const double optimizer_kernels =
            table_size * dp_elementwise_kernels_perf_factor / device_bw;
        const double bwd_compute = fwd_compute * bwd_compute_multiplier;
        perf = all_reduce + optimizer_kernels + 0 + bwd_compute + fwd_compute;
        break;
      }
    }
    out.push_back(perf);
  }
  return out;
}

// _get_optimizer_multipler's product: the optimizer state's bytes for a
// tensor share of `bytes` (math.ceil(tensor_size * multiplier)). No optimizer
// class: none; SGD: 0; Adam: 2 x; RowWiseAdagrad: 1 / cols.
inline std::int64_t optimizer_bytes(std::int64_t bytes, optimizer o, std::int64_t cols) {
  switch (o) {
    case optimizer::none:
    case optimizer::sgd:
      return 0;
    case optimizer::adam:
      return bytes * 2;
    case optimizer::rowwise_adagrad:
      return detail::py_ceil(static_cast<double>(bytes) * (1.0 / static_cast<double>(cols)));
  }
  return 0;
}

// calculate_shard_storages on "cuda": each shard's hbm (its inputs, outputs,
// tensor share and optimizer state; for fused_uvm_caching the cache, round(
// bytes x caching ratio), in place of the tensor, and with main's
// uvm_cache_state the cache's own state) and ddr (the tensor share and its
// state for the uvm kernels).
inline std::vector<storage> shard_storages(sharding_type type, compute_kernel kernel,
                                           const std::vector<shard_block>& shards,
                                           const table_inputs& table,
                                           const cluster_inputs& cluster) {
  using namespace constants;
  const auto ws = static_cast<double>(cluster.world_size);
  const auto lws = static_cast<double>(cluster.local_world_size);
  const double out_size = static_cast<double>(table.element_size);
  const double in_size = static_cast<double>(bigint_dtype);
  const double inputs = detail::batch_inputs(table, cluster);
  const double outputs = detail::batch_outputs(cluster);
  // _calculate_shard_io_sizes.
  std::vector<std::int64_t> input_sizes(shards.size(), 0);
  std::vector<std::int64_t> output_sizes(shards.size(), 0);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const auto& s = shards[i];
    const auto cols = static_cast<double>(s.cols);
    const bool empty = s.rows * s.cols == 0;
    switch (type) {
      case sharding_type::data_parallel:
        input_sizes[i] = detail::py_ceil(inputs * in_size);
        output_sizes[i] = detail::py_ceil(outputs * static_cast<double>(table.cols) * out_size);
        break;
      case sharding_type::table_wise:
        input_sizes[i] = detail::py_ceil(inputs * ws * in_size);
        output_sizes[i] =
            detail::py_ceil(outputs * ws * static_cast<double>(table.cols) * out_size);
        break;
      case sharding_type::column_wise:
      case sharding_type::table_column_wise:
        input_sizes[i] = detail::py_ceil(inputs * ws * in_size);
        output_sizes[i] = detail::py_ceil(outputs * ws * cols * out_size);
        break;
      case sharding_type::row_wise:
      case sharding_type::table_row_wise: {
        const double share = inputs / (type == sharding_type::row_wise ? ws : lws);
        input_sizes[i] = empty ? 0 : detail::py_ceil(share * ws * in_size);
        output_sizes[i] = empty ? 0 : detail::py_ceil(outputs * ws * cols * out_size);
        break;
      }
    }
  }
  // The sharder's storage_usage: the whole tensor in hbm, or in ddr for the
  // uvm kernels; the cache in hbm for fused_uvm_caching.
  const std::int64_t tensor_bytes = table.element_size * table.rows * table.cols;
  const bool uvm =
      kernel == compute_kernel::fused_uvm || kernel == compute_kernel::fused_uvm_caching;
  std::int64_t hbm_storage = uvm ? 0 : tensor_bytes;
  const std::int64_t ddr_storage = uvm ? tensor_bytes : 0;
  if (kernel == compute_kernel::fused_uvm_caching) {
    hbm_storage = detail::py_round(static_cast<double>(ddr_storage) * table.caching_ratio);
  }
  // _calculate_storage_specific_sizes.
  const auto specific = [&](std::int64_t whole, const shard_block& s) {
    const std::int64_t tensor_size =
        type == sharding_type::data_parallel
            ? whole
            : detail::ceil_true_division(static_cast<detail::uint128>(whole) *
                                             static_cast<detail::uint128>(s.rows * s.cols),
                                         static_cast<detail::uint128>(table.rows * table.cols));
    return tensor_size + optimizer_bytes(tensor_size, table.optimizer_state, table.cols);
  };
  // Main: _calculate_cache_aux_state_sizes, math.ceil(rows * (4 + clf * 16))
  // of the shard's rows (a Python float product: 100,000 rows at 0.3 give
  // 880,001).
  const bool cache_state =
      cluster.main_branch.uvm_cache_state && kernel == compute_kernel::fused_uvm_caching;
  const auto cache_state_bytes = [&](const shard_block& s) -> std::int64_t {
    if (!cache_state) return 0;
    return detail::py_ceil(static_cast<double>(s.rows) * (4 + table.caching_ratio * 16));
  };
  std::vector<storage> out;
  out.reserve(shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    out.push_back({input_sizes[i] + output_sizes[i] + cache_state_bytes(shards[i]) +
                       specific(hbm_storage, shards[i]),
                   specific(ddr_storage, shards[i])});
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::torchrec
