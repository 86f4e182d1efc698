// Scaling of the TorchRec-like planner (torchrec_like_planner, search/torchrec_like.hpp)
// and of NeuroShard's search with local search (neuroshard_ls_planner:
// column_beam + grid engine + local_search), on the analytic model and on the
// bundled learned compute model (data/cost/cpu_compute_model.safetensors,
// neural_cost: NeuroShard's compute net + analytic communication), from 1,000
// tables on 128 devices to 10,000 tables on 1,024 devices, and the two sizes
// TorchRec's planner users report as slow: 500 tables on 8 devices, 5,384 on
// 1,024;
// and both planners with data-parallel copies and row splits (staged), and
// with those and memory tiers on a task HBM cannot hold (all_options; the
// same on NVLink-class hosts, all_options_nvlink, and with split tables
// spread over hosts there, all_options_nvlink_spread), and neuroshard_ls
// staged under user rules (user_rules); the portfolio of the two with every
// option (portfolio_all_options, _nvlink).
// Tables: bench/common/bench_task.hpp (the synthetic pool, dims {4, ..., 128},
// memory never refuses). Goal at 10,000 x 1,024: <= 5 s and <= 200 MB per plan.
//
// Memory, two counters:
//  - peak_heap_MB: the peak of live heap bytes during one planning call above
//    what was live when it began. Every allocation of this program goes
//    through the counting operator new / delete of common/counting_heap.hpp (malloc_usable_size
//    bytes, so what the allocator really hands out); the peak is reset before
//    each call, so the figure is one call's, whatever ran before it in the
//    process.
//  - max_rss_MB: the process's resident high-water mark (getrusage). It cannot
//    be reset, so it is one call's figure (plus the task and the program) only
//    when the benchmark runs alone in its process:
//      bench_scale --benchmark_filter='bm_torchrec_like/10000/1024$'
#include <benchmark/benchmark.h>

#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>

#include "embplan/constraint/table_rules.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/presets.hpp"
#include "embplan/stage/tiers.hpp"

#include "common/bench_task.hpp"
#include "common/bundled_model.hpp"
#include "common/counting_heap.hpp"

namespace {

double max_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

struct no_prepare {};

// `prepare(task&)` (unless no_prepare) runs inside the timed call, before
// planning, on a copy of the task (choose_tiers for the tiered rows; the
// copy is timed and counted with it).
template <class Planner, class Prepare>
void run(benchmark::State& state, const Planner& p, const embplan::task& t, Prepare prepare) {
  double peak_mb = 0.0;
  for (auto _ : state) {
    const std::int64_t base = embplan_bench::live_bytes.load();
    embplan_bench::peak_bytes.store(base);
    auto r = [&] {
      if constexpr (std::is_same_v<Prepare, no_prepare>) {
        return p(t, 0);
      } else {
        embplan::task planned = t;
        prepare(planned);
        return p(planned, 0);
      }
    }();
    peak_mb = std::max(peak_mb, static_cast<double>(embplan_bench::peak_bytes.load() - base) / 1e6);
    if (!r.ok) state.SkipWithError(r.failure.c_str());
    state.counters["cost_ms"] = r.cost_ms.max_ms();
    state.counters["shards"] = static_cast<double>(r.placement.shards.size());
    benchmark::DoNotOptimize(r);
  }
  state.counters["peak_heap_MB"] = peak_mb;
  state.counters["max_rss_MB"] = max_rss_mb();
}

template <class Planner>
void run(benchmark::State& state, const Planner& p) {
  run(state, p, embplan_bench::bench_task(state.range(0), state.range(1)), no_prepare{});
}

void bm_torchrec_like(benchmark::State& state) {
  run(state, embplan::torchrec_like_planner{});
}

void bm_neuroshard_ls(benchmark::State& state) {
  run(state, embplan::neuroshard_ls_planner{});
}

void bm_neuroshard_ls_learned(benchmark::State& state) {
  const auto& model = embplan_bench::bundled_compute_model();
  run(state, embplan::basic_neuroshard_ls_planner<embplan::neural_cost>(model, {}, {}, {}));
}

// The same planner with column_beam pricing each step's split states on two
// threads (column_beam::threads; the same plan for any count).
void bm_neuroshard_ls_learned_2threads(benchmark::State& state) {
  const auto& model = embplan_bench::bundled_compute_model();
  embplan::local_search<embplan::column_beam> searcher;
  searcher.start.threads = 2;
  run(state, embplan::basic_neuroshard_ls_planner<embplan::neural_cost>(model, searcher, {}, {}));
}

// The same planners behind the stage that replicates small tables as
// data-parallel copies and splits a table that fits no device by rows
// (stage/staged.hpp): what `plan --data-parallel auto --planner rowwise_<p>` runs.
// `rule` in place of the planner's own (user rules) where given.
// `layout`: where a split table's pieces go across hosts (by cost unless given).
// `rows_by_cost`: tables that fit also cut by rows where cheaper.
template <class Planner, class Rule>
embplan::rowwise_planner_of<Planner> staged(
    const Planner& p, const Rule& rule,
    embplan::stage::row_layout layout = embplan::stage::row_layout::by_cost,
    bool rows_by_cost = false) {
  return {p.cost(),
          embplan::stage::behind_stage(p.searcher(), {.split_rows = true,
                                                      .layout = layout,
                                                      .data_parallel = {.enabled = true},
                                                      .rows_by_cost = rows_by_cost}),
          rule, p.scorer()};
}
template <class Planner>
embplan::rowwise_planner_of<Planner> staged(const Planner& p) {
  return staged(p, p.rule());
}

void bm_torchrec_like_data_parallel(benchmark::State& state) {
  run(state, staged(embplan::torchrec_like_planner{}));
}

void bm_neuroshard_ls_data_parallel(benchmark::State& state) {
  run(state, staged(embplan::neuroshard_ls_planner{}));
}

// Every option at once (every sharding type and the cache option): devices
// whose HBM holds 80 % of the tables (host DRAM unbounded), so choose_tiers
// (stage/tiers.hpp, inside the timed call) first moves tables behind a
// cache in HBM (uvm_caching) or to host memory until they take 90 % of HBM;
// then the staged planner replicates small tables (data-parallel), splits by
// rows a table no device holds and a table that fits where rows are cheaper
// (rows_by_cost), and places the rest table-wise and column-wise. What
// `plan --tiers auto --data-parallel auto --rows-by-cost auto --planner
// rowwise_<p>` runs (--row-layout by_cost, the default).
embplan::task tight_hbm_task(std::int64_t tables, std::int64_t devices) {
  auto t = embplan_bench::bench_task(tables, devices);
  const auto need = static_cast<double>(embplan::stage::tables_hbm_bytes(t));
  for (auto& d : t.cluster.devices)
    d.memory_bytes = static_cast<std::uint64_t>(0.8 * need / static_cast<double>(devices));
  return t;
}

// `nvlink`: hosts with NVLink-class links inside (150 GB/s) and 25 GB/s
// between, where a table split by rows is cheaper reduced inside one host
// (table_row_wise, grid) than spread (row_wise); the default topology has
// PCIe inside a host (12 GB/s) and 12.5 GB/s between.
template <class Planner>
void run_tiered(benchmark::State& state, const Planner& p, bool nvlink = false,
                embplan::stage::row_layout layout = embplan::stage::row_layout::by_cost) {
  auto t = tight_hbm_task(state.range(0), state.range(1));
  if (nvlink) {
    t.cluster.intra_host_bandwidth_gbps = 150.0;
    t.cluster.inter_host_bandwidth_gbps = 25.0;
  }
  run(state, staged(p, p.rule(), layout, true), t, [&](embplan::task& tiered) {
    state.counters["tier_moves"] = static_cast<double>(embplan::stage::choose_tiers(tiered).size());
  });
}

// The staged neuroshard_ls under user rules (constraint/table_rules.hpp): a
// table pinned to device 2, two tables co-located, two kept apart. The stage
// asks the rules about the full task; tables no rule names are asked on the
// sub-task (stage/staged.hpp, in_full_task).
void bm_neuroshard_ls_user_rules(benchmark::State& state) {
  const auto t = embplan_bench::bench_task(state.range(0), state.range(1));
  embplan::user_constraints c;
  c.tables.push_back({.table = 3, .devices = {2}});
  c.colocate.push_back({10, 11});
  c.separate.push_back({20, 21});
  const embplan::default_constraint rule(embplan::memory_capacity{}, embplan::dim_multiple{},
                                         embplan::table_rules(t, c));
  run(state, staged(embplan::neuroshard_ls_planner{}, rule), t, no_prepare{});
}

void bm_torchrec_like_all_options(benchmark::State& state) {
  run_tiered(state, embplan::torchrec_like_planner{});
}

void bm_neuroshard_ls_all_options(benchmark::State& state) {
  run_tiered(state, embplan::neuroshard_ls_planner{});
}

void bm_torchrec_like_all_options_nvlink(benchmark::State& state) {
  run_tiered(state, embplan::torchrec_like_planner{}, true);
}

void bm_neuroshard_ls_all_options_nvlink(benchmark::State& state) {
  run_tiered(state, embplan::neuroshard_ls_planner{}, true);
}

// The portfolio of the two (neuroshard_ls and torchrec_like, each behind its
// own stage; the cheaper plan of the full task kept: search/best_of.hpp).
void bm_portfolio_all_options(benchmark::State& state) {
  run_tiered(state, embplan::portfolio_planner{});
}

void bm_portfolio_all_options_nvlink(benchmark::State& state) {
  run_tiered(state, embplan::portfolio_planner{}, true);
}

// The same with every split table spread over hosts (row_wise), to compare.
void bm_torchrec_like_all_options_nvlink_spread(benchmark::State& state) {
  run_tiered(state, embplan::torchrec_like_planner{}, true, embplan::stage::row_layout::row_wise);
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tables", "devices"});
  // 500 x 8 and 5,384 x 1,024: the two cases TorchRec's planner users report
  // as slow to plan (500+ tables on 8 GPUs; a model of 5,384 tables on 1,024
  // GPUs; docs/design/benchmarks.md). From 100 tables, to show how time grows
  // from 100 to 10,000.
  for (const auto& [tables, devices] : {std::pair{100, 16},
                                        {500, 8},
                                        {1000, 128},
                                        {2500, 256},
                                        {5000, 512},
                                        {5384, 1024},
                                        {10000, 1024}})
    b->Args({tables, devices});
  b->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(bm_torchrec_like)->Apply(sizes);
BENCHMARK(bm_neuroshard_ls)->Apply(sizes);
BENCHMARK(bm_neuroshard_ls_learned)->Apply(sizes);
BENCHMARK(bm_neuroshard_ls_learned_2threads)->Apply(sizes);
BENCHMARK(bm_torchrec_like_data_parallel)->Apply(sizes);
BENCHMARK(bm_neuroshard_ls_data_parallel)->Apply(sizes);
BENCHMARK(bm_neuroshard_ls_user_rules)->Apply(sizes);
BENCHMARK(bm_torchrec_like_all_options)->Apply(sizes);
BENCHMARK(bm_neuroshard_ls_all_options)->Apply(sizes);
BENCHMARK(bm_torchrec_like_all_options_nvlink)->Apply(sizes);
BENCHMARK(bm_neuroshard_ls_all_options_nvlink)->Apply(sizes);
BENCHMARK(bm_torchrec_like_all_options_nvlink_spread)->Apply(sizes);
BENCHMARK(bm_portfolio_all_options)->Apply(sizes);
BENCHMARK(bm_portfolio_all_options_nvlink)->Apply(sizes);

BENCHMARK_MAIN();
