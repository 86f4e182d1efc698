// Row-wise sharding (rowwise/): the routed gather of 1M Zipf requests over 64
// hash shards (route + per-shard reads + reassembly in request order, with and
// without the 1,000 hottest IDs replicated on every shard), and the load
// analysis of a 10M-index trace (lookups per shard, skew, hottest IDs).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/rowwise/gather.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/rowwise/replication.hpp"
#include "embplan/rowwise/zipf.hpp"

namespace {

namespace rw = embplan::rowwise;

constexpr std::int64_t gather_rows = 1 << 20;
constexpr std::int32_t gather_dim = 16;
constexpr std::uint64_t shards = 64;

std::vector<float> table_values() {
  embplan::rng g(1);
  std::vector<float> t(static_cast<std::size_t>(gather_rows) * gather_dim);
  for (auto& v : t)
    v = static_cast<float>(g.uniform());
  return t;
}

void bm_routed_gather(benchmark::State& state) {
  const auto requests = static_cast<std::size_t>(state.range(0));
  const auto hot_k = static_cast<std::size_t>(state.range(1));
  const rw::hash_partition part(gather_rows, shards);
  rw::sharded_table<rw::hash_partition> table(part, table_values(), gather_dim);
  const auto ids = rw::zipf_ids(gather_rows, 1.05, requests, 2);
  const auto freq = rw::id_frequency(ids, gather_rows);
  const rw::hot_replicas<rw::hash_partition> rep(part, rw::hottest_ids(freq, hot_k), {.seed = 3});
  table.replicate(rep);
  std::vector<float> out(requests * gather_dim);
  rw::gather_workspace ws;
  for (auto _ : state) {
    auto load = hot_k ? table.gather(ids, out, rep, ws) : table.gather(ids, out, ws);
    benchmark::DoNotOptimize(load);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(requests));
  state.SetBytesProcessed(state.iterations() *
                          static_cast<std::int64_t>(requests * gather_dim * sizeof(float)));
  state.counters["shards"] = static_cast<double>(shards);
  state.counters["hot_k"] = static_cast<double>(hot_k);
}

void bm_skew_analysis(benchmark::State& state) {
  const auto requests = static_cast<std::size_t>(state.range(0));
  const std::int64_t rows = state.range(1);
  const rw::hash_partition part(rows, shards);
  const auto ids = rw::zipf_ids(rows, 1.05, requests, 4);
  for (auto _ : state) {
    auto r = rw::analyze_load(part, ids, 3);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(requests));
  state.counters["rows"] = static_cast<double>(rows);
}

void bm_lookups_per_shard(benchmark::State& state) {
  const auto requests = static_cast<std::size_t>(state.range(0));
  const rw::hash_partition part(100'000'000, shards);
  const auto ids = rw::zipf_ids(100'000'000, 1.05, requests, 5);
  for (auto _ : state) {
    auto l = rw::lookups_per_shard(part, ids);
    benchmark::DoNotOptimize(l);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(requests));
}

}  // namespace

BENCHMARK(bm_routed_gather)
    ->Args({1'000'000, 0})
    ->Args({1'000'000, 1'000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_skew_analysis)
    ->Args({10'000'000, 1'000'000})
    ->Args({10'000'000, 100'000'000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_lookups_per_shard)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
