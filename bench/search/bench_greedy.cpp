// Sorted greedy (search/sorted_greedy.hpp) on MetaSyn-like tables: 100 / 1,000 /
// 10,000 tables over 8 / 128 / 1,024 devices, with the lookup heuristic and
// with the analytic model. Goal: 10,000 tables on 1,024 devices in < 50 ms.
// Tables: bench/common/bench_task.hpp (the synthetic pool, memory never refuses).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/search/sorted_greedy.hpp"

#include "common/bench_task.hpp"

namespace {

template <class CostModel>
void bm_sorted_greedy(benchmark::State& state) {
  const auto t = embplan_bench::bench_task(state.range(0), state.range(1));
  const CostModel model{};
  const embplan::default_constraint rule;
  for (auto _ : state) {
    auto r = embplan::sorted_greedy{}.search(t, model, rule, embplan::balance_reward{}, 0);
    if (!r.ok) state.SkipWithError(r.failure.c_str());
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["tables"] = static_cast<double>(state.range(0));
  state.counters["devices"] = static_cast<double>(state.range(1));
}

void sizes(benchmark::internal::Benchmark* b) {
  for (const std::int64_t tables : {100, 1000, 10000})
    for (const std::int64_t devices : {8, 128, 1024})
      b->Args({tables, devices});
  b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(bm_sorted_greedy<embplan::lookup_cost>)->Apply(sizes);
BENCHMARK(bm_sorted_greedy<embplan::analytic_cost>)->Apply(sizes);

BENCHMARK_MAIN();
