#pragma once
// The CostModel contract (docs/design.md, "The four policies"). A cost model answers
// three questions, all in milliseconds:
//  - shard_cost(task, shard): a scalar for one piece, used to order and to
//    balance additive loads (the papers' greedy baselines sort by it);
//  - compute(task, shards, device): forward and backward compute of the fused
//    group of shards on one device (not necessarily the sum of the pieces);
//  - communication(task, dim_sum, start_ms, out): per-device all-to-all costs
//    given each device's sum of held columns and the time each device starts
//    its forward all-to-all (NeuroShard §2.2: late starters make others wait).
// A device's figures may depend on its device_spec, but not on its
// capacities (memory_bytes, dram_bytes: what the constraints read): searchers
// price devices that differ only there as one (search/detail/cost_cache.hpp,
// device_kinds).

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

template <class M>
concept cost_model = std::copy_constructible<M> &&
    requires(const M& m, const task& t, const shard& s, std::span<const shard> group,
             std::size_t device, std::span<const std::int64_t> dim_sum,
             std::span<const double> start_ms, std::span<comm_cost> out) {
  { m.name() } -> std::convertible_to<std::string_view>;
  { m.shard_cost(t, s) } -> std::convertible_to<double>;
  { m.compute(t, group, device) } -> std::same_as<compute_cost>;
  { m.communication(t, dim_sum, start_ms, out) } -> std::same_as<void>;
};

// An optional refinement: a model whose communication's two halves can be
// asked for separately, where computing one is cheaper than computing both
// (a learned model runs one network per half: cost/neural_comm.hpp).
//  - backward_communication(task, dim_sum, bwd_ms, clamp): out[d].bwd_ms of
//    communication(task, dim_sum, {0, ..., 0}, out);
//  - forward_communication(task, dim_sum, start_ms, fwd_ms, clamp): out[d].fwd_ms
//    of communication(task, dim_sum, start_ms, out);
// bit for bit with clamp = true. clamp = false asks for the figures unclamped
// where the model clamps negative predictions at 0 (NeuroShard's simulator uses
// a learned model's raw predictions); a model that never clamps ignores it.
// The searchers' pricer (search/detail/plan_pricer.hpp) calls the halves where
// a model has them and communication() where not, so a model needs them only
// to be faster. Not required by cost_model.
template <class M>
concept split_communication = requires(const M& m, const task& t,
                                       std::span<const std::int64_t> dim_sum,
                                       std::span<const double> start_ms, std::span<double> ms,
                                       bool clamp) {
  { m.backward_communication(t, dim_sum, ms, clamp) } -> std::same_as<void>;
  { m.forward_communication(t, dim_sum, start_ms, ms, clamp) } -> std::same_as<void>;
};

// Optional too: a model whose forward all-to-all is, bit for bit, each
// device's start skew plus its backward figure,
//   communication(t, dim_sum, start_ms, out): out[d].fwd_ms ==
//     (max(start_ms) - start_ms[d]) + out[d].bwd_ms, and bwd_ms independent of start_ms,
// says so with a method
//   bool forward_is_skew_plus_backward(const task&) const noexcept;
// (the analytic model: a transfer time per device and the wait for the last
// device to start). A pricer then computes the forward half from the backward
// one instead of asking the model again (plan_pricer::forward).
template <class M>
bool forward_is_skew_plus_backward(const M& m, const task& t) noexcept {
  if constexpr (requires {
                  { m.forward_is_skew_plus_backward(t) } -> std::convertible_to<bool>;
                }) {
    return static_cast<bool>(m.forward_is_skew_plus_backward(t));
  } else {
    return false;
  }
}

// Optional too: a model whose communication() is, bit for bit, analytic_cost's
// all-to-all (cost/analytic.hpp: each device's backward figure
// analytic_cost::transfer_ms of its own column sum, its host's and the
// cluster's; the forward one that plus its start skew) says so with a method
//   bool all_to_all_is_analytic(const task&) const noexcept;
// (analytic_cost; neural_cost where its communication is the analytic one).
// A search may then price the devices a change touches alone, and bound a
// candidate's cost before pricing the whole plan (search/local_search.hpp).
template <class M>
bool all_to_all_is_analytic(const M& m, const task& t) noexcept {
  if constexpr (requires {
                  { m.all_to_all_is_analytic(t) } -> std::convertible_to<bool>;
                }) {
    return static_cast<bool>(m.all_to_all_is_analytic(t));
  } else {
    return false;
  }
}

// Optional too: a model whose compute() already holds a plan's collectives
// besides the all-to-all -- the data-parallel tables' gradient all-reduce and
// the table-row-wise reduce inside a host -- says so with a method
//   bool prices_collectives(const task&) const noexcept;
// (torchrec_cost: TorchRec's perf of a shard holds them). evaluate() then adds
// neither (cost/evaluate.hpp).
template <class M>
bool prices_collectives(const M& m, const task& t) noexcept {
  if constexpr (requires {
                  { m.prices_collectives(t) } -> std::convertible_to<bool>;
                }) {
    return static_cast<bool>(m.prices_collectives(t));
  } else {
    return false;
  }
}

// A further refinement: the halves of several plans in one call, where that
// is cheaper than one call each (a learned model's networks then read their
// weights once for several rows: cost/neural_comm.hpp).
//  - backward_communication_rows(task, dim_sums, bwd_ms, clamp): dim_sums
//    holds rows x devices, plan after plan; bwd_ms gets rows x devices, row r
//    backward_communication's figures for row r;
//  - forward_communication_rows(task, dim_sums, start_ms, fwd_ms, clamp): the
//    same with rows x devices start times, row r forward_communication's;
// bit for bit. A pricer of many plans (search/detail/plan_pricer.hpp,
// max_ms_rows) uses them; not required by cost_model.
template <class M>
concept batched_communication = split_communication<M> &&
    requires(const M& m, const task& t, std::span<const std::int64_t> dim_sums,
             std::span<const double> start_ms, std::span<double> ms, bool clamp) {
  { m.backward_communication_rows(t, dim_sums, ms, clamp) } -> std::same_as<void>;
  { m.forward_communication_rows(t, dim_sums, start_ms, ms, clamp) } -> std::same_as<void>;
};

// What a cost model's numbers are. The contract above is milliseconds; the
// papers' heuristic baselines (cost/heuristic.hpp) balance a score instead
// (bytes, columns, lookups) and say so with
//   static constexpr cost_unit unit = cost_unit::heuristic;
// A planner searches on any model but reports a plan in milliseconds only:
// it prices the plan with a model whose unit is ms (planner.hpp, Meter).
enum class cost_unit : unsigned char { ms, heuristic };

namespace concepts::detail {
template <class M>
constexpr cost_unit unit_of() noexcept {
  if constexpr (requires { M::unit; }) {
    return M::unit;
  } else {
    return cost_unit::ms;
  }
}
}  // namespace concepts::detail

// The unit of M's numbers: M::unit where M declares one, else milliseconds.
template <class M>
inline constexpr cost_unit cost_unit_of = concepts::detail::unit_of<M>();

inline constexpr std::string_view to_string(cost_unit u) noexcept {
  return u == cost_unit::ms ? "ms" : "heuristic units";
}

}  // namespace embplan::inline EMBPLAN_ABI
