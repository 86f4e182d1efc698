// Memory and time of reading a task file, planning it and writing the plan,
// at 100,000 and 1,000,000 tables on 1,024 devices (bench/common/bench_task.hpp),
// the streamed way the CLI does it (io::read_task_file: each table converted
// as the parser reaches it; io::write_plan_file: one shard at a time) against
// the whole-document way (read_json_file + tasks_from_json; to_json +
// write_json_file), which is also the library's API for small documents.
// Goal (issue 51, class 8): a 1,000,000-table task plans in <= 1 GB peak.
//
// Counters: peak_heap_MB, the peak of live heap bytes during one call above
// what was live when it began (common/counting_heap.hpp: every allocation of
// this program is counted); file_MB, the task file's size. Run one size at a
// time for a max RSS of its own, e.g.
//   bench_io --benchmark_filter='bm_plan_file_streamed/1000000$'
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "embplan/io/json.hpp"
#include "embplan/presets.hpp"

#include "common/bench_task.hpp"
#include "common/counting_heap.hpp"

namespace {

// A task file of `tables` tables on 1,024 devices, written once per size and
// removed at exit.
class task_file_fixture {
 public:
  explicit task_file_fixture(std::int64_t tables)
      : path_(std::filesystem::temp_directory_path() /
              ("embplan_bench_io_" + std::to_string(::getpid()) + "_" + std::to_string(tables) +
               ".json")) {
    const auto t = embplan_bench::bench_task(tables, 1024);
    embplan::io::write_tasks_file(path_, std::span<const embplan::task>(&t, 1));
  }
  task_file_fixture(const task_file_fixture&) = delete;
  task_file_fixture& operator=(const task_file_fixture&) = delete;
  ~task_file_fixture() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  double megabytes() const { return static_cast<double>(std::filesystem::file_size(path_)) / 1e6; }

 private:
  std::filesystem::path path_;
};

const std::filesystem::path out_path() {
  return std::filesystem::temp_directory_path() /
         ("embplan_bench_io_plan_" + std::to_string(::getpid()) + ".json");
}

// `body()` timed and its heap peak counted, once per iteration.
template <class Body>
void measure(benchmark::State& state, const task_file_fixture& file, Body body) {
  double peak_mb = 0.0;
  for (auto _ : state) {
    const std::int64_t base = embplan_bench::live_bytes.load();
    embplan_bench::peak_bytes.store(base);
    body();
    peak_mb = std::max(peak_mb, static_cast<double>(embplan_bench::peak_bytes.load() - base) / 1e6);
  }
  state.counters["peak_heap_MB"] = peak_mb;
  state.counters["file_MB"] = file.megabytes();
  std::error_code ec;
  std::filesystem::remove(out_path(), ec);
}

embplan::plan_result plan_of(const embplan::task& t) {
  auto r = embplan::lookup_greedy_planner{}(t, 0);
  if (!r.ok) throw embplan::error("bench_io: lookup_greedy found no plan: " + r.failure);
  return r;
}

void bm_read_task_streamed(benchmark::State& state) {
  const task_file_fixture file(state.range(0));
  measure(state, file, [&] {
    auto t = embplan::io::read_task_file(file.path()).take(0);
    benchmark::DoNotOptimize(t);
  });
}

void bm_read_task_document(benchmark::State& state) {
  const task_file_fixture file(state.range(0));
  measure(state, file, [&] {
    auto t = embplan::io::tasks_from_json(embplan::io::read_json_file(file.path()));
    benchmark::DoNotOptimize(t);
  });
}

// Read, plan (lookup_greedy, the CLI's default) and write the plan: what
// `embplan plan --task F --out P` does, less its printed report.
void bm_plan_file_streamed(benchmark::State& state) {
  const task_file_fixture file(state.range(0));
  measure(state, file, [&] {
    const auto t = embplan::io::read_task_file(file.path()).take(0);
    const auto r = plan_of(t);
    const embplan::plan_provenance made =
        embplan::provenance_of(t, r.placement, "lookup_greedy", 0);
    embplan::io::write_plan_file(out_path(), t, r.placement, &made);
  });
}

void bm_plan_file_document(benchmark::State& state) {
  const task_file_fixture file(state.range(0));
  measure(state, file, [&] {
    const auto t = embplan::io::tasks_from_json(embplan::io::read_json_file(file.path())).at(0);
    const auto r = plan_of(t);
    const embplan::plan_provenance made =
        embplan::provenance_of(t, r.placement, "lookup_greedy", 0);
    embplan::io::write_json_file(out_path(), embplan::io::to_json(t, r.placement, made));
  });
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(100'000)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(bm_read_task_streamed)->Apply(sizes);
BENCHMARK(bm_read_task_document)->Apply(sizes);
BENCHMARK(bm_plan_file_streamed)->Apply(sizes);
BENCHMARK(bm_plan_file_document)->Apply(sizes);

BENCHMARK_MAIN();
