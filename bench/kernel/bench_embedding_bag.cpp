// The CPU embedding bag (kernel/embedding_bag.hpp) on DLRM-like shapes: T = 8
// tables of 1,000,000 rows, dim 16 / 64 / 128, batch 2048, bags of exactly 32
// lookups drawn uniformly (tools/bench_torch_embedding_bag.py runs the same
// shapes through torch.nn.EmbeddingBag). Four batches are cycled so that
// repeated iterations do not replay one cache-warm batch. Weights are held in
// kernel::cache_aligned_vector: 64-byte aligned (as torch's allocator aligns
// them) and, being large, advised as transparent huge pages (torch's are not);
// bm_forward_small_pages runs the same forward on a 64-byte aligned copy in
// ordinary 4 KiB pages, the kernel-for-kernel comparison with torch. Times the
// unchecked kernels after one validation, as the meter does; one thread.
//
// items_per_second = lookups/s; bytes_per_second counts the weight rows read
// (forward) or read and written once per unique row (backward), plus the
// output written / gradient rows read.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/kernel/embedding_bag.hpp"

namespace {

namespace k = embplan::kernel;

constexpr std::int64_t tables = 8;
constexpr std::int64_t rows_per_table = 1'000'000;
constexpr std::int64_t batch_size = 2048;
constexpr std::int64_t bag_length = 32;
constexpr int batches = 4;

struct batch_data {
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> offsets;
  k::tbe_batch_view view() const {
    return {.batch_size = batch_size, .indices = indices, .offsets = offsets};
  }
};

template <class Weight>
struct dataset {
  std::int32_t dim = 0;
  k::tbe_layout layout;
  k::cache_aligned_vector<Weight> weights;
  std::vector<batch_data> batch;
  std::vector<float> grad;

  explicit dataset(std::int32_t d) : dim(d) {
    const std::vector<std::int64_t> rows(tables, rows_per_table);
    const std::vector<std::int32_t> dims(tables, d);
    layout = k::make_tbe_layout(rows, dims);
    weights.resize(static_cast<std::size_t>(layout.total_weights()));
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const float v = static_cast<float>(static_cast<int>(i % 2039) - 1019) * 1e-3f;
      if constexpr (std::is_same_v<Weight, float>) {
        weights[i] = v;
      } else {
        weights[i] = k::to_half(v);
      }
    }
    embplan::rng gen(2024);
    for (int n = 0; n < batches; ++n) {
      batch_data b;
      for (std::int64_t bag = 0; bag <= tables * batch_size; ++bag)
        b.offsets.push_back(bag * bag_length);
      b.indices.resize(static_cast<std::size_t>(tables * batch_size * bag_length));
      for (auto& i : b.indices)
        i = static_cast<std::int64_t>(gen.below(rows_per_table));
      k::validate(layout, b.view());
      batch.push_back(std::move(b));
    }
    grad.resize(static_cast<std::size_t>(batch_size * layout.total_dim()));
    for (auto& g : grad)
      g = static_cast<float>(gen.uniform(-1e-3, 1e-3));
  }
};

// The one dataset alive (a dim-128 fp32 set is 4 GiB, so the other weight
// type's set is freed first).
struct holder {
  std::unique_ptr<dataset<float>> f32;
  std::unique_ptr<dataset<k::half>> f16;
};

template <class Weight>
dataset<Weight>& only(std::int32_t dim) {
  static holder h;
  auto& mine = [&]() -> std::unique_ptr<dataset<Weight>>& {
    if constexpr (std::is_same_v<Weight, float>) {
      h.f16.reset();
      return h.f32;
    } else {
      h.f32.reset();
      return h.f16;
    }
  }();
  if (!mine || mine->dim != dim) {
    mine.reset();
    mine = std::make_unique<dataset<Weight>>(dim);
  }
  return *mine;
}

// 64-byte aligned and never advised as huge pages: the pages torch's CPU
// allocator gets.
template <class T>
struct small_page_allocator {
  using value_type = T;
  small_page_allocator() noexcept = default;
  template <class U>
  small_page_allocator(const small_page_allocator<U>&) noexcept {}  // NOLINT: rebind
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  friend bool operator==(const small_page_allocator&, const small_page_allocator<U>&) noexcept {
    return true;
  }
};

template <class Weight>
void forward_loop(benchmark::State& state, dataset<Weight>& d, std::span<const Weight> weights,
                  k::isa which) {
  const std::int32_t dim = d.dim;
  std::vector<float> out(static_cast<std::size_t>(batch_size * d.layout.total_dim()));
  int n = 0;
  for (auto _ : state) {
    k::detail::forward_unchecked(d.layout, weights, d.batch[static_cast<std::size_t>(n)].view(),
                                 k::pooling_mode::sum, std::span<float>(out), which);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    n = (n + 1) % batches;
  }
  const std::int64_t lookups = tables * batch_size * bag_length;
  state.SetItemsProcessed(state.iterations() * lookups);
  state.SetBytesProcessed(state.iterations() *
                          (lookups * dim * static_cast<std::int64_t>(sizeof(Weight)) +
                           static_cast<std::int64_t>(out.size() * sizeof(float))));
  state.SetLabel(std::string(k::isa_name(which)));
}

template <class Weight>
void bm_forward(benchmark::State& state) {
  const auto dim = static_cast<std::int32_t>(state.range(0));
  const auto which = static_cast<k::isa>(state.range(1));
  if (!k::isa_supported(which)) {
    state.SkipWithError("instruction set not supported here");
    return;
  }
  auto& d = only<Weight>(dim);
  forward_loop(state, d, std::span<const Weight>(d.weights), which);
}

template <class Weight>
void bm_forward_small_pages(benchmark::State& state) {
  const auto dim = static_cast<std::int32_t>(state.range(0));
  const auto which = static_cast<k::isa>(state.range(1));
  if (!k::isa_supported(which)) {
    state.SkipWithError("instruction set not supported here");
    return;
  }
  auto& d = only<Weight>(dim);
  const std::vector<Weight, small_page_allocator<Weight>> copy(d.weights.begin(), d.weights.end());
  forward_loop(state, d, std::span<const Weight>(copy), which);
}

template <class Weight>
void bm_backward_sgd(benchmark::State& state) {
  const auto dim = static_cast<std::int32_t>(state.range(0));
  const auto which = static_cast<k::isa>(state.range(1));
  if (!k::isa_supported(which)) {
    state.SkipWithError("instruction set not supported here");
    return;
  }
  auto& d = only<Weight>(dim);
  k::backward_workspace ws;
  int n = 0;
  for (auto _ : state) {
    k::detail::backward_sgd_unchecked(
        d.layout, std::span<Weight>(d.weights), d.batch[static_cast<std::size_t>(n)].view(),
        k::pooling_mode::sum, std::span<const float>(d.grad), 0.01f, ws, which);
    benchmark::ClobberMemory();
    n = (n + 1) % batches;
  }
  const std::int64_t lookups = tables * batch_size * bag_length;
  // Almost every lookup is a unique row at 1M rows: count each row once read, once written.
  state.SetItemsProcessed(state.iterations() * lookups);
  state.SetBytesProcessed(state.iterations() * lookups * dim *
                          (2 * static_cast<std::int64_t>(sizeof(Weight)) + 4));
  state.SetLabel(std::string(k::isa_name(which)));
}

void shapes(benchmark::internal::Benchmark* b) {
  for (const int dim : {16, 64, 128}) {
    for (const k::isa which : {k::isa::avx512, k::isa::avx2})
      b->Args({dim, static_cast<std::int64_t>(which)});
  }
  b->ArgNames({"dim", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

// The 4 KiB-page copy doubles the weights' memory: dim 16 only (the dim
// where the page size matters most, a row per lookup and one line per row).
void small_page_shapes(benchmark::internal::Benchmark* b) {
  for (const k::isa which : {k::isa::avx512, k::isa::avx2})
    b->Args({16, static_cast<std::int64_t>(which)});
  b->ArgNames({"dim", "isa"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

BENCHMARK(bm_forward<float>)->Apply(shapes);
BENCHMARK(bm_forward_small_pages<float>)->Apply(small_page_shapes);
BENCHMARK(bm_backward_sgd<float>)->Apply(shapes);
BENCHMARK(bm_forward<k::half>)->Apply(shapes);
BENCHMARK(bm_forward_small_pages<k::half>)->Apply(small_page_shapes);
BENCHMARK(bm_backward_sgd<k::half>)->Apply(shapes);

BENCHMARK_MAIN();
