// docs/extending.md, "Writing your own CostModel": a bandwidth model in
// milliseconds and a heuristic score, each planned with, and the planner's
// Meter: which model prices plan_result::cost_ms. Exits non-zero when a
// check fails.

#include <embplan/core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

// [extending.md: bytes_cost]
// Milliseconds: a device reads every looked-up row once per batch at its
// memory bandwidth, in one fused launch; backward costs `backward_factor`
// times forward; the all-to-all sends each device's pooled columns to the
// others over the intra-host link.
struct bytes_cost {
  double launch_ms = 0.01;
  double backward_factor = 2.0;

  std::string_view name() const noexcept { return "bytes"; }

  // Forward time of one piece on device d, launch excluded. piece_table gives
  // a column or row piece as the table it runs as (its columns, its share of
  // the rows and lookups).
  double read_ms(const embplan::task& t, const embplan::shard& s, std::size_t d) const {
    const embplan::table_spec piece = embplan::piece_table(t, s);
    const double bytes = static_cast<double>(t.batch_size) * piece.pooling_factor * piece.dim *
                         static_cast<double>(embplan::dtype_bytes(piece.weight_dtype));
    return bytes / (t.cluster.devices[d].memory_bandwidth_gbps * 1e6);  // 1 GB/s = 1e6 B/ms
  }

  // One piece alone, on the device it names.
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return launch_ms + read_ms(t, s, s.device);
  }

  // The pieces of one device run as one kernel: one launch, not one each.
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> group,
                                std::size_t device) const {
    if (group.empty()) return {};
    double fwd_ms = launch_ms;
    for (const embplan::shard& s : group)
      fwd_ms += read_ms(t, s, device);
    return {.fwd_ms = fwd_ms, .bwd_ms = backward_factor * fwd_ms};
  }

  // out[d] for every device d: dim_sum[d] columns pooled for the batch go to
  // each other device; the forward all-to-all also waits for the last device
  // to start (start_ms), the backward one does not.
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    const double devices = static_cast<double>(dim_sum.size());
    const double latest = start_ms.empty() ? 0.0 : *std::ranges::max_element(start_ms);
    for (std::size_t d = 0; d < dim_sum.size(); ++d) {
      const double bytes = static_cast<double>(t.batch_size) / devices *
                           static_cast<double>(dim_sum[d]) * 4.0 * (devices - 1.0);
      const double ms = bytes / (t.cluster.intra_host_bandwidth_gbps * 1e6);
      out[d] = {.fwd_ms = ms + (latest - start_ms[d]), .bwd_ms = ms};
    }
  }
};
static_assert(embplan::cost_model<bytes_cost>);
// [end]

// [extending.md: touched_bytes_cost]
// A score, not milliseconds: bytes a sample touches (pooling x columns x
// dtype bytes). It says so, so that a planner searching on it prices its plans
// with a model in ms.
struct touched_bytes_cost {
  static constexpr embplan::cost_unit unit = embplan::cost_unit::heuristic;

  std::string_view name() const noexcept { return "touched_bytes"; }

  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    const embplan::table_spec piece = embplan::piece_table(t, s);
    return piece.pooling_factor * piece.dim *
           static_cast<double>(embplan::dtype_bytes(piece.weight_dtype));
  }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> group,
                                std::size_t) const {
    double sum = 0.0;
    for (const embplan::shard& s : group)
      sum += shard_cost(t, s);
    return {.fwd_ms = sum, .bwd_ms = 0.0};
  }
  void communication(const embplan::task&, std::span<const std::int64_t>, std::span<const double>,
                     std::span<embplan::comm_cost> out) const {
    std::ranges::fill(out, embplan::comm_cost{});
  }
};
static_assert(embplan::cost_model<touched_bytes_cost>);
static_assert(embplan::cost_unit_of<touched_bytes_cost> == embplan::cost_unit::heuristic);
// [end]

namespace {

// 16 tables on 4 devices.
embplan::task small_task() {
  embplan::task t;
  t.name = "own_cost_model";
  t.cluster = embplan::uniform_topology(4);
  for (int i = 0; i < 16; ++i) {
    embplan::table_spec spec;
    spec.name = "t" + std::to_string(i);
    spec.rows = 50'000 * (1 + i % 5);
    spec.dim = 8 << (i % 4);
    spec.pooling_factor = 1.0 + (i * 5) % 13;
    spec.reuse_hist[0] = 1.0;
    t.tables.push_back(spec);
  }
  return t;
}

bool check(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "failed: %s\n", what);
  return ok;
}

}  // namespace

int main() {
  const embplan::task t = small_task();
  using rule = embplan::default_constraint;
  using reward = embplan::neg_max_cost_reward;

  // [extending.md: meters]
  // Searching on a model in ms: the plan is priced by that model.
  const auto in_ms = embplan::planner<bytes_cost, embplan::column_beam, rule, reward>{}(t);
  // Searching on a score: the plan is priced by the analytic model ...
  const auto scored =
      embplan::planner<touched_bytes_cost, embplan::sorted_greedy, rule, reward>{}(t);
  // ... or by the Meter given as the fifth parameter.
  const auto metered =
      embplan::planner<touched_bytes_cost, embplan::sorted_greedy, rule, reward, bytes_cost>{}(t);
  // [end]

  bool ok = check(in_ms.ok && scored.ok && metered.ok, "every planner finds a plan");
  if (!ok) return 1;
  ok &= check(in_ms.meter == "bytes" && in_ms.search_model == "bytes", "bytes_cost prices itself");
  ok &= check(in_ms.search_unit == embplan::cost_unit::ms, "bytes_cost is in ms");
  ok &=
      check(in_ms.cost_ms.max_ms() == embplan::evaluate(t, in_ms.placement, bytes_cost{}).max_ms(),
            "cost_ms is evaluate() under the meter");
  ok &= check(scored.meter == "analytic" && scored.search_model == "touched_bytes",
              "a score is priced by the analytic model");
  ok &= check(scored.search_unit == embplan::cost_unit::heuristic, "search_unit says heuristic");
  ok &= check(scored.cost_ms.max_ms() ==
                  embplan::evaluate(t, scored.placement, embplan::analytic_cost{}).max_ms(),
              "cost_ms is the analytic price");
  ok &= check(metered.meter == "bytes" && metered.placement == scored.placement,
              "the Meter prices, it does not search");
  if (!ok) return 1;
  std::printf("column_beam on bytes: %.3f ms (%s)\n", in_ms.cost_ms.max_ms(), in_ms.meter.c_str());
  std::printf("sorted_greedy on touched_bytes: %.0f %s, %.3f ms (%s), %.3f ms (%s)\n",
              scored.search_cost.max_ms(), std::string(to_string(scored.search_unit)).c_str(),
              scored.cost_ms.max_ms(), scored.meter.c_str(), metered.cost_ms.max_ms(),
              metered.meter.c_str());
  return 0;
}
