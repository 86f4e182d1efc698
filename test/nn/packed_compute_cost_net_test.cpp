#include "embplan/nn/packed_compute_cost_net.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/compute_cost_net.hpp"

#include "nn/gradient_check.hpp"
#include "support/message_of.hpp"
#include "support/runnable_kernels.hpp"

using embplan::nn::compute_cost_net;
using embplan::nn::compute_cost_net_options;
using embplan::nn::matrix;
using embplan::nn::packed_compute_cost_net;
using embplan::nn::simd_kernel;

namespace {

// A net with PyTorch's init and a fitted normaliser, one feature constant
// (std 0 after an explicit override: the divide-by-1 rule).
compute_cost_net random_net(const compute_cost_net_options& o, std::uint64_t seed) {
  compute_cost_net net(o, seed);
  embplan::rng gen(seed + 100);
  matrix stats = nn_test::random_matrix(50, o.table_features, gen, 4.0);
  stats.col(0).array() += 1000.0f;  // a large offset, as row counts have
  net.feature_norm = embplan::nn::normalizer::fit(stats);
  if (o.table_features > 1) net.feature_norm.stddev(0, 1) = 0.0f;
  return net;
}

matrix random_features(Eigen::Index tables, Eigen::Index features, std::uint64_t seed) {
  embplan::rng gen(seed);
  matrix x = nn_test::random_matrix(tables, features, gen, 4.0);
  x.col(0).array() += 1000.0f;
  return x;
}

// |packed - reference| <= 1e-5 relative (absolute below a magnitude of 1).
void check_close(float packed, float reference) {
  const double tol = 1e-5 * std::max(1.0, std::abs(static_cast<double>(reference)));
  CHECK(std::abs(static_cast<double>(packed) - static_cast<double>(reference)) <= tol);
}

}  // namespace

TEST_CASE("packed net equals compute_cost_net on every kernel and table count") {
  const compute_cost_net net = random_net({}, 3);
  for (const auto k : embplan::test::runnable_kernels()) {
    const packed_compute_cost_net packed(net, k);
    for (const Eigen::Index tables : {0, 1, 3, 10, 17, 64}) {
      CAPTURE(to_string(k));
      CAPTURE(tables);
      for (std::uint64_t seed = 0; seed < 3; ++seed) {
        const matrix x =
            random_features(tables, 20, 1000 * static_cast<std::uint64_t>(tables) + seed);
        check_close(packed(x), net(x));
      }
    }
  }
}

TEST_CASE("an empty device costs the head at a zero latent sum") {
  const compute_cost_net net = random_net({}, 5);
  const float head_at_zero = net.c_hidden(matrix::Zero(1, 32))(0, 0);
  for (const auto k : embplan::test::runnable_kernels()) {
    CAPTURE(to_string(k));
    check_close(packed_compute_cost_net(net, k)(matrix(0, 20)), head_at_zero);
  }
}

TEST_CASE("odd shapes: padding, deeper and shallower MLPs, wide layers") {
  const std::vector<compute_cost_net_options> shapes{
      {.table_features = 5, .table_mlp_sizes = {6, 4}, .pred_mlp_sizes = {4, 5}},
      {.table_features = 37, .table_mlp_sizes = {50, 33, 17}, .pred_mlp_sizes = {17, 40, 9}},
      {.table_features = 20, .table_mlp_sizes = {128, 32}, .pred_mlp_sizes = {32}},
      // Wider than the stack scratch holds at 16 rows: fewer rows per chunk.
      {.table_features = 20, .table_mlp_sizes = {300, 40}, .pred_mlp_sizes = {40, 8}},
      // Wider still: heap scratch.
      {.table_features = 3, .table_mlp_sizes = {3000, 8}, .pred_mlp_sizes = {8, 8}},
  };
  std::uint64_t seed = 11;
  for (const auto& o : shapes) {
    const compute_cost_net net = random_net(o, seed++);
    for (const auto k : embplan::test::runnable_kernels()) {
      const packed_compute_cost_net packed(net, k);
      CHECK(packed.table_features() == o.table_features);
      CHECK(packed.latent_size() == o.table_mlp_sizes.back());
      for (const Eigen::Index tables : {0, 1, 7, 13, 29}) {
        CAPTURE(to_string(k));
        CAPTURE(o.table_features);
        CAPTURE(tables);
        const matrix x = random_features(tables, o.table_features, seed++);
        check_close(packed(x), net(x));
      }
    }
  }
}

TEST_CASE("relu flags of the source net are kept") {
  compute_cost_net net = random_net({}, 7);
  net.t_hidden.relu_after_last = false;  // latents may be negative
  net.c_hidden.relu_after_last = true;   // cost clamped at 0
  net.c_hidden.layers.back().bias(0, 0) = -100.0f;
  const matrix x = random_features(10, 20, 8);
  for (const auto k : embplan::test::runnable_kernels()) {
    CAPTURE(to_string(k));
    const packed_compute_cost_net packed(net, k);
    CHECK(packed(x) == 0.0f);
  }
  net.c_hidden.layers.back().bias(0, 0) = 100.0f;
  for (const auto k : embplan::test::runnable_kernels()) {
    CAPTURE(to_string(k));
    check_close(packed_compute_cost_net(net, k)(x), net(x));
  }
}

TEST_CASE("strided features: a column block of a wider matrix") {
  const compute_cost_net net = random_net({}, 9);
  const matrix wide = random_features(10, 27, 10);
  const auto block = wide.block(0, 3, 10, 20);
  const matrix copy = block;
  for (const auto k : embplan::test::runnable_kernels()) {
    CAPTURE(to_string(k));
    check_close(packed_compute_cost_net(net, k)(block), net(copy));
  }
}

TEST_CASE("a snapshot: later changes to the net do not reach it; copies agree") {
  compute_cost_net net = random_net({}, 12);
  const matrix x = random_features(10, 20, 13);
  const float before = net(x);
  const packed_compute_cost_net packed(net);
  net.t_hidden.layers[0].weight.setZero();
  net.feature_norm.mean.setZero();
  check_close(packed(x), before);
  const packed_compute_cost_net copy =
      packed;  // NOLINT(performance-unnecessary-copy-initialization)
  CHECK(copy(x) == packed(x));
  CHECK(copy.kernel() == packed.kernel());
}

TEST_CASE("const calls from several threads give the single-thread result") {
  const compute_cost_net net = random_net({}, 14);
  const packed_compute_cost_net packed(net);
  std::vector<matrix> inputs;
  std::vector<float> expected;
  for (std::uint64_t s = 0; s < 8; ++s) {
    inputs.push_back(random_features(static_cast<Eigen::Index>(s * 3), 20, 200 + s));
    expected.push_back(packed(inputs.back()));
  }
  std::vector<float> got0(inputs.size()), got1(inputs.size());
  auto work = [&](std::vector<float>& got) {
    for (int rep = 0; rep < 50; ++rep) {
      for (std::size_t i = 0; i < inputs.size(); ++i)
        got[i] = packed(inputs[i]);
    }
  };
  std::thread t0(work, std::ref(got0));
  std::thread t1(work, std::ref(got1));
  t0.join();
  t1.join();
  CHECK(got0 == expected);
  CHECK(got1 == expected);
}

TEST_CASE("kernel choice: automatic takes the widest; an unsupported request names itself") {
  using embplan::nn::detail::resolve_simd_kernel;
  CHECK(resolve_simd_kernel(simd_kernel::automatic, true, true) == simd_kernel::avx512);
  CHECK(resolve_simd_kernel(simd_kernel::automatic, true, false) == simd_kernel::avx2);
  CHECK(resolve_simd_kernel(simd_kernel::automatic, false, false) == simd_kernel::scalar);
  CHECK(resolve_simd_kernel(simd_kernel::scalar, false, false) == simd_kernel::scalar);
  CHECK(resolve_simd_kernel(simd_kernel::avx2, true, false) == simd_kernel::avx2);

  const auto no_avx512 =
      embplan::test::message_of([] { resolve_simd_kernel(simd_kernel::avx512, true, false); });
  CHECK(no_avx512.find("packed_compute_cost_net.kernel") != std::string::npos);
  CHECK(no_avx512.find("\"avx512\"") != std::string::npos);
  CHECK(no_avx512.find("scalar, avx2)") != std::string::npos);
  const auto no_avx2 =
      embplan::test::message_of([] { resolve_simd_kernel(simd_kernel::avx2, false, false); });
  CHECK(no_avx2.find("\"avx2\"") != std::string::npos);
  const auto bogus = embplan::test::message_of(
      [] { resolve_simd_kernel(static_cast<simd_kernel>(9), true, true); });
  CHECK(bogus.find("packed_compute_cost_net.kernel' = 9") != std::string::npos);

  // This machine: the constructor resolves with the real CPU.
  const compute_cost_net net = random_net({}, 15);
  const packed_compute_cost_net automatic(net);
  CHECK(automatic.kernel() != simd_kernel::automatic);
  CHECK(embplan::nn::simd_kernel_supported(automatic.kernel()));
  for (const auto k : {simd_kernel::avx2, simd_kernel::avx512}) {
    CAPTURE(to_string(k));
    if (embplan::nn::simd_kernel_supported(k)) {
      CHECK(packed_compute_cost_net(net, k).kernel() == k);
    } else {
      const auto msg = embplan::test::message_of([&] { packed_compute_cost_net{net, k}; });
      CHECK(msg.find("\"" + std::string(to_string(k)) + "\"") != std::string::npos);
    }
  }
}

TEST_CASE("bad input names the field and the value") {
  const compute_cost_net net = random_net({}, 16);
  const packed_compute_cost_net packed(net);
  const auto wrong_cols = embplan::test::message_of([&] { (void)packed(matrix::Zero(10, 19)); });
  CHECK(wrong_cols.find("packed_compute_cost_net.features") != std::string::npos);
  CHECK(wrong_cols.find("[10, 19]") != std::string::npos);
  CHECK(wrong_cols.find("[*, 20]") != std::string::npos);

  const auto empty_net =
      embplan::test::message_of([] { packed_compute_cost_net{compute_cost_net{}}; });
  CHECK(empty_net.find("packed_compute_cost_net.net.t_hidden.layers' = 0") != std::string::npos);

  compute_cost_net two_outputs = net;
  two_outputs.c_hidden.layers.back() = embplan::nn::linear(64, 2);
  const auto not_one = embplan::test::message_of([&] { packed_compute_cost_net{two_outputs}; });
  CHECK(not_one.find("packed_compute_cost_net.net.c_hidden.out_features' = 2") !=
        std::string::npos);

  compute_cost_net short_norm = net;
  short_norm.feature_norm = embplan::nn::normalizer(19);
  const auto norm = embplan::test::message_of([&] { packed_compute_cost_net{short_norm}; });
  CHECK(norm.find("packed_compute_cost_net.net.feature_norm.mean' = \"[1, 19]\"") !=
        std::string::npos);

  compute_cost_net broken_chain = net;
  broken_chain.t_hidden.layers[1] = embplan::nn::linear(100, 32);
  const auto chain = embplan::test::message_of([&] { packed_compute_cost_net{broken_chain}; });
  CHECK(chain.find("packed_compute_cost_net.net.t_hidden.layers[1].in_features' = 100") !=
        std::string::npos);
}
