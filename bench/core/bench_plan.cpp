// embplan::validate (core/plan.hpp) of one table split into 20k / 40k / 80k
// one-row shards on 8 devices: the overlap check per table dominates.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"

namespace {

void bm_validate_row_shards(benchmark::State& state) {
  const auto rows = state.range(0);
  embplan::task t;
  t.name = "bench";
  embplan::table_spec spec;
  spec.name = "t0";
  spec.rows = rows;
  spec.dim = 16;
  spec.pooling_factor = 2.0;
  t.tables.push_back(spec);
  embplan::device_spec dev;
  dev.memory_bytes = std::uint64_t{1} << 50;
  t.cluster = embplan::uniform_topology(8, dev);
  embplan::plan p;
  p.shards.reserve(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    p.shards.push_back({.table = 0,
                        .device = static_cast<std::uint32_t>(r % 8),
                        .col_begin = 0,
                        .col_end = 16,
                        .row_begin = r,
                        .row_end = r + 1});
  }
  for (auto _ : state) {
    embplan::validate(t, p);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows);
}

}  // namespace

BENCHMARK(bm_validate_row_shards)
    ->Arg(20000)
    ->Arg(40000)
    ->Arg(80000)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
