#pragma once
// The partitioner of torchrec_like (search/torchrec_like.hpp): TorchRec's
// GreedyPerfPartitioner over a proposal (one sharding option per table) that
// the proposers change one table at a time.
//  - The proposal's tables stay sorted by the partitioner's order (total perf
//    descending, then storage descending, then the lower index) as they
//    change: a change moves one entry, O(log T + T) by a shift instead of a
//    sort.
//  - Each shard goes to the admitted device with the smallest (perf sum,
//    memory, index): the devices sit in a binary heap on that key, and a
//    shard pops them in order until the constraint admits one (the refused
//    ones go back), O(log D) per shard where the constraint admits the first,
//    instead of comparing all D devices. Devices with too little room for a
//    shard (room_bounding_constraint) wait out of the heap until a shard
//    their room holds comes (pick()).
//  - A proposal need not be partitioned in full to lose: where every shard's
//    perf is >= 0 (perf sums only grow), a partition stops as soon as a device's
//    sum reaches the best rating so far, and a proposal whose lower bound
//    (its largest shard's perf; its total perf over D) reaches it is not
//    partitioned at all. Neither changes which proposal wins: torchrec_like
//    keeps a proposal only when its rating is strictly below the best.
// The proposal itself is never stored whole per proposal: the caller keeps the
// winner's choice and partitions it once more to build the plan.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::search::detail {

struct sharding_option {
  std::vector<shard> shards{};  // device unset
  std::vector<double> perf{};   // per shard
  double total_perf = 0.0;
  double depth_perf = 0.0;  // the largest shard's perf
  std::uint64_t storage = 0;
};

// The lower bound's slack on the mean perf per device: the running total
// drifts from the exact sum by a few ulps per change (at most ~1e-12 of it
// over 10^4 changes), so a bound shrunk by 1e-9 stays below every rating.
inline constexpr double mean_bound_slack = 1e-9;

class perf_partitioner {
 public:
  perf_partitioner(const task& t, const std::vector<std::vector<sharding_option>>& options)
      : t_(t), options_(options), choice_(options.size(), 0), depth_tree_(2 * options.size()) {
    for (const auto& table : options)
      for (const auto& o : table)
        for (const double p : o.perf)
          nonnegative_ = nonnegative_ && p >= 0.0;
  }

  // Whether every shard's perf is >= 0, so that perf sums only grow (and the
  // shortcuts of partition() and lower_bound() hold).
  bool nonnegative() const noexcept { return nonnegative_; }

  // The proposal: option index per table.
  std::span<const std::size_t> choice() const noexcept { return choice_; }

  // Sets the whole proposal.
  void assign(std::span<const std::size_t> choice) {
    const std::size_t tables = options_.size();
    std::copy(choice.begin(), choice.end(), choice_.begin());
    order_.clear();
    total_perf_ = 0.0;
    for (std::size_t i = 0; i < tables; ++i) {
      order_.push_back(entry_of(i));
      total_perf_ += option(i).total_perf;
      depth_tree_[tables + i] = option(i).depth_perf;
    }
    std::sort(order_.begin(), order_.end(), first);
    for (std::size_t n = tables; n-- > 1;)
      depth_tree_[n] = std::max(depth_tree_[2 * n], depth_tree_[2 * n + 1]);
  }

  // Table `table` takes its option `k`; the rest of the proposal stays.
  void change(std::size_t table, std::size_t k) {
    const entry old = entry_of(table);
    order_.erase(std::lower_bound(order_.begin(), order_.end(), old, first));
    total_perf_ -= option(table).total_perf;
    choice_[table] = k;
    const entry now = entry_of(table);
    order_.insert(std::lower_bound(order_.begin(), order_.end(), now, first), now);
    total_perf_ += option(table).total_perf;
    std::size_t n = options_.size() + table;
    depth_tree_[n] = option(table).depth_perf;
    for (n /= 2; n >= 1; n /= 2)
      depth_tree_[n] = std::max(depth_tree_[2 * n], depth_tree_[2 * n + 1]);
  }

  // A bound no rating of this proposal is below (where nonnegative()): its
  // largest shard's perf, and its total perf over the devices (less the slack).
  double lower_bound() const noexcept {
    if (options_.empty()) return 0.0;
    const double depth = depth_tree_[1];  // the root (the leaf itself for one table)
    const auto devices = static_cast<double>(t_.cluster.size());
    return std::max(depth, total_perf_ / devices * (1.0 - mean_bound_slack));
  }

  // GreedyPerfPartitioner on the proposal: returns the rating (the largest
  // device perf sum) and leaves failure empty; or sets `failure` (the first
  // shard that fits on no device, named as the searchers name it) and returns
  // infinity; or, where nonnegative() and a device's sum reaches `stop_at`,
  // stops and returns infinity with failure empty. Where `placed` is given,
  // the placed shards are appended to it in placement order.
  template <constraint Constraint>
  double partition(const Constraint& rule, double stop_at, std::string& failure,
                   plan* placed = nullptr) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const std::size_t devices = t_.cluster.size();
    if (!nonnegative_) stop_at = inf;
    st_ = placement_state(t_);
    load_.assign(devices, 0.0);
    heap_.clear();
    parked_.clear();
    for (std::size_t d = 0; d < devices; ++d)
      heap_.push_back(device_key{0.0, 0, static_cast<std::uint32_t>(d)});  // sorted: a heap
    double worst = devices ? 0.0 : inf;
    for (const entry& e : order_) {
      const auto& o = option(e.table);
      for (std::size_t k = 0; k < o.shards.size(); ++k) {
        shard s = o.shards[k];
        const std::size_t chosen = pick(rule, s);
        if (chosen == devices) {
          failure = no_device_for(t_, st_, e.table, rule);
          return inf;
        }
        st_.place(t_, s);
        load_[chosen] += o.perf[k];
        heap_.push_back(device_key{load_[chosen], st_.memory_bytes[chosen],
                                   static_cast<std::uint32_t>(chosen)});
        std::push_heap(heap_.begin(), heap_.end(), after);
        worst = std::max(worst, load_[chosen]);
        if (placed != nullptr) placed->shards.push_back(s);
        if (worst >= stop_at) return inf;
      }
    }
    return worst;
  }

  // The perf model's figures of the plan last partitioned in full (see
  // torchrec_like): device d's compute = its perf sum, no communication.
  void perf_of(plan_cost& out) const {
    out.devices.assign(load_.size(), device_cost{});
    for (std::size_t d = 0; d < load_.size(); ++d)
      out.devices[d].fwd_compute_ms = load_[d];
    out.memory_bytes = st_.memory_bytes;
    out.dim_sum = st_.dim_sum;
  }

 private:
  struct entry {
    double total_perf;
    std::uint64_t storage;
    std::size_t table;
  };
  // The partitioner's order: total perf descending, storage descending, index.
  static bool first(const entry& a, const entry& b) noexcept {
    return std::tie(b.total_perf, b.storage, a.table) < std::tie(a.total_perf, a.storage, b.table);
  }

  struct device_key {
    double load;
    std::uint64_t memory;
    std::uint32_t device;
  };
  // std heap order for a min-heap on (load, memory, index).
  static bool after(const device_key& a, const device_key& b) noexcept {
    return std::tie(a.load, a.memory, a.device) > std::tie(b.load, b.memory, b.device);
  }

  // A device taken out of heap_ by its room, in a max-heap on room.
  struct parked_device {
    std::uint64_t room;
    device_key key;
  };
  static bool less_room(const parked_device& a, const parked_device& b) noexcept {
    return a.room < b.room;
  }

  const sharding_option& option(std::size_t table) const noexcept {
    return options_[table][choice_[table]];
  }
  entry entry_of(std::size_t table) const noexcept {
    const auto& o = option(table);
    return entry{o.total_perf, o.storage, table};
  }

  // The admitted device with the smallest key, taken off the heap (its
  // caller pushes it back with its new key), with s.device set to it; D if
  // none is admitted. Refused devices go back unchanged, except those the
  // room refuses (room_bounding_constraint): they wait in parked_ until a
  // shard they have room for comes, so that a nearly full device is not
  // popped and pushed again at each shard it cannot take (on large clusters
  // with every option such pops would be most of torchrec_like's time;
  // docs/design/torchrec-like.md). A parked device's room and key do not
  // change while it waits (nothing is placed on it), and every device still
  // parked after the wake-up loop has less room than the shard's bytes, so
  // the constraint would refuse it: the same choice as popping them all.
  template <constraint Constraint>
  std::size_t pick(const Constraint& rule, shard& s) {
    constexpr bool sized =
        room_bounding_constraint<Constraint> || bytes_aware_constraint<Constraint>;
    const std::uint64_t bytes = sized ? shard_bytes(t_, s) : 0;
    if constexpr (room_bounding_constraint<Constraint>) {
      while (!parked_.empty() && parked_.front().room >= bytes) {
        std::pop_heap(parked_.begin(), parked_.end(), less_room);
        heap_.push_back(parked_.back().key);
        std::push_heap(heap_.begin(), heap_.end(), after);
        parked_.pop_back();
      }
    }
    refused_.clear();
    std::size_t chosen = t_.cluster.size();
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), after);
      const device_key k = heap_.back();
      heap_.pop_back();
      s.device = k.device;
      if constexpr (room_bounding_constraint<Constraint>) {
        const std::uint64_t room = room_of(rule, t_, st_, k.device);
        if (room < bytes) {
          parked_.push_back(parked_device{room, k});
          std::push_heap(parked_.begin(), parked_.end(), less_room);
          continue;
        }
      }
      if (admits_with_bytes(rule, t_, st_, s, bytes)) {
        chosen = k.device;
        break;
      }
      refused_.push_back(k);
    }
    for (const auto& k : refused_) {
      heap_.push_back(k);
      std::push_heap(heap_.begin(), heap_.end(), after);
    }
    return chosen;
  }

  const task& t_;
  const std::vector<std::vector<sharding_option>>& options_;
  bool nonnegative_ = true;
  std::vector<std::size_t> choice_;
  std::vector<entry> order_;        // the proposal's tables in the partitioner's order
  double total_perf_ = 0.0;         // sum of the chosen options' total perf
  std::vector<double> depth_tree_;  // max tree over the chosen options' depth perf
  placement_state st_;
  std::vector<double> load_;
  std::vector<device_key> heap_;
  std::vector<device_key> refused_;
  std::vector<parked_device> parked_;  // out of heap_ until a shard fits their room
};

}  // namespace embplan::inline EMBPLAN_ABI::search::detail
