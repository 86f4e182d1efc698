// Index traces at MetaSyn scale (data/trace.hpp, data/features.hpp,
// io/npy.hpp): the synthetic pool's table with the largest pooling factor
// (193, about 12.6M lookups at B = 65536) and a median one, generated,
// extracted back to a table_spec, and read from .npy.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "embplan/core/table_spec.hpp"
#include "embplan/data/features.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/trace.hpp"
#include "embplan/io/npy.hpp"

namespace {

// range 0: 0 = the largest pooling factor, 1 = the median one.
embplan::table_spec pool_table(std::int64_t which) {
  auto pool = embplan::data::synthetic_pool();
  std::sort(pool.begin(), pool.end(),
            [](const auto& a, const auto& b) { return a.pooling_factor > b.pooling_factor; });
  return which == 0 ? pool.front() : pool[pool.size() / 2];
}

void bm_generate_trace(benchmark::State& state) {
  const auto t = pool_table(state.range(0));
  const embplan::data::trace_options o{.batch_size = state.range(1), .seed = 1};
  std::size_t lookups = 0;
  for (auto _ : state) {
    auto tr = embplan::data::generate_trace(t, o);
    lookups = tr.indices.size();
    benchmark::DoNotOptimize(tr.indices.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(lookups));
  state.counters["lookups"] = static_cast<double>(lookups);
  state.counters["pooling_factor"] = t.pooling_factor;
}

void bm_extract_table_spec(benchmark::State& state) {
  const auto t = pool_table(state.range(0));
  const auto tr = embplan::data::generate_trace(t, {.batch_size = state.range(1), .seed = 1});
  for (auto _ : state) {
    auto spec = embplan::data::extract_table_spec(tr.indices, tr.offsets);
    benchmark::DoNotOptimize(spec);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(tr.indices.size()));
}

void bm_read_npy(benchmark::State& state) {
  const auto t = pool_table(0);
  const auto tr = embplan::data::generate_trace(t, {.batch_size = 65536, .seed = 1});
  const auto file = std::filesystem::temp_directory_path() / "embplan_bench_trace_indices.npy";
  embplan::io::write_npy(file, tr.indices);
  for (auto _ : state) {
    auto a = embplan::io::read_npy<std::int64_t>(file);
    benchmark::DoNotOptimize(a.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(tr.indices.size() * 8));
  std::filesystem::remove(file);
}

}  // namespace

BENCHMARK(bm_generate_trace)
    ->ArgsProduct({{0, 1}, {4096, 65536}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(bm_extract_table_spec)->Args({0, 65536})->Args({1, 65536})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_read_npy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
