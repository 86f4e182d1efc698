// The CUDA embedding bag (kernel/embedding_bag.cuh) on the shapes of the CPU
// bench (bench_embedding_bag.cpp): T = 8 tables of 1,000,000 rows, dim 16 / 64
// / 128, bags of exactly 32 lookups, sum pooling; batch 2,048 (the CPU
// bench's) and 65,536 (the papers' GPU batch, NeuroShard §4 / DreamShard §5).
// Indices are uniform, or "hot": half of the lookups go to 64 rows per table,
// which is where the backward's hot-row splitting has to work.
// tools/bench_torch_embedding_bag.py --device cuda runs the same shapes
// through torch.nn.EmbeddingBag.
//
// Timing follows AutoShard's protocol on a GPU (meter/protocol.hpp,
// meter/cuda_timer.cuh): CUDA events around the enqueued kernels only, the
// L2 cache flushed before every timed run (a memset of a buffer 4x the L2,
// outside the events), so no run replays the previous run's cached rows.
// Without a device every benchmark is skipped with a message.
//
// items_per_second = lookups/s; bytes_per_second counts the weight rows read
// and the output written (forward) / rows read and written once plus the
// gradient rows read (backward), as the CPU bench does.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/kernel/embedding_bag.cuh"
#include "embplan/kernel/tbe.hpp"
#include "embplan/meter/cuda_timer.cuh"

namespace {

namespace k = embplan::kernel;

constexpr std::int64_t tables = 8;
constexpr std::int64_t rows_per_table = 1'000'000;
constexpr std::int64_t bag_length = 32;
constexpr std::int64_t hot_rows = 64;

enum class pattern : std::int64_t { uniform = 0, hot = 1 };

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// One problem on the device: weights, one batch, its gradient, and the L2
// flush.
template <class Weight>
struct device_problem {
  std::int32_t dim;
  std::int64_t batch_size;
  pattern kind;
  std::unique_ptr<k::device_tbe<Weight>> tbe;
  embplan::meter::cuda_l2_flusher flush;

  device_problem(std::int32_t d, std::int64_t b, pattern p) : dim(d), batch_size(b), kind(p) {
    const std::vector<std::int64_t> rows(tables, rows_per_table);
    const std::vector<std::int32_t> dims(tables, d);
    const auto layout = k::make_tbe_layout(rows, dims);
    // Zeros: the values do not change the timing (no denormals).
    tbe = std::make_unique<k::device_tbe<Weight>>(layout, k::zero_weights);

    embplan::rng gen(2024);
    std::vector<std::int64_t> offsets;
    offsets.reserve(static_cast<std::size_t>(tables * b + 1));
    for (std::int64_t bag = 0; bag <= tables * b; ++bag)
      offsets.push_back(bag * bag_length);
    std::vector<std::int64_t> indices(static_cast<std::size_t>(tables * b * bag_length));
    for (auto& i : indices) {
      const bool to_hot = p == pattern::hot && gen.below(2) == 0;
      i = static_cast<std::int64_t>(to_hot ? gen.below(hot_rows)
                                           : gen.below(static_cast<std::uint64_t>(rows_per_table)));
    }
    tbe->upload_batch({.batch_size = b, .indices = indices, .offsets = offsets});
    std::vector<float> grad(static_cast<std::size_t>(b * layout.total_dim()));
    for (auto& g : grad)
      g = static_cast<float>(gen.uniform(-1e-3, 1e-3));
    tbe->upload_grad_output(grad);

    EMBPLAN_CUDA_CHECK(cudaDeviceSynchronize());
  }

  std::int64_t lookups() const { return tables * batch_size * bag_length; }
};

// The one problem alive (a dim-128 fp32 set is 4 GiB of device memory).
template <class Weight>
device_problem<Weight>& only(std::int32_t dim, std::int64_t batch, pattern p) {
  static std::unique_ptr<device_problem<float>> f32;
  static std::unique_ptr<device_problem<k::half>> f16;
  auto& mine = [&]() -> std::unique_ptr<device_problem<Weight>>& {
    if constexpr (std::is_same_v<Weight, float>) {
      f16.reset();
      return f32;
    } else {
      f32.reset();
      return f16;
    }
  }();
  if (!mine || mine->dim != dim || mine->batch_size != batch || mine->kind != p) {
    mine.reset();
    mine = std::make_unique<device_problem<Weight>>(dim, batch, p);
  }
  return *mine;
}

template <class Weight, class Run>
void timed_loop(benchmark::State& state, device_problem<Weight>& d, Run&& run) {
  embplan::meter::cuda_event_timer timer(nullptr);
  run();  // warm-up: first-touch of every buffer, module load
  EMBPLAN_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto _ : state) {
    d.flush();
    timer.start();
    run();
    state.SetIterationTime(timer.stop_ms() * 1e-3);
  }
}

enum class op { forward, backward_sgd, forward_backward };

template <class Weight>
void bm(benchmark::State& state, op which, std::int32_t dim, std::int64_t batch, pattern p) {
  if (!have_device()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  auto& d = only<Weight>(dim, batch, p);
  const auto forward = [&] { d.tbe->forward(k::pooling_mode::sum); };
  const auto backward = [&] { d.tbe->backward_sgd(k::pooling_mode::sum, 1e-6f); };
  const std::int64_t row_bytes = std::int64_t{dim} * static_cast<std::int64_t>(sizeof(Weight));
  const std::int64_t out_bytes = batch * tables * dim * std::int64_t{sizeof(float)};
  switch (which) {
    case op::forward:
      timed_loop(state, d, forward);
      state.SetBytesProcessed(state.iterations() * (d.lookups() * row_bytes + out_bytes));
      break;
    case op::backward_sgd:
      timed_loop(state, d, backward);
      state.SetBytesProcessed(state.iterations() * d.lookups() * (2 * row_bytes + dim * 4));
      break;
    case op::forward_backward:
      timed_loop(state, d, [&] {
        forward();
        backward();
      });
      break;
  }
  state.SetItemsProcessed(state.iterations() * d.lookups());
}

// Registered problem by problem (all three operations on one problem before
// the next is built): building a 4 GiB problem costs seconds.
template <class Weight>
void register_all(const char* type) {
  for (const std::int64_t batch : {2048, 65536}) {
    for (const std::int32_t dim : {16, 64, 128}) {
      for (const pattern p : {pattern::uniform, pattern::hot}) {
        for (const auto& [which, name] :
             {std::pair{op::forward, "forward"}, std::pair{op::backward_sgd, "backward_sgd"},
              std::pair{op::forward_backward, "forward_backward"}}) {
          const std::string label =
              std::string(name) + "<" + type + ">/dim:" + std::to_string(dim) +
              "/batch:" + std::to_string(batch) + (p == pattern::hot ? "/hot" : "/uniform");
          benchmark::RegisterBenchmark(
              label.c_str(),
              [=](benchmark::State& state) { bm<Weight>(state, which, dim, batch, p); })
              ->Unit(benchmark::kMicrosecond)
              ->UseManualTime();
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all<float>("fp32");
  register_all<k::half>("fp16");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
