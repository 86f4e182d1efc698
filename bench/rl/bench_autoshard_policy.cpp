// AutoShard's policy at inference (rl/autoshard.hpp; goal: 800 tables on 80
// devices under 50 ms; the paper, §5: hundreds of tables sharded in seconds
// on one CPU core), on AutoShard-protocol tasks (data/tasks.hpp: T = 10 D
// tables from the synthetic MetaSyn pool, dims {4, ..., 32}, fp16) whose
// devices are large enough (1 TiB) that memory never masks a device, so every
// step scores all D devices:
// - one greedy placement, what rl::policy_searcher<rl::autoshard_policy> does
//   with samples = 0: prepare (features, table latents, single-table costs),
//   order, then T steps of logits over the legal devices and the argmax;
// - prepare + order alone (the per-task part of the above);
// - the same greedy placement through embplan::planner (memory_capacity, the
//   plan then checked and priced by analytic_cost).
// The policy is PyTorch's default init from a seed: inference does the same
// work whatever the weights. Time per placement, and tables placed per second.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/rl/policy_searcher.hpp"

namespace {

namespace rl = embplan::rl;

embplan::task autoshard_task(std::int64_t tables, std::int64_t devices) {
  static const auto pool = embplan::data::synthetic_pool({.seed = 0});
  auto tasks = embplan::data::generate_tasks(pool, {.proto = embplan::data::protocol::autoshard,
                                                    .devices = static_cast<std::size_t>(devices),
                                                    .count = 1,
                                                    .min_tables = static_cast<std::size_t>(tables),
                                                    .max_tables = static_cast<std::size_t>(tables),
                                                    .device_memory_bytes = std::uint64_t{1} << 40});
  return std::move(tasks.front());
}

rl::autoshard_policy untrained_policy(const embplan::task& t) {
  const std::vector<embplan::task> pool{t};
  return rl::autoshard_policy::untrained(1, rl::autoshard_feature_stats::of(pool));
}

void count_tables(benchmark::State& state, const embplan::task& t) {
  state.counters["tables_per_s"] = benchmark::Counter(
      static_cast<double>(t.tables.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void bm_greedy_placement(benchmark::State& state) {
  const auto t = autoshard_task(state.range(0), state.range(1));
  const auto policy = untrained_policy(t);
  const embplan::memory_capacity rule;
  std::vector<double> logits;
  for (auto _ : state) {
    rl::autoshard_context ctx;
    policy.prepare(t, ctx);
    std::vector<std::uint32_t> order;
    policy.order(ctx, order);
    rl::placement_mdp mdp(t, rl::no_cost_source{}, rule, std::move(order));
    if (!rl::detail::mdp_run_episode(policy, ctx, mdp, logits, nullptr))
      state.SkipWithError("no plan");
    benchmark::DoNotOptimize(mdp.device_of().data());
  }
  count_tables(state, t);
}

void bm_prepare_order(benchmark::State& state) {
  const auto t = autoshard_task(state.range(0), state.range(1));
  const auto policy = untrained_policy(t);
  std::vector<std::uint32_t> order;
  for (auto _ : state) {
    rl::autoshard_context ctx;
    policy.prepare(t, ctx);
    policy.order(ctx, order);
    benchmark::DoNotOptimize(order.data());
  }
  count_tables(state, t);
}

void bm_planner_greedy(benchmark::State& state) {
  const auto t = autoshard_task(state.range(0), state.range(1));
  const embplan::planner<embplan::analytic_cost, rl::policy_searcher<rl::autoshard_policy>,
                         embplan::memory_capacity, embplan::neg_max_cost_reward>
      planner({}, {.policy = untrained_policy(t), .options = {.samples = 0}}, {}, {});
  for (auto _ : state) {
    auto r = planner(t, 0);
    if (!r.ok) state.SkipWithError("no plan");
    benchmark::DoNotOptimize(r.cost_ms);
  }
  count_tables(state, t);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (const std::int64_t devices : {8, 16, 40, 80})
    b->Args({10 * devices, devices});
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(bm_greedy_placement)->Apply(sizes);
BENCHMARK(bm_prepare_order)->Apply(sizes);
BENCHMARK(bm_planner_greedy)->Apply(sizes);

BENCHMARK_MAIN();
