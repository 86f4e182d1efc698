// TorchRec v0.3.2's planner ported (torchrec/planner.hpp, the `torchrec`
// preset's search) beside the look-alike it replaced as the baseline
// (torchrec_like_planner): the sizes TorchRec's users report as slow, 500
// tables on 8 devices and 5,384 on 1,024 (bench/common/bench_task.hpp: the
// synthetic pool, dims {4, ..., 128}, memory that never refuses).
//  - bm_torchrec/T/D: every sharding type, each table's tier's kernel (the
//    preset's default);
//  - bm_torchrec_all_kernels/T/D: TorchRec's default sharder, all three
//    kernels per sharding type (16 options per table);
//  - bm_torchrec_exhaustive/T/D: as bm_torchrec, but every distinct proposal
//    partitioned, as TorchRec does (planner_options::exhaustive; the same
//    plan);
//  - bm_torchrec_like/T/D: the look-alike (table- and column-wise).
// Goals (issue 52): 500 x 8 with every sharding type <= 0.3 s; 5,384 x 1,024
// <= 10 s and <= 1 GiB (peak_heap_MB: common/counting_heap.hpp, one call's
// peak of live heap bytes). Compare ratios from one run, interleaved:
//   bench_torchrec --benchmark_enable_random_interleaving=true --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>

#include "embplan/presets.hpp"
#include "embplan/torchrec/planner.hpp"

#include "common/bench_task.hpp"
#include "common/counting_heap.hpp"

namespace {

template <class Plan>
void run(benchmark::State& state, Plan plan) {
  const auto t = embplan_bench::bench_task(state.range(0), state.range(1));
  double peak_mb = 0.0;
  for (auto _ : state) {
    const std::int64_t base = embplan_bench::live_bytes.load();
    embplan_bench::peak_bytes.store(base);
    const bool ok = plan(t);
    peak_mb = std::max(peak_mb, static_cast<double>(embplan_bench::peak_bytes.load() - base) / 1e6);
    if (!ok) state.SkipWithError("no plan");
  }
  state.counters["peak_heap_MB"] = peak_mb;
}

void bm_torchrec(benchmark::State& state) {
  run(state, [](const embplan::task& t) { return embplan::torchrec::plan(t).ok; });
}

void bm_torchrec_all_kernels(benchmark::State& state) {
  embplan::torchrec::planner_options o;
  o.all_kernels = true;
  run(state, [&](const embplan::task& t) { return embplan::torchrec::plan(t, o).ok; });
}

void bm_torchrec_exhaustive(benchmark::State& state) {
  embplan::torchrec::planner_options o;
  o.exhaustive = true;
  run(state, [&](const embplan::task& t) { return embplan::torchrec::plan(t, o).ok; });
}

void bm_torchrec_like(benchmark::State& state) {
  const embplan::torchrec_like_planner p({}, {}, {}, {});
  run(state, [&](const embplan::task& t) { return p(t, 0).ok; });
}

}  // namespace

// bm_torchrec_exhaustive is not registered at 5,384 x 1,024: it partitions
// all ~54,000 distinct proposals there (minutes).
BENCHMARK(bm_torchrec)->Args({500, 8})->Args({5384, 1024})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_torchrec_all_kernels)
    ->Args({500, 8})
    ->Args({5384, 1024})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_torchrec_exhaustive)->Args({500, 8})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_torchrec_like)->Args({500, 8})->Args({5384, 1024})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
