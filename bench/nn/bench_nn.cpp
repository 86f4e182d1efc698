// The tiny networks of nn/ at the sizes the papers use:
// - NeuroShard's compute-cost network (20 table features, table MLP 128-32,
//   sum, head 32-64-1) pricing one device of 10 tables: from raw features, and
//   from per-table latents computed once (what a planner that caches them pays);
// - the same device through packed_compute_cost_net (goal: <= 2 us), on
//   the kernel chosen at run time and on each kernel by name; and its
//   finish() alone, the head after the first layer's sum (a planner's cost
//   per placement, concepts/piecewise.hpp), and term(), one table's share of
//   the head's first layer (paid once per piece);
// - one row through NeuroShard's forward communication-cost network
//   (2 x devices inputs, 128-64-32-16, one output per device; 4 and 8
//   devices) as neural_comm ran it on Eigen (normalise, mlp::forward with a
//   tape) and through packed_comm_cost_net on each kernel;
// - the same for 1,000 devices of 10 tables in one batched call;
// - one step of AutoShard's two-layer LSTM policy (hidden 64, input 64; and
//   hidden 128), batch 1;
// - one training step (forward, MSE, backward, Adam) at NeuroShard's batch of
//   512 devices, 1-15 tables each (App. E.2: batch size 512, Adam lr 0.001).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/comm_cost_net.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/lstm.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/packed_comm_cost_net.hpp"
#include "embplan/nn/packed_compute_cost_net.hpp"

namespace {

using embplan::nn::matrix;

matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  embplan::rng gen(seed);
  matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<float>(gen.uniform(-1.0, 1.0));
  return m;
}

embplan::nn::compute_cost_net trained_shape_net() {
  embplan::nn::compute_cost_net net({}, 1);
  net.feature_norm = embplan::nn::normalizer::fit(random_matrix(100, 20, 2));
  return net;
}

void bm_compute_cost_device(benchmark::State& state) {
  const auto net = trained_shape_net();
  const matrix features = random_matrix(state.range(0), 20, 3);
  embplan::nn::compute_cost_tape tape;
  for (auto _ : state) {
    float cost = net.forward(features, tape);
    benchmark::DoNotOptimize(cost);
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_packed_compute_cost_device(benchmark::State& state, embplan::nn::simd_kernel kernel) {
  if (!embplan::nn::simd_kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const embplan::nn::packed_compute_cost_net net(trained_shape_net(), kernel);
  const matrix features = random_matrix(state.range(0), 20, 3);
  for (auto _ : state) {
    float cost = net(features);
    benchmark::DoNotOptimize(cost);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(to_string(net.kernel())));
}

// finish() alone (the head after its first layer's sum: ReLU and a 64-float
// dot for 32-64-1): what the planners pay per placement once the pieces'
// terms are known (concepts/piecewise.hpp).
void bm_packed_finish(benchmark::State& state, embplan::nn::simd_kernel kernel) {
  if (!embplan::nn::simd_kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const embplan::nn::packed_compute_cost_net net(trained_shape_net(), kernel);
  const matrix z = random_matrix(1, static_cast<Eigen::Index>(net.term_size()), 11);
  for (auto _ : state) {
    float cost = net.finish(z.data());
    benchmark::DoNotOptimize(cost);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(to_string(net.kernel())));
}

// term() alone: one table's raw features through the table MLP and the head's
// first layer (what a planner pays once per piece, concepts/piecewise.hpp).
void bm_packed_term(benchmark::State& state, embplan::nn::simd_kernel kernel) {
  if (!embplan::nn::simd_kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const embplan::nn::packed_compute_cost_net net(trained_shape_net(), kernel);
  const matrix x = random_matrix(1, 20, 12);
  std::vector<float> out(net.term_size());
  for (auto _ : state) {
    net.term(x.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(to_string(net.kernel())));
}

// The forward comm net of `devices` devices, its normaliser fitted on dim
// sums and skews of the magnitudes neural_comm feeds.
embplan::nn::comm_cost_net comm_shape_net(Eigen::Index devices) {
  embplan::nn::comm_cost_net net({.features = 2 * devices, .outputs = devices}, 13);
  matrix stats = random_matrix(100, 2 * devices, 14);
  stats.array() = (stats.array() + 1.0f) * 1000.0f;
  net.feature_norm = embplan::nn::normalizer::fit(stats);
  return net;
}

void bm_comm_cost_row(benchmark::State& state) {
  const auto net = comm_shape_net(state.range(0));
  const matrix x = ((random_matrix(1, 2 * state.range(0), 15).array() + 1.0f) * 1000.0f).matrix();
  matrix normalised;
  embplan::nn::mlp_tape tape;
  for (auto _ : state) {
    net.feature_norm.apply(x, normalised);
    net.hidden.forward(normalised, tape);
    benchmark::DoNotOptimize(tape.output().data());
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_packed_comm_cost_row(benchmark::State& state, embplan::nn::simd_kernel kernel) {
  if (!embplan::nn::simd_kernel_supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const embplan::nn::packed_comm_cost_net net(comm_shape_net(state.range(0)), kernel);
  const matrix x = ((random_matrix(1, 2 * state.range(0), 15).array() + 1.0f) * 1000.0f).matrix();
  std::vector<float> y(net.outputs());
  for (auto _ : state) {
    net(std::span<const float>(x.data(), net.features()), y);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::string(to_string(net.kernel())));
}

void bm_compute_cost_device_from_latents(benchmark::State& state) {
  const auto net = trained_shape_net();
  embplan::nn::compute_cost_tape tape;
  matrix latents;
  net.table_latents(random_matrix(state.range(0), 20, 3), latents, tape);
  for (auto _ : state) {
    float cost = net.cost_from_latents(latents, tape);
    benchmark::DoNotOptimize(cost);
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_compute_cost_batched(benchmark::State& state) {
  const auto net = trained_shape_net();
  const Eigen::Index devices = state.range(0);
  const Eigen::Index tables = 10;
  const matrix features = random_matrix(devices * tables, 20, 4);
  std::vector<std::int64_t> group;
  for (Eigen::Index d = 0; d < devices; ++d)
    group.insert(group.end(), static_cast<std::size_t>(tables), d);
  embplan::nn::compute_cost_tape tape;
  for (auto _ : state) {
    net.forward(features, group, devices, tape);
    benchmark::DoNotOptimize(tape.output().data());
  }
  state.SetItemsProcessed(state.iterations() * devices);
}

void bm_lstm_step(benchmark::State& state) {
  const Eigen::Index hidden = state.range(0);
  embplan::rng gen(5);
  const embplan::nn::lstm net(64, hidden, 2, gen);
  const matrix x = random_matrix(1, 64, 6);
  auto s = net.initial_state(1);
  embplan::nn::lstm_workspace ws;
  for (auto _ : state) {
    net.step(x, s, ws);
    benchmark::DoNotOptimize(s.h.back().data());
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_compute_cost_train_step(benchmark::State& state) {
  auto net = trained_shape_net();
  auto grad = embplan::nn::zeros_like(net);
  embplan::nn::adam opt;
  embplan::rng gen(7);
  embplan::nn::compute_cost_batch batch;
  const Eigen::Index devices = state.range(0);
  for (Eigen::Index d = 0; d < devices; ++d)
    batch.group.insert(batch.group.end(), static_cast<std::size_t>(gen.between(1, 15)), d);
  batch.features = random_matrix(static_cast<Eigen::Index>(batch.group.size()), 20, 8);
  batch.targets = random_matrix(devices, 1, 9);
  embplan::nn::compute_cost_tape tape;
  double loss = 0.0;
  for (auto _ : state) {
    loss = embplan::nn::train_step(net, batch, opt, grad, tape);
    benchmark::DoNotOptimize(loss);
  }
  state.SetItemsProcessed(state.iterations() * devices);
  state.counters["tables"] = static_cast<double>(batch.group.size());
}

}  // namespace

BENCHMARK(bm_compute_cost_device)->Arg(10)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_packed_compute_cost_device, automatic, embplan::nn::simd_kernel::automatic)
    ->Arg(10)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_packed_compute_cost_device, scalar, embplan::nn::simd_kernel::scalar)
    ->Arg(10)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_packed_compute_cost_device, avx2, embplan::nn::simd_kernel::avx2)
    ->Arg(10)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_packed_compute_cost_device, avx512, embplan::nn::simd_kernel::avx512)
    ->Arg(10)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_packed_finish, automatic, embplan::nn::simd_kernel::automatic)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_finish, scalar, embplan::nn::simd_kernel::scalar)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_finish, avx2, embplan::nn::simd_kernel::avx2)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_finish, avx512, embplan::nn::simd_kernel::avx512)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_term, scalar, embplan::nn::simd_kernel::scalar)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_term, avx2, embplan::nn::simd_kernel::avx2)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_term, avx512, embplan::nn::simd_kernel::avx512)
    ->Unit(benchmark::kNanosecond);
BENCHMARK(bm_comm_cost_row)->Arg(4)->Arg(8)->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_comm_cost_row, scalar, embplan::nn::simd_kernel::scalar)
    ->Arg(4)
    ->Arg(8)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_comm_cost_row, avx2, embplan::nn::simd_kernel::avx2)
    ->Arg(4)
    ->Arg(8)
    ->Unit(benchmark::kNanosecond);
BENCHMARK_CAPTURE(bm_packed_comm_cost_row, avx512, embplan::nn::simd_kernel::avx512)
    ->Arg(4)
    ->Arg(8)
    ->Unit(benchmark::kNanosecond);
BENCHMARK(bm_compute_cost_device_from_latents)->Arg(10)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_compute_cost_batched)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_lstm_step)->Arg(64)->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_compute_cost_train_step)->Arg(512)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
