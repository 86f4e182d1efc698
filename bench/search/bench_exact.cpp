// exact_table_wise (search/exact.hpp): the optimum table-wise plan of a
// NeuroShard-protocol-like task of 8 to 12 tables on 4 and 8 identical
// devices, under the analytic model and the bundled learned compute model.
// Counter: model calls (device computes priced + all-to-alls).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <utility>

#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/exact.hpp"

#include "common/bench_task.hpp"
#include "common/bundled_model.hpp"

namespace {

template <class Model>
void run(benchmark::State& state, const Model& model) {
  const auto t = embplan_bench::bench_task(state.range(0), state.range(1));
  const embplan::exact_table_wise exact;
  for (auto _ : state) {
    auto r =
        exact.search(t, model, embplan::default_constraint{}, embplan::neg_max_cost_reward{}, 0);
    if (!r.ok) state.SkipWithError(r.failure.c_str());
    state.counters["evaluations"] = static_cast<double>(r.evaluations);
    benchmark::DoNotOptimize(r);
  }
}

void bm_exact_analytic(benchmark::State& state) {
  run(state, embplan::analytic_cost{});
}
void bm_exact_learned(benchmark::State& state) {
  run(state, embplan_bench::bundled_compute_model());
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tables", "devices"});
  for (const auto& [tables, devices] : {std::pair{8, 4}, {10, 4}, {12, 4}, {10, 8}})
    b->Args({tables, devices});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(bm_exact_analytic)->Apply(sizes);
BENCHMARK(bm_exact_learned)->Apply(sizes);
BENCHMARK_MAIN();
