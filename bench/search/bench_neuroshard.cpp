// NeuroShard's online search (search/column_beam.hpp: beam search + greedy
// grid search + cost cache, N=10, K=3, L=10, M=11) on NeuroShard-protocol
// tasks (Table 5: 4 devices / 10-60 tables and 8 devices / 20-120 tables, max
// dim 128, 4 GB per device), under the analytic cost model and under the
// bundled learned model (data/cost/cpu_compute_model.safetensors, neural_cost:
// NeuroShard's compute net + analytic communication); the local search on top
// of it (search/local_search.hpp) and the TorchRec-like baseline for
// comparison; and the learned-model search on two threads (column_beam_2).
// Goals: median <= 10 ms per task; 1,000 tables on 128 devices
// (bench/common/bench_task.hpp) <= 1 s.
// The per-task figures are counters: median_ms and p90_ms over the tasks,
// timed one by one (wall clock) inside one benchmark iteration.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/torchrec_like.hpp"

#include "common/bench_task.hpp"
#include "common/bundled_model.hpp"

namespace {

const std::vector<embplan::task>& protocol_tasks(std::size_t devices) {
  static const auto pool = embplan::data::synthetic_pool({.seed = 0});
  static const auto four =
      embplan::data::generate_tasks(pool, {.devices = 4, .max_dim = 128, .count = 50, .seed = 0});
  static const auto eight =
      embplan::data::generate_tasks(pool, {.devices = 8, .max_dim = 128, .count = 50, .seed = 0});
  return devices == 4 ? four : eight;
}

// The cost models benchmarked: the analytic one, and the bundled learned one.
struct analytic_model {
  static const embplan::analytic_cost& get() {
    static const embplan::analytic_cost m;
    return m;
  }
};
struct learned_model {
  static const embplan::neural_cost& get() { return embplan_bench::bundled_compute_model(); }
};

// The same search on two threads (column_beam::threads; the plan is the same).
struct column_beam_2 : embplan::column_beam {
  column_beam_2() : embplan::column_beam{.threads = 2} {}
};

template <class Searcher, class Model = analytic_model>
void bm_protocol(benchmark::State& state) {
  const auto& tasks = protocol_tasks(static_cast<std::size_t>(state.range(0)));
  const auto& model = Model::get();
  const embplan::default_constraint rule;
  const Searcher searcher{};
  std::vector<double> ms;
  double hits = 0.0;
  double lookups = 0.0;
  for (auto _ : state) {
    ms.clear();
    for (const auto& t : tasks) {
      const auto start = std::chrono::steady_clock::now();
      auto r = searcher.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
      const auto stop = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
      hits += static_cast<double>(r.cache_hits);
      lookups += static_cast<double>(r.cache_lookups);
      benchmark::DoNotOptimize(r);
    }
  }
  std::sort(ms.begin(), ms.end());
  state.counters["tasks"] = static_cast<double>(tasks.size());
  state.counters["median_ms"] = ms[ms.size() / 2];
  state.counters["p90_ms"] = ms[ms.size() * 9 / 10];
  state.counters["max_ms"] = ms.back();
  if (lookups > 0) state.counters["cache_hit"] = hits / lookups;
}

template <class Searcher, class Model = analytic_model>
void bm_large(benchmark::State& state) {
  const auto t = embplan_bench::bench_task(state.range(0), state.range(1));
  const auto& model = Model::get();
  const embplan::default_constraint rule;
  for (auto _ : state) {
    auto r = Searcher{}.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
    if (!r.ok) state.SkipWithError(r.failure.c_str());
    state.counters["cache_hit"] = static_cast<double>(r.cache_hits) /
                                  static_cast<double>(std::max<std::uint64_t>(1, r.cache_lookups));
    benchmark::DoNotOptimize(r);
  }
  state.counters["tables"] = static_cast<double>(state.range(0));
  state.counters["devices"] = static_cast<double>(state.range(1));
}

}  // namespace

BENCHMARK(bm_protocol<embplan::column_beam>)
    ->Arg(4)
    ->Arg(8)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_protocol<embplan::local_search<>>)
    ->Arg(4)
    ->Arg(8)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_protocol<embplan::torchrec_like>)
    ->Arg(4)
    ->Arg(8)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_protocol<embplan::column_beam, learned_model>)
    ->Arg(4)
    ->Arg(8)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_protocol<column_beam_2, learned_model>)
    ->Arg(4)
    ->Arg(8)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_large<embplan::column_beam>)
    ->Args({1000, 128})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_large<embplan::column_beam, learned_model>)
    ->Args({1000, 128})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_large<column_beam_2, learned_model>)
    ->Args({1000, 128})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_large<embplan::local_search<>>)
    ->Args({1000, 128})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
