// AutoShard Fig. 9: random search's degree of balance against its number of
// samples (1 ... 1,000), with its wall time.
//
// Tasks: the AutoShard protocol (data/tasks.hpp: 80 tables of the synthetic
// MetaSyn pool on 8 devices of 4 GiB, dims {4, ..., 32}, fp16), the first
// `task_count` tasks of seed 0.
//
// Planner: planner<analytic_cost, random_search{.budget = b}, default_constraint,
// balance_reward>. AutoShard's random search keeps the sample that its
// objective scores best, and that objective is the degree of balance (min /
// max device kernel time; §5.1 "Metrics", the final reward of its MDP, §4.3),
// so the samples are scored by balance_reward. random_search_planner
// (presets.hpp) scores them by neg_max_cost_reward instead, which ranks by the
// slowest device's compute + communication: under evaluate()'s forward
// all-to-all every device waits for the last one, so that picks a low maximum
// and leaves the minimum free, not a balanced plan.
//
// Timed: one search (planner call: search, constraint replay, pricing), on the
// tasks in turn, task i with seed i; time per search in ms. Counters, of the
// plans these searches choose (seeded, so the same in every iteration), means
// over the tasks:
//   balance_analytic  degree of balance under the analytic model (what the
//                     search maximised);
//   balance_measured  the same plans' degree of balance measured on this CPU
//                     (cpu_meter_cost, default options: the CPU meter, each
//                     device's shard timed as one fused TBE),
//                     measured once per budget outside the timed region;
//                     wall-clock timed, so other load on the machine shows in it.
//   evaluations       cost-model calls per search (budget x (devices + 2)).
//
// Run (Release build):
//   bench_random_search_curve --benchmark_repetitions=1
// The measured counter times 7 budgets x 5 tasks x 8 shards, a minute or two
// (docs/design/benchmarks.md); --benchmark_filter='bm_random_search/1000$'
// runs one budget.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/search/random_search.hpp"

namespace {

using balance_random_search_planner =
    embplan::planner<embplan::analytic_cost, embplan::random_search, embplan::default_constraint,
                     embplan::balance_reward>;

constexpr std::size_t task_count = 5;

const std::vector<embplan::task>& curve_tasks() {
  static const auto tasks = [] {
    const auto pool = embplan::data::synthetic_pool({.seed = 0});
    return embplan::data::generate_tasks(
        pool, {.proto = embplan::data::protocol::autoshard, .devices = 8, .count = task_count});
  }();
  return tasks;
}

// Mean measured degree of balance of `plans` (plans[i] for task i), once per
// budget: Google Benchmark calls a benchmark more than once while it sizes
// the iteration count.
double measured_balance(std::uint32_t budget, const std::vector<embplan::plan>& plans) {
  static std::map<std::uint32_t, double> done;
  static const embplan::meter::cpu_meter_cost meter{};
  if (const auto it = done.find(budget); it != done.end()) return it->second;
  double sum = 0.0;
  for (std::size_t i = 0; i < plans.size(); ++i)
    sum += embplan::evaluate(curve_tasks()[i], plans[i], meter).balance();
  return done[budget] = sum / static_cast<double>(plans.size());
}

void bm_random_search(benchmark::State& state) {
  const auto budget = static_cast<std::uint32_t>(state.range(0));
  const auto& tasks = curve_tasks();
  const balance_random_search_planner planner({}, {.budget = budget}, {}, {});

  std::vector<embplan::plan> chosen;
  double analytic = 0.0;
  double evaluations = 0.0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    auto r = planner(tasks[i], i);
    if (!r.ok) {
      state.SkipWithError(r.failure.c_str());
      return;
    }
    analytic += r.search_cost.balance();
    evaluations += static_cast<double>(r.evaluations);
    chosen.push_back(std::move(r.placement));
  }
  const double measured = measured_balance(budget, chosen);

  std::size_t next = 0;
  for (auto _ : state) {
    auto r = planner(tasks[next], next);
    benchmark::DoNotOptimize(r);
    next = (next + 1) % tasks.size();
  }
  const auto n = static_cast<double>(tasks.size());
  state.counters["balance_analytic"] = analytic / n;
  state.counters["balance_measured"] = measured;
  state.counters["evaluations"] = evaluations / n;
}

}  // namespace

BENCHMARK(bm_random_search)
    ->Arg(1)
    ->Arg(3)
    ->Arg(10)
    ->Arg(30)
    ->Arg(100)
    ->Arg(300)
    ->Arg(1000)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
