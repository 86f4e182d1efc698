#pragma once
// broken_promises: checks, on random states of a task, the optional promises
// a policy type makes beside its concept (docs/extending.md, "Customisation
// points"): what a searcher relies on without asking again. Each returns one
// line per promise broken (the promise, the state, both answers), empty when
// all hold, so a test writes CHECK(broken_promises(rule, t).empty()). Meant
// for the tests of every policy, the library's and a user's.
//   Constraint: admits(t, st, s, bytes) answers as admits(t, st, s);
//     room(t, st, d) bounds every admitted shard's bytes and reads only
//     device d; reads_table_record() == false means the answers do not
//     change when the per-table record is dropped.
//   Reward: decreasing_in_max_cost means the score depends on the plan cost
//     through max_ms() alone and strictly decreases in it.
//   CostModel: the halves of split_communication are communication()'s bit
//     for bit; forward_is_skew_plus_backward holds bit for bit.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/reward.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

namespace concepts::detail {

// A random piece of a random table of t on a random device: the whole table,
// a column block (multiples of 4 where the dim allows) or a row range.
inline shard random_piece(const task& t, rng& gen) {
  const auto table = static_cast<std::size_t>(gen.below(t.tables.size()));
  shard s = whole_table(t, table, static_cast<std::size_t>(gen.below(t.cluster.size())));
  const auto kind = gen.below(3);
  if (kind == 1 && s.col_end >= 8) {
    const auto blocks = s.col_end / 4;
    const auto first = static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(blocks)));
    const auto last =
        first + 1 +
        static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(blocks - first)));
    s.col_begin = 4 * first;
    s.col_end = 4 * last;
  } else if (kind == 2 && s.row_end >= 2) {
    s.row_begin = gen.between(0, s.row_end - 2);
    s.row_end = gen.between(s.row_begin + 1, s.row_end);
  }
  return s;
}

inline std::string state_line(std::size_t trial, const task& t, const shard& s) {
  return "trial " + std::to_string(trial) + ", " + describe_shard(t, s);
}

}  // namespace concepts::detail

// The constraint promises of `c` on `trials` random states of `t` (each a
// random number of random pieces placed without asking c), seeded by `seed`.
template <constraint C>
std::vector<std::string> broken_promises(const C& c, const task& t, std::uint64_t seed = 0,
                                         std::size_t trials = 200) {
  std::vector<std::string> out;
  if (t.tables.empty() || t.cluster.size() == 0) return out;
  rng gen(seed);
  const bool promises_no_record = !reads_table_record(c);
  for (std::size_t trial = 0; trial < trials; ++trial) {
    placement_state kept(t);
    placement_state dropped(t);
    dropped.keep_table_record(false, t.tables.size());
    const auto placed = gen.below(2 * t.tables.size() + 1);
    for (std::uint64_t k = 0; k < placed; ++k) {
      const shard s = concepts::detail::random_piece(t, gen);
      kept.place(t, s);
      dropped.place(t, s);
    }
    const shard s = concepts::detail::random_piece(t, gen);
    const std::uint64_t bytes = shard_bytes(t, s);
    const bool answer = static_cast<bool>(c.admits(t, kept, s));
    const auto where = [&] { return concepts::detail::state_line(trial, t, s); };
    if constexpr (bytes_aware_constraint<C>) {
      if (static_cast<bool>(c.admits(t, kept, s, bytes)) != answer)
        out.push_back("admits(t, st, s, bytes) differs from admits(t, st, s): " + where());
    }
    if constexpr (room_bounding_constraint<C>) {
      const std::uint64_t room = room_of(c, t, kept, s.device);
      if (answer && bytes > room) {
        out.push_back("room() " + std::to_string(room) + " is below an admitted shard's " +
                      std::to_string(bytes) + " bytes: " + where());
      }
      if (t.cluster.size() > 1) {
        // Something placed on another device leaves this device's room as it was.
        shard other = concepts::detail::random_piece(t, gen);
        other.device = static_cast<std::uint32_t>((s.device + 1 + gen.below(t.cluster.size() - 1)) %
                                                  t.cluster.size());
        placement_state moved = kept;
        moved.place(t, other);
        if (room_of(c, t, moved, s.device) != room)
          out.push_back("room() of device " + std::to_string(s.device) +
                        " changed when a piece was placed on device " +
                        std::to_string(other.device) + ": " + where());
      }
    }
    if (promises_no_record && static_cast<bool>(c.admits(t, dropped, s)) != answer) {
      out.push_back(
          "reads_table_record() is false, but admits() answers otherwise without the per-table "
          "record: " +
          where());
    }
  }
  return out;
}

// The reward promise of `r` (decreasing_in_max_cost) on random plan costs
// of t's devices.
template <reward R>
std::vector<std::string> broken_reward_promises(const R& r, const task& t, std::uint64_t seed = 0,
                                                std::size_t trials = 200) {
  std::vector<std::string> out;
  if constexpr (reward_decreasing_in_max_cost<R>) {
    rng gen(seed);
    const std::size_t devices = std::max<std::size_t>(t.cluster.size(), 1);
    const auto random_cost = [&](double max_ms) {
      plan_cost c;
      c.devices.resize(devices);
      c.memory_bytes.assign(devices, 0);
      c.dim_sum.assign(devices, 0);
      for (auto& d : c.devices) {
        const double total = gen.uniform(0.0, max_ms);
        d.fwd_compute_ms = 0.4 * total;
        d.bwd_compute_ms = 0.6 * total;
      }
      c.devices[gen.below(devices)] = device_cost{.fwd_compute_ms = max_ms};
      return c;
    };
    for (std::size_t trial = 0; trial < trials; ++trial) {
      const double low = gen.uniform(0.5, 100.0);
      const double high = low * gen.uniform(1.01, 3.0);
      const plan_cost a = random_cost(low);
      const plan_cost b = random_cost(low);
      const plan_cost c = random_cost(high);
      const double sa = static_cast<double>(r.score(t, a));
      const double sb = static_cast<double>(r.score(t, b));
      const double sc = static_cast<double>(r.score(t, c));
      if (sa != sb)
        out.push_back("decreasing_in_max_cost: two plan costs of max " + std::to_string(low) +
                      " ms score " + std::to_string(sa) + " and " + std::to_string(sb) +
                      " (trial " + std::to_string(trial) + ")");
      if (!(sa > sc))
        out.push_back("decreasing_in_max_cost: max " + std::to_string(low) + " ms scores " +
                      std::to_string(sa) + ", not above max " + std::to_string(high) + " ms's " +
                      std::to_string(sc) + " (trial " + std::to_string(trial) + ")");
    }
  }
  return out;
}

// The cost model promises of `m` (split_communication's halves and
// forward_is_skew_plus_backward) on random column sums and start times of t.
template <cost_model M>
std::vector<std::string> broken_cost_promises(const M& m, const task& t, std::uint64_t seed = 0,
                                              std::size_t trials = 100) {
  std::vector<std::string> out;
  const std::size_t devices = t.cluster.size();
  if (devices == 0) return out;
  rng gen(seed);
  std::vector<std::int64_t> dim_sum(devices);
  std::vector<double> start(devices);
  std::vector<comm_cost> both(devices);
  std::vector<comm_cost> unskewed(devices);
  std::vector<double> half(devices);
  const std::vector<double> zero(devices, 0.0);
  for (std::size_t trial = 0; trial < trials; ++trial) {
    for (std::size_t d = 0; d < devices; ++d) {
      dim_sum[d] = 4 * gen.between(0, 256);
      start[d] = gen.uniform(0.0, 20.0);
    }
    const auto line = [&](const std::string& what, std::size_t d) {
      return what + " (trial " + std::to_string(trial) + ", device " + std::to_string(d) + ")";
    };
    m.communication(t, dim_sum, start, both);
    if constexpr (split_communication<M>) {
      m.backward_communication(t, dim_sum, half, true);
      for (std::size_t d = 0; d < devices; ++d)
        if (half[d] != both[d].bwd_ms)
          out.push_back(line("backward_communication() differs from communication()'s bwd_ms", d));
      m.forward_communication(t, dim_sum, start, half, true);
      for (std::size_t d = 0; d < devices; ++d)
        if (half[d] != both[d].fwd_ms)
          out.push_back(line("forward_communication() differs from communication()'s fwd_ms", d));
    }
    if (forward_is_skew_plus_backward(m, t)) {
      m.communication(t, dim_sum, zero, unskewed);
      const double last = *std::max_element(start.begin(), start.end());
      for (std::size_t d = 0; d < devices; ++d) {
        if (unskewed[d].bwd_ms != both[d].bwd_ms)
          out.push_back(
              line("forward_is_skew_plus_backward: bwd_ms depends on the start times", d));
        if (both[d].fwd_ms != (last - start[d]) + both[d].bwd_ms)
          out.push_back(line("forward_is_skew_plus_backward: fwd_ms is not skew + bwd_ms", d));
      }
    }
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI
