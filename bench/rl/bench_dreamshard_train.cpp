// DreamShard at the planner level, next to bench_dreamshard_policy
// (the network alone):
// - greedy inference through embplan::planner with
//   rl::policy_searcher<rl::dreamshard_policy> (Algorithm 2: order the tables
//   by the cost branch, place each on the argmax device; then the plan is
//   checked against memory and priced by analytic_cost), on 20 tables / 4
//   devices, 100 / 8 (goal: under 5 ms) and 200 / 8. The policy is
//   PyTorch's default init from a seed: inference does the same work whatever
//   the weights;
// - one training iteration of Algorithm 1 (rl::dreamshard_train) with the
//   paper's defaults (App. B.4.2: N_collect 10, N_cost 300, N_batch 64,
//   N_RL 10, N_episode 10), from a fresh state, on the analytic meter
//   (cost_model_meter<analytic_cost>), 20 / 4 and 100 / 8;
// - measuring one placement with the CPU meter (cost_model_meter over
//   meter::cpu_meter_cost: every device's shard run as a fused embedding bag,
//   AutoShard's protocol), what a training iteration pays N_collect times when
//   it measures on this CPU.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <vector>

#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/dreamshard_train.hpp"
#include "embplan/rl/policy_searcher.hpp"

#include "common/bench_task.hpp"

namespace {

namespace rl = embplan::rl;

using dreamshard_planner =
    embplan::planner<embplan::analytic_cost, rl::policy_searcher<rl::dreamshard_policy>,
                     embplan::memory_capacity, embplan::neg_max_cost_reward>;

void bm_planner_greedy(benchmark::State& state) {
  const auto t = embplan_bench::bench_task(state.range(0), state.range(1));
  const dreamshard_planner planner({}, {rl::dreamshard_policy::untrained(1), {.samples = 0}}, {},
                                   {});
  for (auto _ : state) {
    auto r = planner(t, 0);
    if (!r.ok) state.SkipWithError("no plan");
    benchmark::DoNotOptimize(r.cost_ms);
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_train_iteration(benchmark::State& state) {
  const std::vector<embplan::task> tasks = {
      embplan_bench::bench_task(state.range(0), state.range(1))};
  const embplan::analytic_cost model;
  const rl::cost_model_meter<embplan::analytic_cost> meter{&model};
  const rl::dreamshard_train_options o{.seed = 7};  // paper defaults
  for (auto _ : state) {
    state.PauseTiming();
    auto st = rl::dreamshard_train_start(o);
    state.ResumeTiming();
    rl::dreamshard_train(std::span<const embplan::task>(tasks), meter, o, st,
                         embplan::memory_capacity{}, {}, 1);
    benchmark::DoNotOptimize(st.learning_curve.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_cpu_meter_plan(benchmark::State& state) {
  const auto t = embplan_bench::bench_task(state.range(0), state.range(1));
  std::vector<std::size_t> assignment(t.tables.size());
  for (std::size_t i = 0; i < assignment.size(); ++i)
    assignment[i] = i % t.cluster.size();
  const auto p = embplan::table_wise_plan(t, assignment);
  const embplan::meter::cpu_meter_cost model;
  const rl::cost_model_meter<embplan::meter::cpu_meter_cost> meter{&model};
  double ms = 0.0;
  for (auto _ : state) {
    const auto m = meter(t, p);
    ms = m.overall_ms;
    benchmark::DoNotOptimize(ms);
  }
  state.counters["plan_ms"] = ms;  // the measured plan's cost (task batch)
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(bm_planner_greedy)
    ->Args({20, 4})
    ->Args({100, 8})
    ->Args({200, 8})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_train_iteration)->Args({20, 4})->Args({100, 8})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_cpu_meter_plan)->Args({20, 4})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
