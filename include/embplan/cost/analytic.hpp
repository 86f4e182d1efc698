#pragma once
// analytic_cost: a bandwidth roofline for the fused embedding-bag kernels and
// an all-to-all model for the pooled embeddings, with no training data needed.
//  - compute (per piece, NeuroShard §2.1): its rows read from DRAM in whole
//    sectors (so cost is not linear in the dimension, Observation 1), the
//    repeats of the hottest rows that fit the last-level cache read from it
//    (reuse model: cost/detail/reuse_cache.hpp), the pooled output written
//    once per bag, and a per-lookup issue cost; a device's pieces are one
//    fused launch (kernel_launch_ms + their sum), so multi-table cost is not
//    the sum of single-table costs (AutoShard §3.2, Observation 2); backward
//    = backward_factor x forward; a data-parallel copy runs 1/D of the bags;
//  - communication (DLRM model parallelism, AutoShard §2.1 / Fig. 3): each
//    device sends (B / D) x dim_sum[d] x 4 bytes to every other, at latency +
//    the slower of its intra-host and inter-host link classes; the forward
//    all-to-all also waits for the last device to start (NeuroShard §3.1 and
//    Fig. 1), the backward one does not;
//  - memory tiers (tiered_piece_forward_ms; core/memory_tier.hpp): a piece in
//    uvm_caching or host reads its cache misses over the host link at
//    host_bandwidth_gbps, the rest as in hbm.
// Bandwidths are GB/s; 1 GB/s = 1e6 bytes per millisecond. The options'
// defaults are calibrated, not measured.
// Design notes, with every formula: docs/design/analytic-cost.md.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/piecewise.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/detail/reuse_cache.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct analytic_cost_options {
  // Backward = backward_factor x forward. Backward sorts the indices, sums the
  // gradient per unique row and updates the row (a read and a write of every
  // touched row), about twice the forward's traffic; 2 is a working ratio to
  // calibrate against measurements, not a measured number.
  double backward_factor = 2.0;
  // Fixed cost of the one fused forward TBE kernel of a device (backward scales
  // it with the rest): a CUDA launch (~5 us) plus the kernel's setup; 20 us is
  // an order of magnitude to calibrate, and only matters for devices holding
  // few small tables.
  double kernel_launch_ms = 0.02;
  // DRAM access granularity: 32-byte sectors on every NVIDIA GPU since Maxwell
  // (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory").
  std::int32_t sector_bytes = 32;
  // Multiplier on the pooled fp32 output written once per bag (1: one write).
  double output_write_factor = 1.0;
  // Per-lookup cost beyond bytes moved. Calibrated, not measured: with 0.6 ns
  // the NeuroShard protocol's 4-GPU, max-dim-4 setting (10-60 tables, pooling
  // ~15, B = 65536) costs ~17-19 ms per task, the range NeuroShard Table 1
  // reports for 2080 Ti GPUs, where a pure bandwidth roofline would say ~1 ms.
  // Replace it with a value fitted to your own measurements.
  double lookup_overhead_ns = 0.6;
  // Host-link bandwidth a device reads host-resident rows at (the uvm_caching
  // tier's misses, every read of the host tier). PCIe 4.0 x16 carries 31.5
  // GB/s per direction on paper; 25 is a round figure below it for gathers of
  // single rows through unified memory, to calibrate against measurements.
  // Used by tiered_piece_forward_ms only.
  double host_bandwidth_gbps = 25.0;
};

namespace cost::detail {

inline void validate(const analytic_cost_options& o) {
  if (!std::isfinite(o.backward_factor) || o.backward_factor < 0.0) {
    embplan::detail::fail("analytic_cost.backward_factor", o.backward_factor,
                          "a finite number >= 0");
  }
  if (!std::isfinite(o.kernel_launch_ms) || o.kernel_launch_ms < 0.0) {
    embplan::detail::fail("analytic_cost.kernel_launch_ms", o.kernel_launch_ms,
                          "a finite time >= 0");
  }
  if (o.sector_bytes <= 0) {
    embplan::detail::fail("analytic_cost.sector_bytes", o.sector_bytes, "a positive size");
  }
  if (!std::isfinite(o.lookup_overhead_ns) || o.lookup_overhead_ns < 0.0) {
    embplan::detail::fail("analytic_cost.lookup_overhead_ns", o.lookup_overhead_ns,
                          "a finite time >= 0");
  }
  if (!std::isfinite(o.output_write_factor) || o.output_write_factor < 0.0) {
    embplan::detail::fail("analytic_cost.output_write_factor", o.output_write_factor,
                          "a finite number >= 0");
  }
  if (!std::isfinite(o.host_bandwidth_gbps) || o.host_bandwidth_gbps <= 0.0) {
    embplan::detail::fail("analytic_cost.host_bandwidth_gbps", o.host_bandwidth_gbps,
                          "a finite bandwidth > 0 (GB/s)");
  }
}

inline constexpr double bytes_per_ms_per_gbps = 1e6;

inline constexpr double pooled_bytes = 4.0;  // pooled outputs and their gradients are fp32

}  // namespace cost::detail

struct analytic_cost {
  analytic_cost_options options{};

  std::string_view name() const noexcept { return "analytic"; }

  // Whether communication() returns no negative figure for task t (true for
  // a valid topology: a latency >= 0 and positive bandwidths). A searcher may
  // then skip pricing a plan whose busiest device's compute alone already
  // costs as much as the best plan so far (search/detail/plan_pricer.hpp).
  bool communication_nonnegative(const task& t) const noexcept {
    return t.cluster.collective_latency_ms >= 0.0 && t.cluster.intra_host_bandwidth_gbps > 0.0 &&
           t.cluster.inter_host_bandwidth_gbps > 0.0;
  }

  // communication()'s forward figure is (max start - own start) + its
  // backward figure (concepts/cost_model.hpp): pricers derive it.
  bool forward_is_skew_plus_backward(const task&) const noexcept { return true; }

  // communication() is this model's all-to-all (concepts/cost_model.hpp):
  // a device's figures depend on its own column sum, its host's and the
  // cluster's, so a search may price the devices a change touches alone
  // (all_to_all_of, transfer_ms).
  bool all_to_all_is_analytic(const task&) const noexcept { return true; }

  // communication()'s constants for task t, and a device's transfer time
  // from them: latency + the slower of its intra-host and inter-host
  // exchanges, for a device whose own column sum is `own` in a host of
  // `host_devices` devices whose sums add to `host_dim`, the cluster's to
  // `total_dim`. On two or more devices, out[d].bwd_ms of communication() bit
  // for bit (communication() computes it so); the column sums are integers,
  // so any order of adding them gives the same doubles.
  struct all_to_all_terms {
    double devices = 0.0;
    double column_bytes = 0.0;  // bytes per column exchanged with one peer
    double intra_bpms = 0.0;    // bytes per ms inside a host
    double inter_bpms = 0.0;    // bytes per ms between hosts
    double latency_ms = 0.0;
  };
  static all_to_all_terms all_to_all_of(const task& t) noexcept {
    const auto n = static_cast<double>(t.cluster.size());
    return {.devices = n,
            .column_bytes = static_cast<double>(t.batch_size) / n * cost::detail::pooled_bytes,
            .intra_bpms = t.cluster.intra_host_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps,
            .inter_bpms = t.cluster.inter_host_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps,
            .latency_ms = t.cluster.collective_latency_ms};
  }
  static double transfer_ms(const all_to_all_terms& a, double own, double host_dim,
                            double host_devices, double total_dim) noexcept {
    const double intra_peers = host_devices - 1.0;
    const double inter_peers = a.devices - host_devices;
    const double intra_ms =
        std::max(intra_peers * own, host_dim - own) * a.column_bytes / a.intra_bpms;
    const double inter_ms =
        std::max(inter_peers * own, total_dim - host_dim) * a.column_bytes / a.inter_bpms;
    return a.latency_ms + std::max(intra_ms, inter_ms);
  }

  // Forward read + write of one piece on `device`, without the launch, in its
  // table's tier (tiered_piece_forward_ms off hbm).
  double piece_forward_ms(const task& t, const shard& s, std::size_t device) const {
    const tier_placement& where = t.tables[s.table].placement;
    if (where.tier != memory_tier::hbm) [[unlikely]] {
      return tiered_piece_forward_ms(t, s, device, where);
    }
    return hbm_piece_forward_ms(t, s, device);
  }

  // piece_forward_ms of the piece placed `where` (docs/design/analytic-cost.md):
  // equal to it in hbm; in uvm_caching and host, the misses read at
  // options.host_bandwidth_gbps. `where` overrides the table's own tier.
  double tiered_piece_forward_ms(const task& t, const shard& s, std::size_t device,
                                 const tier_placement& where) const {
    cost::detail::validate(options);
    check_device(t, device, "device");
    if (where.tier == memory_tier::hbm) {
      validate(where);
      return hbm_piece_forward_ms(t, s, device);
    }
    const auto& spec = t.tables[s.table];
    const auto& dev = t.cluster.devices[device];
    const piece_reads r = reads_of(t, s);
    const auto slots = static_cast<double>(device_rows(where, s.rows()));
    const double memory_bpms = dev.memory_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
    const double cache_bpms = dev.cache_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
    const double host_bpms = options.host_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
    const double served = cost::detail::cache_hits(spec.reuse_hist, r.lookups, slots);
    const double misses = r.lookups - served;
    const double l2_hits = cost::detail::cache_hits(
        spec.reuse_hist, r.lookups,
        std::min(static_cast<double>(dev.cache_bytes) / r.row_bytes, slots));
    const double read_ms = r.row_bytes * ((served - l2_hits) / memory_bpms + l2_hits / cache_bpms +
                                          misses / host_bpms);
    return read_ms + write_ms(t, s, memory_bpms) + issue_ms(r.lookups);
  }

  // shard_cost of the piece placed `where`: forward + backward, no launch.
  double tiered_shard_cost(const task& t, const shard& s, const tier_placement& where) const {
    check_device(t, s.device, "shard.device");
    return (1.0 + options.backward_factor) * tiered_piece_forward_ms(t, s, s.device, where);
  }

  // Additive estimate of one piece (forward + backward, no launch) on the
  // device it names; what sorted greedy orders and sums.
  double shard_cost(const task& t, const shard& s) const {
    cost::detail::validate(options);
    check_device(t, s.device, "shard.device");
    return (1.0 + options.backward_factor) * piece_forward_ms(t, s, s.device);
  }

  compute_cost compute(const task& t, std::span<const shard> group, std::size_t device) const {
    cost::detail::validate(options);
    check_device(t, device, "device");
    if (group.empty()) return {};
    double fwd_ms = options.kernel_launch_ms;  // one fused launch per device
    for (const auto& s : group)
      fwd_ms += piece_forward_ms(t, s, device);
    return compute_cost{.fwd_ms = fwd_ms, .bwd_ms = options.backward_factor * fwd_ms};
  }

  void communication(const task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<comm_cost> out) const {
    const std::size_t n = t.cluster.size();
    check_length("dim_sum.size", dim_sum.size(), n);
    check_length("start_ms.size", start_ms.size(), n);
    check_length("out.size", out.size(), n);
    if (n <= 1) {
      std::fill(out.begin(), out.end(), comm_cost{});
      return;
    }
    const auto per_host = static_cast<std::size_t>(t.cluster.devices_per_host);
    const std::size_t hosts = (n + per_host - 1) / per_host;
    // Per-host sums; on the stack for up to 16 hosts (the searchers price a
    // plan this way thousands of times per task).
    constexpr std::size_t inline_hosts = 16;
    std::array<double, inline_hosts> dim_buf{};
    std::array<double, inline_hosts> devices_buf{};
    std::vector<double> dim_heap;
    std::vector<double> devices_heap;
    double* host_dim = dim_buf.data();
    double* host_devices = devices_buf.data();
    if (hosts > inline_hosts) {
      dim_heap.assign(hosts, 0.0);
      devices_heap.assign(hosts, 0.0);
      host_dim = dim_heap.data();
      host_devices = devices_heap.data();
    }
    // Devices are numbered host by host (topology::host_of); walking them
    // with a running host index spares a division per device per call.
    double total_dim = 0.0;
    for (std::size_t d = 0, h = 0, k = 0; d < n; ++d) {
      host_dim[h] += static_cast<double>(dim_sum[d]);
      host_devices[h] += 1.0;
      total_dim += static_cast<double>(dim_sum[d]);
      if (++k == per_host) {
        k = 0;
        ++h;
      }
    }
    const all_to_all_terms a = all_to_all_of(t);
    const double last_start = *std::max_element(start_ms.begin(), start_ms.end());
    for (std::size_t d = 0, h = 0, k = 0; d < n; ++d) {
      const double transfer =
          transfer_ms(a, static_cast<double>(dim_sum[d]), host_dim[h], host_devices[h], total_dim);
      out[d] = comm_cost{.fwd_ms = (last_start - start_ms[d]) + transfer, .bwd_ms = transfer};
      if (++k == per_host) {
        k = 0;
        ++h;
      }
    }
  }

 private:
  struct piece_reads {
    double lookups = 0.0;    // batch x pooling factor x the piece's share of rows
    double row_bytes = 0.0;  // cols x dtype bytes, rounded up to whole sectors
  };

  // piece_forward_ms in hbm whatever the table's tier.
  double hbm_piece_forward_ms(const task& t, const shard& s, std::size_t device) const {
    const auto& spec = t.tables[s.table];
    const auto& dev = t.cluster.devices[device];
    const piece_reads r = reads_of(t, s);
    const double memory_bpms = dev.memory_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
    const double cache_bpms = dev.cache_bandwidth_gbps * cost::detail::bytes_per_ms_per_gbps;
    const double hits = cost::detail::cache_hits(
        spec.reuse_hist, r.lookups, static_cast<double>(dev.cache_bytes) / r.row_bytes);
    const double read_ms = r.row_bytes * ((r.lookups - hits) / memory_bpms + hits / cache_bpms);
    return read_ms + write_ms(t, s, memory_bpms) + issue_ms(r.lookups);
  }

  piece_reads reads_of(const task& t, const shard& s) const {
    const auto& spec = t.tables[s.table];
    const double batch = static_cast<double>(t.batch_size);
    // A data-parallel copy looks up its device's 1/D of the batch.
    const double share = s.data_parallel ? static_cast<double>(t.cluster.size()) : 1.0;
    const double lookups = batch * spec.pooling_factor * static_cast<double>(s.rows()) /
                           static_cast<double>(spec.rows) / share;
    const auto sector = static_cast<std::uint64_t>(options.sector_bytes);
    const std::uint64_t raw_row =
        static_cast<std::uint64_t>(s.cols()) * dtype_bytes(spec.weight_dtype);
    return {lookups, static_cast<double>((raw_row + sector - 1) / sector * sector)};
  }

  // The pooled output, written once per bag (a data-parallel copy's bags
  // are its device's 1/D of the batch).
  double write_ms(const task& t, const shard& s, double memory_bpms) const {
    const double bags =
        s.data_parallel ? static_cast<double>(t.batch_size) / static_cast<double>(t.cluster.size())
                        : static_cast<double>(t.batch_size);
    return bags * static_cast<double>(s.cols()) * cost::detail::pooled_bytes *
           options.output_write_factor / memory_bpms;
  }
  double issue_ms(double lookups) const { return lookups * options.lookup_overhead_ns * 1e-6; }

  static void check_device(const task& t, std::size_t device, std::string_view field) {
    if (device >= t.cluster.size()) {
      embplan::detail::fail(field, device,
                            "a device index below " + std::to_string(t.cluster.size()));
    }
  }
  static void check_length(std::string_view field, std::size_t got, std::size_t devices) {
    if (got != devices) {
      embplan::detail::fail(field, got, "one entry per device (" + std::to_string(devices) + ")");
    }
  }
};
static_assert(cost_model<analytic_cost>);

// analytic_cost::compute: fwd = launch, then += each piece's forward time in
// group order; bwd = backward_factor x fwd. The same additions in the same
// order, so the result is bitwise the same.
template <>
struct piecewise_compute<analytic_cost> {
  static constexpr bool enabled = true;
  static constexpr bool cache_groups = false;
  using term = double;
  using sum = double;

  static bool usable(const analytic_cost&) noexcept { return true; }

  static term piece(const analytic_cost& m, const task& t, const shard& s, std::size_t device) {
    return m.piece_forward_ms(t, s, device);
  }

  static sum start(const analytic_cost& m) noexcept { return m.options.kernel_launch_ms; }
  static void add(const analytic_cost&, sum& fwd_ms, term v) noexcept { fwd_ms += v; }

  static compute_cost finish(const analytic_cost& m, const task&, sum fwd_ms, std::size_t pieces,
                             std::size_t) noexcept {
    if (pieces == 0) return {};
    return compute_cost{.fwd_ms = fwd_ms, .bwd_ms = m.options.backward_factor * fwd_ms};
  }
};

}  // namespace embplan::inline EMBPLAN_ABI
