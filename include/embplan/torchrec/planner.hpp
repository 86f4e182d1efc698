#pragma once
// TorchRec v0.3.2's EmbeddingShardingPlanner (torchrec/distributed/planner/
// planners.py, EmbeddingShardingPlanner.plan) on embplan's task, piece by
// piece:
//  - inputs_of: the task as TorchRec's inputs (docs/torchrec.md, "From a task
//    to TorchRec's inputs"): one EmbeddingBagConfig per table, its
//    pooling factor as ParameterConstraints.pooling_factors, the devices as a
//    Topology, the global batch as the per-rank batch;
//  - enumerate_options: enumerators.py, EmbeddingEnumerator.enumerate (every
//    sharding type and compute kernel the sharder offers, in its order, with
//    _filter_compute_kernels' dense rule) and both estimators (estimators.hpp);
//  - reserve: storage_reservations.py, HeuristicalStorageReservation.reserve
//    (15 % of HBM, the dense parameters -- none in a module of embedding bags
//    only -- and 20 x the KJT input);
//  - the proposers: proposers.py, GridSearchProposer (where the product of the
//    option counts is at most max_proposals), GreedyProposer(use_depth=True),
//    GreedyProposer(use_depth=False), UniformProposer, in planners.py's
//    order; their feedback ignores the ratings (no threshold), so each
//    proposer's sequence is fixed and is generated here directly;
//  - partition: partitioners.py, GreedyPerfPartitioner.partition (uniform
//    options first, then the others by storage, largest first, each shard on
//    the fitting device of least perf; host-wise options on the host of least
//    perf that holds them);
//  - rating: perf_models.py, NoopPerfModel.rate (the largest per-rank sum of
//    shard perfs); the first proposal with the least rating is the plan, a
//    proposal seen before (planners.py's proposal_cache) is not partitioned
//    again.
// Deterministic: no randomness, no hash-ordered iteration.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/task.hpp"
#include "embplan/torchrec/estimators.hpp"
#include "embplan/torchrec/types.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::torchrec {

// One sharding option of one table, with its shards' estimates.
struct sharding_option {
  std::uint32_t table = 0;
  sharding_type type = sharding_type::table_wise;
  compute_kernel kernel = compute_kernel::fused;
  std::vector<shard_block> shards{};  // empty where enumerate_options kept none
  std::vector<double> perf{};         // per shard
  std::vector<storage> storages{};    // per shard
  // Over the shards, set by summarize(): ShardingOption.total_storage, the
  // perfs' sum (in shard order), least and largest.
  storage total{};
  double perf_sum = 0;
  double perf_min = 0;
  double perf_max = 0;

  void summarize() noexcept {
    total = {};
    for (const auto& x : storages)
      total += x;
    perf_sum = 0;
    for (const double p : perf)
      perf_sum += p;
    perf_min = perf.empty() ? 0 : *std::min_element(perf.begin(), perf.end());
    perf_max = perf.empty() ? 0 : *std::max_element(perf.begin(), perf.end());
  }
  // proposers.py, _sharding_option_score: the largest shard perf (use_depth)
  // or their sum (Python's sum from 0, in shard order).
  double score(bool use_depth) const noexcept { return use_depth ? perf_max : perf_sum; }
};

// The task as TorchRec's inputs.
struct planner_inputs {
  cluster_inputs cluster{};
  std::vector<std::string> names{};  // the tables' names, for messages
  std::vector<table_inputs> tables{};
  std::vector<std::vector<compute_kernel>> kernels{};  // offered per table; empty: all
  // ParameterConstraints.sharding_types per table (empty: any); inputs_of
  // leaves them empty.
  std::vector<std::vector<sharding_type>> sharding_types{};
  std::vector<storage> capacity{};  // per device, before the reservation
};

// A placed shard of the plan.
struct placed_shard {
  shard_block block{};
  std::int64_t rank = 0;
  double perf = 0.0;
  storage bytes{};

  friend bool operator==(const placed_shard&, const placed_shard&) = default;
};

// One table's ParameterSharding.
struct table_sharding {
  sharding_type type = sharding_type::table_wise;
  compute_kernel kernel = compute_kernel::fused;
  std::vector<placed_shard> shards{};
};

// Why no plan (PlannerErrorType): the proposals' least storage exceeds the
// reserved capacity of all devices together, or not.
enum class failure_kind : std::uint8_t { none, insufficient_storage, strict_constraints };

constexpr std::string_view to_string(failure_kind k) noexcept {
  switch (k) {
    case failure_kind::none:
      return "none";
    case failure_kind::insufficient_storage:
      return "insufficient_storage";
    case failure_kind::strict_constraints:
      return "strict_constraints";
  }
  return "none";
}

// What EmbeddingShardingPlanner.plan returns, and what it counted.
struct planner_result {
  bool ok = false;
  std::vector<table_sharding> tables{};  // by table index, when ok
  double rating = 0.0;                   // NoopPerfModel.rate of the plan (ms)
  std::vector<storage> reserved{};       // per device, after the reservation
  std::uint64_t proposals = 0;           // _num_proposals: distinct proposals partitioned
  std::uint64_t plans = 0;               // _num_plans: those that partitioned
  failure_kind failure = failure_kind::none;
  std::string message{};     // when !ok
  storage lowest_storage{};  // when !ok: the least storage of a proposal
};

namespace detail {

// TorchRec's training planner has fp32 and fp16 tables, no int8 ones.
inline void check_dtype(const table_spec& t, std::size_t index) {
  if (t.weight_dtype != dtype::int8) return;
  fail("tables[" + std::to_string(index) + "].dtype", to_string(t.weight_dtype),
       "fp32 or fp16 for TorchRec's training planner (an EmbeddingBagCollection has no int8 "
       "weights)");
}

inline std::int64_t as_bytes(std::uint64_t b, std::string_view field) {
  if (b > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    fail(field, b, "below 2^63 bytes");
  }
  return static_cast<std::int64_t>(b);
}

}  // namespace detail

// The kernels that keep a table in `tier`: fused (and dense, for
// data_parallel) in hbm, fused_uvm_caching in uvm_caching, fused_uvm in host.
inline std::vector<compute_kernel> tier_kernels(memory_tier tier) {
  switch (tier) {
    case memory_tier::hbm:
      break;
    case memory_tier::uvm_caching:
      return {compute_kernel::fused_uvm_caching};
    case memory_tier::host:
      return {compute_kernel::fused_uvm};
  }
  return {compute_kernel::dense, compute_kernel::fused};
}

// The task as TorchRec's inputs under `o` (see the header comment).
inline planner_inputs inputs_of(const task& t, const planner_options& o = {}) {
  validate(t);
  o.validate();
  planner_inputs in;
  in.cluster = cluster_of(t, o);
  for (std::size_t d = 0; d < t.cluster.size(); ++d) {
    const auto& dev = t.cluster.devices[d];
    const auto at = "cluster.devices[" + std::to_string(d) + "]";
    const std::int64_t ddr = o.ddr_cap > 0 ? o.ddr_cap
                             : dev.dram_bytes > 0
                                 ? detail::as_bytes(dev.dram_bytes, at + ".dram_bytes")
                                 : constants::ddr_cap;
    in.capacity.push_back({detail::as_bytes(dev.memory_bytes, at + ".memory_bytes"), ddr});
  }
  in.tables.reserve(t.tables.size());
  in.kernels.reserve(t.tables.size());
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    const auto& spec = t.tables[i];
    detail::check_dtype(spec, i);
    in.tables.push_back(table_of(t, i, o));
    in.names.push_back(spec.name);
    if (o.all_kernels) {
      in.kernels.emplace_back();
    } else if (!o.kernels.empty()) {
      in.kernels.push_back(o.kernels);
    } else {
      in.kernels.push_back(tier_kernels(spec.placement.tier));
    }
  }
  return in;
}

// EmbeddingEnumerator.enumerate: per table (in the task's order), per offered
// sharding type (`types` and the table's in.sharding_types; TorchRec
// intersects them through a Python set, whose order depends on the hash
// seed: here the sharder's order) and kernel (in the sharder's order), one
// option with its shards' perf and storage. A table with no option fails
// naming it. Without `keep_blocks` the options' shard blocks are not kept
// (plan() lays out only the chosen options' again: 32 of the 56 bytes per
// shard).
inline std::vector<std::vector<sharding_option>> enumerate_options(
    const planner_inputs& in, const std::vector<sharding_type>& types = {},
    bool keep_blocks = true) {
  std::vector<std::vector<sharding_option>> out(in.tables.size());
  for (std::size_t i = 0; i < in.tables.size(); ++i) {
    const auto& table = in.tables[i];
    for (const auto type : all_sharding_types) {
      if (!types.empty() && std::find(types.begin(), types.end(), type) == types.end()) continue;
      if (i < in.sharding_types.size() && !in.sharding_types[i].empty() &&
          std::find(in.sharding_types[i].begin(), in.sharding_types[i].end(), type) ==
              in.sharding_types[i].end()) {
        continue;
      }
      std::vector<compute_kernel> kernels = sharder_kernels(type);
      const auto& offered = in.kernels[i];
      if (!offered.empty()) {
        std::erase_if(kernels, [&](compute_kernel k) {
          return std::find(offered.begin(), offered.end(), k) == offered.end();
        });
      }
      // _filter_compute_kernels: dense goes where fused is offered too.
      if (std::find(kernels.begin(), kernels.end(), compute_kernel::fused) != kernels.end()) {
        std::erase(kernels, compute_kernel::dense);
      }
      for (const auto kernel : kernels) {
        sharding_option o;
        o.table = static_cast<std::uint32_t>(i);
        o.type = type;
        o.kernel = kernel;
        o.shards = shard_layout(type, table, in.cluster);
        o.perf = shard_perfs(type, kernel, o.shards, table, in.cluster);
        o.storages = shard_storages(type, kernel, o.shards, table, in.cluster);
        o.summarize();
        if (!keep_blocks) std::vector<shard_block>{}.swap(o.shards);
        out[i].push_back(std::move(o));
      }
    }
    if (out[i].empty()) {
      detail::fail("tables[" + std::to_string(i) + "]", "(no sharding option)",
                   "at least one sharding type and compute kernel the options offer for the table "
                   "(TorchRec: \"No available sharding type and compute kernel combination\")");
    }
  }
  return out;
}

// HeuristicalStorageReservation(percentage).reserve for a module of embedding
// bags only: each device's hbm to int((1 - percentage) x hbm), less
// ceil(batch x sum(pooling factors) x 8) x 20 for the KJT input.
inline std::vector<storage> reserve(const planner_inputs& in, double percentage) {
  double lengths = 0;
  for (const auto& t : in.tables)
    lengths += t.pooling_factor;
  const std::int64_t kjt = detail::py_ceil(static_cast<double>(in.cluster.batch_size) * lengths *
                                           static_cast<double>(constants::bigint_dtype)) *
                           constants::kjt_multiplier;
  std::vector<storage> out = in.capacity;
  for (auto& d : out) {
    d.hbm = static_cast<std::int64_t>((1 - percentage) * static_cast<double>(d.hbm));
    d.hbm -= kjt;
  }
  return out;
}

namespace detail {

struct device_state {
  storage room{};
  double perf = 0;
};

// GreedyPerfPartitioner over one proposal (an option per table). `ranks`
// receives each option's shards' ranks (by table). False where a shard fits
// nowhere (PlannerError). With `local_rank_ties` (main_branch_changes), a
// tie in perf between devices goes to the lower local rank, then the lower
// rank (main's OrderedDeviceHardware); else to the lower rank.
class partitioner {
 public:
  partitioner(const std::vector<std::vector<sharding_option>>& options,
              const std::vector<storage>& reserved, std::int64_t local_world_size,
              bool local_rank_ties = false)
      : options_(options)
      , reserved_(reserved)
      , local_(local_world_size)
      , local_ties_(local_rank_ties &&
                    local_world_size < static_cast<std::int64_t>(reserved.size())) {}

  bool partition(const std::vector<std::uint32_t>& choice,
                 std::vector<std::vector<std::int64_t>>& ranks) {
    devices_.assign(reserved_.size(), device_state{});
    for (std::size_t d = 0; d < reserved_.size(); ++d)
      devices_[d].room = reserved_[d];
    ranks.resize(choice.size());
    // _uniform_partition of the uniform options, in the proposal's order.
    for (std::size_t i = 0; i < choice.size(); ++i) {
      const auto& o = options_[i][choice[i]];
      if (partition_of(o.type) != partition_by::uniform) continue;
      if (!uniform(o, devices_, 0, ranks[i])) return false;
    }
    // The other options by total storage, largest first (a stable sort: ties
    // keep the proposal's order).
    order_.clear();
    for (std::size_t i = 0; i < choice.size(); ++i) {
      const auto& o = options_[i][choice[i]];
      if (partition_of(o.type) != partition_by::uniform) {
        order_.emplace_back(o.total, static_cast<std::uint32_t>(i));
      }
    }
    std::stable_sort(order_.begin(), order_.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [total, i] : order_) {
      const auto& o = options_[i][choice[i]];
      const bool placed = partition_of(o.type) == partition_by::host
                              ? cohost(o, total, ranks[i])
                              : device(o, devices_, local_ties_ ? local_ : 0, ranks[i]);
      if (!placed) return false;
    }
    return true;
  }

 private:
  // _uniform_partition on devices[first, first + shards).
  static bool uniform(const sharding_option& o, std::vector<device_state>& devices,
                      std::size_t first, std::vector<std::int64_t>& ranks) {
    ranks.assign(o.perf.size(), 0);
    for (std::size_t s = 0; s < o.perf.size(); ++s) {
      auto& d = devices[first + s];
      if (!o.storages[s].fits_in(d.room)) return false;
      ranks[s] = static_cast<std::int64_t>(first + s);
      d.room -= o.storages[s];
      d.perf += o.perf[s];
    }
    return true;
  }

  // A device's place among equal perfs: its rank, or (local rank, rank)
  // where `local` > 0.
  static std::uint64_t tie_of(std::size_t d, std::int64_t local) noexcept {
    if (local <= 0) return d;
    return (static_cast<std::uint64_t>(d % static_cast<std::size_t>(local)) << 32) | d;
  }

  // _device_partition: each shard on the device of least (perf, tie_of) it
  // fits (v0.3.2's sorted() is stable: ties go to the lower rank). One shard:
  // a scan; more: a min-heap of the devices, those a shard does not fit set
  // aside and put back, so each shard costs O(log devices).
  bool device(const sharding_option& o, std::vector<device_state>& devices, std::int64_t local,
              std::vector<std::int64_t>& ranks) {
    ranks.assign(o.perf.size(), 0);
    const std::size_t n = devices.size();
    if (o.perf.size() == 1) {
      for (std::size_t s = 0; s < o.perf.size(); ++s) {
        std::size_t best = n;
        for (std::size_t d = 0; d < n; ++d) {
          if (!o.storages[s].fits_in(devices[d].room)) continue;
          if (best == n || devices[d].perf < devices[best].perf ||
              (local > 0 && devices[d].perf == devices[best].perf &&
               tie_of(d, local) < tie_of(best, local))) {
            best = d;
          }
        }
        if (best == n) return false;
        ranks[s] = static_cast<std::int64_t>(best);
        devices[best].room -= o.storages[s];
        devices[best].perf += o.perf[s];
      }
      return true;
    }
    // A min-heap by (perf, tie): std::*_heap keep the largest on top, so
    // the comparison is reversed.
    const auto later = [](const heap_entry& a, const heap_entry& b) {
      return a.perf != b.perf ? a.perf > b.perf : a.tie > b.tie;
    };
    heap_.clear();
    for (std::size_t d = 0; d < n; ++d)
      heap_.push_back({devices[d].perf, tie_of(d, local), d});
    std::make_heap(heap_.begin(), heap_.end(), later);
    for (std::size_t s = 0; s < o.perf.size(); ++s) {
      aside_.clear();
      bool placed = false;
      while (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), later);
        auto top = heap_.back();
        heap_.pop_back();
        auto& d = devices[top.device];
        if (!o.storages[s].fits_in(d.room)) {
          aside_.push_back(top);
          continue;
        }
        ranks[s] = static_cast<std::int64_t>(top.device);
        d.room -= o.storages[s];
        d.perf += o.perf[s];
        top.perf = d.perf;
        heap_.push_back(top);
        std::push_heap(heap_.begin(), heap_.end(), later);
        placed = true;
        break;
      }
      if (!placed) return false;
      for (const auto& e : aside_) {
        heap_.push_back(e);
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
    return true;
  }

  // _cohost_partition: hosts by their devices' perf sum (stable), the first
  // whose room holds the option's total and on which it partitions.
  bool cohost(const sharding_option& o, const storage& total, std::vector<std::int64_t>& ranks) {
    const auto hosts =
        static_cast<std::size_t>(static_cast<std::int64_t>(devices_.size()) / local_);
    const auto per = static_cast<std::size_t>(local_);
    hosts_.clear();
    for (std::size_t h = 0; h < hosts; ++h) {
      double perf = 0;
      for (std::size_t d = h * per; d < (h + 1) * per; ++d)
        perf += devices_[d].perf;
      hosts_.emplace_back(perf, h);
    }
    std::stable_sort(hosts_.begin(), hosts_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [perf, h] : hosts_) {
      storage room;
      for (std::size_t d = h * per; d < (h + 1) * per; ++d)
        room += devices_[d].room;
      if (!total.fits_in(room)) continue;
      host_copy_.assign(devices_.begin() + static_cast<std::ptrdiff_t>(h * per),
                        devices_.begin() + static_cast<std::ptrdiff_t>((h + 1) * per));
      const bool ok = o.type == sharding_type::table_row_wise ? uniform(o, host_copy_, 0, ranks)
                                                              : device(o, host_copy_, 0, ranks);
      if (!ok) continue;
      for (auto& r : ranks)
        r += static_cast<std::int64_t>(h * per);
      std::copy(host_copy_.begin(), host_copy_.end(),
                devices_.begin() + static_cast<std::ptrdiff_t>(h * per));
      return true;
    }
    return false;
  }

  struct heap_entry {
    double perf;
    std::uint64_t tie;
    std::size_t device;
  };

  const std::vector<std::vector<sharding_option>>& options_;
  const std::vector<storage>& reserved_;
  std::int64_t local_;
  bool local_ties_;
  std::vector<device_state> devices_{};
  std::vector<std::pair<storage, std::uint32_t>> order_{};
  std::vector<std::pair<double, std::size_t>> hosts_{};
  std::vector<device_state> host_copy_{};
  std::vector<heap_entry> heap_{};
  std::vector<heap_entry> aside_{};
};

// NoopPerfModel.rate: per rank, the shards' perfs summed in the proposal's
// order; the largest sum.
inline double rate(const std::vector<std::vector<sharding_option>>& options,
                   const std::vector<std::uint32_t>& choice,
                   const std::vector<std::vector<std::int64_t>>& ranks, std::size_t devices,
                   std::vector<double>& perfs) {
  perfs.assign(devices, 0.0);
  for (std::size_t i = 0; i < choice.size(); ++i) {
    const auto& o = options[i][choice[i]];
    for (std::size_t s = 0; s < o.perf.size(); ++s)
      perfs[static_cast<std::size_t>(ranks[i][s])] += o.perf[s];
  }
  return *std::max_element(perfs.begin(), perfs.end());
}

// A proposal's identity for planners.py's proposal_cache: two 64-bit sums
// of a mix of (table, option index), one term per table, so that moving one
// table to another option updates it in O(1).
struct proposal_key {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  friend bool operator==(const proposal_key&, const proposal_key&) = default;
};
struct proposal_key_hash {
  std::size_t operator()(const proposal_key& k) const noexcept {
    return static_cast<std::size_t>(k.a ^ (k.b * 0x9E3779B97F4A7C15ull));
  }
};
inline std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// The proposal a proposer stands at (one option per table), with what the
// planner reads of it kept up to date as tables change options: its cache
// key, its storage (exact), and the parts of a lower bound on its rating
// (lower_bound).
class proposal {
 public:
  proposal(const std::vector<std::vector<sharding_option>>& options, std::size_t devices)
      : options_(options), devices_(devices), choice_(options.size(), 0) {
    for (std::size_t i = 0; i < choice_.size(); ++i)
      add(i);
  }

  const std::vector<std::uint32_t>& choice() const noexcept { return choice_; }
  const proposal_key& key() const noexcept { return key_; }
  const storage& total() const noexcept { return total_; }

  void set(std::size_t table, std::uint32_t option) {
    if (choice_[table] == option) return;
    remove(table);
    choice_[table] = option;
    add(table);
  }

  // No rank's perf sum can be below this: each uniform option puts a shard
  // on every device (at least its least shard perf each), and the largest
  // of the others' per-rank sums is at least their mean over the devices
  // and at least their largest shard. Exact as real numbers; the running
  // sums' rounding (bounded by slack_) is taken off, and the whole shrunk by
  // 1e-7 to stay below the rating as the planner sums it in floating point
  // (relative error under 1e-7 for fewer than 10^8 shards per rank).
  double lower_bound() const noexcept {
    const double mean = uniform_ + others_ / static_cast<double>(devices_) - slack_;
    double largest = 0;
    for (std::size_t i = 0; i < choice_.size(); ++i) {
      const auto& o = options_[i][choice_[i]];
      if (partition_of(o.type) != partition_by::uniform) largest = std::max(largest, o.perf_max);
    }
    return std::max(mean, uniform_ - slack_ + largest) * (1 - 1e-7);
  }
  // The same without the scan for the largest shard: O(1).
  double mean_bound() const noexcept {
    return (uniform_ + others_ / static_cast<double>(devices_) - slack_) * (1 - 1e-7);
  }

 private:
  std::uint64_t term(std::size_t table, std::uint64_t salt) const noexcept {
    return mix64((static_cast<std::uint64_t>(table) << 32 | choice_[table]) ^ salt);
  }
  void add(std::size_t i) {
    const auto& o = options_[i][choice_[i]];
    key_.a += term(i, 0x243F6A8885A308D3ull);
    key_.b += term(i, 0x13198A2E03707344ull);
    total_ += o.total;
    if (partition_of(o.type) == partition_by::uniform) {
      uniform_ += o.perf.size() == devices_ ? o.perf_min : 0.0;
    } else {
      others_ += o.perf_sum;
    }
    slack_ += std::numeric_limits<double>::epsilon() * (std::abs(uniform_) + std::abs(others_));
  }
  void remove(std::size_t i) {
    const auto& o = options_[i][choice_[i]];
    key_.a -= term(i, 0x243F6A8885A308D3ull);
    key_.b -= term(i, 0x13198A2E03707344ull);
    total_ -= o.total;
    if (partition_of(o.type) == partition_by::uniform) {
      uniform_ -= o.perf.size() == devices_ ? o.perf_min : 0.0;
    } else {
      others_ -= o.perf_sum;
    }
    slack_ += std::numeric_limits<double>::epsilon() * (std::abs(uniform_) + std::abs(others_));
  }

  const std::vector<std::vector<sharding_option>>& options_;
  std::size_t devices_;
  std::vector<std::uint32_t> choice_;
  proposal_key key_{};
  storage total_{};
  double uniform_ = 0;
  double others_ = 0;
  double slack_ = 0;  // a bound on the rounding in uniform_ and others_
};

// Each table's option indices sorted by _sharding_option_score (a stable
// sort: ties keep the enumeration's order).
inline std::vector<std::vector<std::uint32_t>> sorted_options(
    const std::vector<std::vector<sharding_option>>& options, bool use_depth) {
  std::vector<std::vector<std::uint32_t>> out(options.size());
  for (std::size_t i = 0; i < options.size(); ++i) {
    std::vector<std::pair<double, std::uint32_t>> keyed;
    for (std::uint32_t k = 0; k < options[i].size(); ++k)
      keyed.emplace_back(options[i][k].score(use_depth), k);
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [score, k] : keyed)
      out[i].push_back(k);
  }
  return out;
}

// "; table 'x' (index i) fits no device ..." for the first table none of
// whose options has every shard fitting some device's reserved storage; ""
// where each table alone has one.
inline std::string unplaceable_table(const planner_inputs& in,
                                     const std::vector<std::vector<sharding_option>>& options,
                                     const std::vector<storage>& reserved) {
  const auto fits_somewhere = [&](const storage& s) {
    return std::any_of(reserved.begin(), reserved.end(),
                       [&](const storage& d) { return s.fits_in(d); });
  };
  for (std::size_t i = 0; i < options.size(); ++i) {
    bool placeable = false;
    storage least{std::numeric_limits<std::int64_t>::max(),
                  std::numeric_limits<std::int64_t>::max()};
    for (const auto& o : options[i]) {
      placeable = placeable || std::all_of(o.storages.begin(), o.storages.end(), fits_somewhere);
      for (const auto& s : o.storages)
        if (s.hbm > 0 || s.ddr > 0) least = std::min(least, s);
    }
    if (placeable) continue;
    storage roomiest = reserved.front();
    for (const auto& d : reserved)
      roomiest = std::max(roomiest, d);
    return "; table '" + in.names[i] + "' (index " + std::to_string(i) +
           ") fits no device in any of its " + std::to_string(options[i].size()) +
           " options: its least shard needs hbm " + std::to_string(least.hbm) + " B and ddr " +
           std::to_string(least.ddr) + " B, the roomiest device has hbm " +
           std::to_string(roomiest.hbm) + " B and ddr " + std::to_string(roomiest.ddr) +
           " B after the reservation";
  }
  return "";
}

}  // namespace detail

namespace detail {

// Main's DynamicProgrammingProposer (proposers.py; not in v0.3.2), in
// table order: the tables ordered as its OrderedDict meets them (by their
// least-HBM option), each table's options by HBM (stable); then, after its
// first proposal (each table's least-HBM option, made by the caller), a
// knapsack over bins of the devices' reserved HBM together
// (hbm_bins_per_device x devices bins), the least perf sum per bin, and one
// proposal per reachable bin of the last table, from the largest bin down.
// Its floating-point steps (bin = bytes / bin size, truncated; perf sums in
// table order; strict improvements, options outer, bins inner) are main's.
// Refused where its tables x bins backtrack table would pass 2^26 entries
// (512 MiB).
inline std::vector<std::vector<std::uint32_t>> dynamic_programming_proposals(
    const std::vector<std::vector<sharding_option>>& options, const std::vector<storage>& reserved,
    std::int32_t bins_per_device, std::vector<std::uint32_t>& first) {
  const std::size_t tables = options.size();
  // Each table's options by HBM, and the tables by their least HBM.
  std::vector<std::vector<std::uint32_t>> by_hbm(tables);
  for (std::size_t i = 0; i < tables; ++i) {
    for (std::uint32_t k = 0; k < options[i].size(); ++k)
      by_hbm[i].push_back(k);
    std::stable_sort(by_hbm[i].begin(), by_hbm[i].end(), [&](std::uint32_t a, std::uint32_t b) {
      return options[i][a].total.hbm < options[i][b].total.hbm;
    });
  }
  std::vector<std::size_t> order(tables);
  for (std::size_t i = 0; i < tables; ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return options[a][by_hbm[a][0]].total.hbm < options[b][by_hbm[b][0]].total.hbm;
  });
  first.assign(tables, 0);
  for (std::size_t i = 0; i < tables; ++i)
    first[i] = by_hbm[i][0];

  std::int64_t hbm_total = 0;
  for (const auto& d : reserved)
    hbm_total += d.hbm;
  const auto bins = static_cast<std::size_t>(bins_per_device) * reserved.size();
  if (tables == 0 || hbm_total <= 0) return {};
  if (tables * bins > (std::size_t{1} << 26)) {
    detail::fail("torchrec.dynamic_programming",
                 std::to_string(tables) + " tables x " + std::to_string(bins) + " bins",
                 "at most 2^26 (67,108,864) cells of the proposer's backtrack table: fewer "
                 "hbm_bins_per_device, or the default proposers");
  }
  const double bin_size = static_cast<double>(hbm_total) / static_cast<double>(bins);
  constexpr double inf = std::numeric_limits<double>::infinity();
  struct cell {
    double perf = inf;
    double hbm = inf;
  };
  struct step {
    std::int32_t option = -1;
    std::int32_t from = -1;
  };
  std::vector<cell> prev(bins);
  std::vector<cell> cur(bins);
  std::vector<step> back(tables * bins);
  for (std::size_t t = 0; t < tables; ++t) {
    const std::size_t i = order[t];
    std::fill(cur.begin(), cur.end(), cell{});
    // Main runs j over the most options any table has; a table's missing
    // ones (its inf) never reach a bin.
    for (std::size_t j = 0; j < by_hbm[i].size(); ++j) {
      const auto& o = options[i][by_hbm[i][j]];
      const double hbm = static_cast<double>(o.total.hbm) / bin_size;
      const double perf = o.perf_sum;
      if (t == 0) {
        if (!(hbm < static_cast<double>(bins))) continue;
        const auto b = static_cast<std::size_t>(hbm);
        if (cur[b].perf > perf) {
          cur[b] = {perf, hbm};
          back[b] = {static_cast<std::int32_t>(j), -1};
        }
        continue;
      }
      for (std::size_t b = 0; b < bins; ++b) {
        if (!(prev[b].perf < inf)) continue;
        const double at = prev[b].hbm + hbm;
        if (!(at < static_cast<double>(bins))) continue;
        const auto to = static_cast<std::size_t>(at);
        const double sum = prev[b].perf + perf;
        if (cur[to].perf > sum) {
          cur[to] = {sum, at};
          back[t * bins + to] = {static_cast<std::int32_t>(j), static_cast<std::int32_t>(b)};
        }
      }
    }
    std::swap(prev, cur);
  }
  std::vector<std::vector<std::uint32_t>> out;
  for (std::size_t c = bins; c-- > 0;) {
    step s = back[(tables - 1) * bins + c];
    if (s.option < 0) continue;
    std::vector<std::uint32_t> proposal(tables, 0);
    for (std::size_t t = tables; t-- > 0;) {
      const std::size_t i = order[t];
      proposal[i] = by_hbm[i][static_cast<std::size_t>(s.option)];
      if (t > 0) s = back[(t - 1) * bins + static_cast<std::size_t>(s.from)];
    }
    out.push_back(std::move(proposal));
  }
  return out;
}

}  // namespace detail

// EmbeddingShardingPlanner(topology, batch_size, constraints).plan on the
// task's inputs (inputs_of), with the sharder offering `o.sharding_types`.
inline planner_result plan(const planner_inputs& in, const planner_options& o = {}) {
  o.validate();
  planner_result out;
  const auto options = enumerate_options(in, o.sharding_types, false);
  out.reserved = reserve(in, o.reservation_percentage);
  const std::size_t tables = options.size();
  const std::size_t devices = in.capacity.size();

  detail::partitioner partitioner(options, out.reserved, in.cluster.local_world_size,
                                  o.main_branch.local_rank_ties);
  std::unordered_set<detail::proposal_key, detail::proposal_key_hash> seen;
  std::vector<std::vector<std::int64_t>> ranks;
  std::vector<double> perfs;
  std::vector<std::uint32_t> best;
  double best_rating = static_cast<double>(std::numeric_limits<std::int64_t>::max());  // MAX_SIZE
  bool any = false;
  storage lowest{std::numeric_limits<std::int64_t>::max(),
                 std::numeric_limits<std::int64_t>::max()};
  storage global;
  for (const auto& d : out.reserved)
    global += d;
  detail::proposal current(options, devices);
  // planners.py's loop body for the proposal `current` stands at. Two
  // shortcuts give the same plan and counts as partitioning it would:
  // storage beyond all devices' together cannot partition, and unless
  // o.exhaustive, a proposal whose lower bound is not below the best rating
  // cannot replace the best plan (the first of the least rating), so it is
  // not partitioned (then `plans` counts only the partitions that ran).
  const auto consider = [&] {
    if (!seen.insert(current.key()).second) return;  // proposal_cache
    ++out.proposals;
    if (!current.total().fits_in(global)) {
      lowest = std::min(lowest, current.total());
      return;
    }
    if (!o.exhaustive && any &&
        (current.mean_bound() >= best_rating || current.lower_bound() >= best_rating)) {
      return;
    }
    const auto& choice = current.choice();
    if (partitioner.partition(choice, ranks)) {
      ++out.plans;
      const double rating = detail::rate(options, choice, ranks, devices, perfs);
      if (rating < best_rating) {
        best_rating = rating;
        best = choice;
        any = true;
      }
    } else {
      lowest = std::min(lowest, current.total());
    }
  };

  if (o.dynamic_programming) {
    // Main's DynamicProgrammingProposer alone: its first proposal, then
    // the knapsack's.
    std::vector<std::uint32_t> first;
    const auto proposals =
        detail::dynamic_programming_proposals(options, out.reserved, o.hbm_bins_per_device, first);
    for (std::size_t i = 0; i < tables; ++i)
      current.set(i, first[i]);
    consider();
    for (const auto& p : proposals) {
      for (std::size_t i = 0; i < tables; ++i)
        current.set(i, p[i]);
      consider();
    }
  } else {
    // GridSearchProposer: every combination of the options sorted by depth,
    // the last table's fastest (itertools.product), where there are at most
    // max_proposals of them.
    {
      const auto sorted = detail::sorted_options(options, true);
      std::uint64_t total = 1;
      for (const auto& t : options) {
        total = total > o.max_proposals ? total : total * t.size();
      }
      if (total <= o.max_proposals) {
        std::vector<std::size_t> at(tables, 0);
        for (std::size_t i = 0; i < tables; ++i)
          current.set(i, sorted[i][0]);
        for (;;) {
          consider();
          bool done = true;
          for (std::size_t i = tables; i-- > 0;) {
            if (++at[i] < sorted[i].size()) {
              current.set(i, sorted[i][at[i]]);
              done = false;
              break;
            }
            at[i] = 0;
            current.set(i, sorted[i][0]);
          }
          if (done) break;
        }
      }
    }
    // GreedyProposer(use_depth) then GreedyProposer(use_depth=False): each
    // table's best option; then, one at a time, the table whose current option
    // has the largest (max hbm, sum hbm, max ddr, sum ddr) over its shards
    // (strictly larger than every earlier table's, and than all-zero) and a
    // next option moves to it: the first of a set ordered by that key, then
    // by table.
    for (const bool use_depth : {true, false}) {
      const auto sorted = detail::sorted_options(options, use_depth);
      std::vector<std::size_t> at(tables, 0);
      using key4 = std::array<std::int64_t, 4>;
      const auto key_of = [&](std::size_t i) {
        const auto& opt = options[i][sorted[i][at[i]]];
        key4 k{0, 0, 0, 0};
        for (const auto& s : opt.storages) {
          k[0] = std::max(k[0], s.hbm);
          k[1] += s.hbm;
          k[2] = std::max(k[2], s.ddr);
          k[3] += s.ddr;
        }
        return k;
      };
      const auto first = [](const std::pair<key4, std::size_t>& x,
                            const std::pair<key4, std::size_t>& y) {
        return x.first != y.first ? x.first > y.first : x.second < y.second;
      };
      std::set<std::pair<key4, std::size_t>, decltype(first)> movable(first);
      for (std::size_t i = 0; i < tables; ++i) {
        current.set(i, sorted[i][0]);
        if (sorted[i].size() > 1) movable.emplace(key_of(i), i);
      }
      for (;;) {
        consider();
        if (movable.empty() || movable.begin()->first == key4{0, 0, 0, 0}) break;
        const std::size_t largest = movable.begin()->second;
        movable.erase(movable.begin());
        ++at[largest];
        current.set(largest, sorted[largest][at[largest]]);
        if (at[largest] + 1 < sorted[largest].size()) movable.emplace(key_of(largest), largest);
      }
    }
    // UniformProposer: per sharding type (in the order the enumeration first
    // meets them) that every table has, each table's best option of that type
    // by depth.
    {
      std::vector<sharding_type> met;
      for (const auto& t : options)
        for (const auto& opt : t)
          if (std::find(met.begin(), met.end(), opt.type) == met.end()) met.push_back(opt.type);
      std::vector<std::uint32_t> choice(tables, 0);
      for (const auto type : met) {
        bool every = true;
        for (std::size_t i = 0; i < tables && every; ++i) {
          double best_score = 0;
          bool found = false;
          for (std::uint32_t k = 0; k < options[i].size(); ++k) {
            const auto& opt = options[i][k];
            if (opt.type != type) continue;
            const double score = opt.score(true);
            if (!found || score < best_score) {
              best_score = score;
              choice[i] = k;
              found = true;
            }
          }
          every = found;
        }
        if (!every) continue;
        for (std::size_t i = 0; i < tables; ++i)
          current.set(i, choice[i]);
        consider();
      }
    }
  }  // the default proposers

  if (!any) {
    out.lowest_storage = lowest;
    out.failure = lowest.fits_in(global) ? failure_kind::strict_constraints
                                         : failure_kind::insufficient_storage;
    out.message =
        out.failure == failure_kind::insufficient_storage
            ? "TorchRec's planner: no plan, because of insufficient storage (" +
                  std::to_string(out.proposals) +
                  " proposals; the least storage a proposal needs, hbm " +
                  std::to_string(lowest.hbm) + " B and ddr " + std::to_string(lowest.ddr) +
                  " B, is more than the hbm " + std::to_string(global.hbm) + " B and ddr " +
                  std::to_string(global.ddr) + " B left after the reservation)"
            : "TorchRec's planner: no plan, because of the strict constraints (" +
                  std::to_string(out.proposals) + " proposals; none partitions onto the devices)";
    out.message += detail::unplaceable_table(in, options, out.reserved);
    return out;
  }
  partitioner.partition(best, ranks);
  out.ok = true;
  out.rating = best_rating;
  out.tables.resize(tables);
  for (std::size_t i = 0; i < tables; ++i) {
    const auto& opt = options[i][best[i]];
    auto& t = out.tables[i];
    t.type = opt.type;
    t.kernel = opt.kernel;
    const auto blocks = shard_layout(opt.type, in.tables[i], in.cluster);
    for (std::size_t s = 0; s < blocks.size(); ++s)
      t.shards.push_back({blocks[s], ranks[i][s], opt.perf[s], opt.storages[s]});
  }
  return out;
}

// The same on a task (inputs_of(t, o)).
inline planner_result plan(const task& t, const planner_options& o = {}) {
  return plan(inputs_of(t, o), o);
}

// A table moved to the tier of the compute kernel TorchRec chose for it.
struct kernel_move {
  std::size_t table = 0;
  compute_kernel kernel = compute_kernel::fused;
  tier_placement placement{};  // where it went
};

// TorchRec's default sharder (every kernel: o.all_kernels) plans `t`, and each
// table whose kernel keeps it in another tier than the task's moves there:
// fused and dense to hbm, fused_uvm_caching to uvm_caching with the cache's
// share (the table's caching ratio) as the load factor, fused_uvm to host.
// Nothing moves where TorchRec finds no plan. `fixed[i]`: table i keeps its
// tier (a user's rule gives it one), offered its tier's kernel only. A
// pre-pass, like stage::choose_tiers: the moved task is what every planner
// then plans.
inline std::vector<kernel_move> choose_kernel_tiers(task& t, planner_options o = {},
                                                    const std::vector<bool>& fixed = {}) {
  o.all_kernels = true;
  auto in = inputs_of(t, o);
  for (std::size_t i = 0; i < fixed.size() && i < t.tables.size(); ++i)
    if (fixed[i]) in.kernels[i] = tier_kernels(t.tables[i].placement.tier);
  const auto r = plan(in, o);
  std::vector<kernel_move> out;
  if (!r.ok) return out;
  for (std::size_t i = 0; i < r.tables.size(); ++i) {
    const auto kernel = r.tables[i].kernel;
    tier_placement where{};
    if (kernel == compute_kernel::fused_uvm_caching) {
      where = {memory_tier::uvm_caching, in.tables[i].caching_ratio};
    } else if (kernel == compute_kernel::fused_uvm) {
      where = {memory_tier::host, 0.0};
    }
    auto& placement = t.tables[i].placement;
    if (where.tier == placement.tier &&
        (where.tier != memory_tier::uvm_caching || where.load_factor == placement.load_factor)) {
      continue;
    }
    placement = where;
    out.push_back({i, kernel, where});
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::torchrec
