#include "embplan/nn/packed_comm_cost_net.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/comm_cost_net.hpp"

#include "nn/gradient_check.hpp"
#include "support/message_of.hpp"
#include "support/runnable_kernels.hpp"

using embplan::nn::comm_cost_net;
using embplan::nn::comm_cost_net_options;
using embplan::nn::matrix;
using embplan::nn::packed_comm_cost_net;
using embplan::nn::simd_kernel;

namespace {

// Rows as neural_comm feeds them: `devices` dim sums (hundreds to thousands)
// and, for the forward net, as many start skews (ms); column 1 nearly
// constant (0-4), the feature whose std random_comm_net sets to 0 (a constant
// feature, centred but not scaled: its raw thousands would swamp the outputs'
// last digits in cancellation).
matrix comm_rows(Eigen::Index rows, std::size_t devices, bool forward, std::uint64_t seed) {
  embplan::rng gen(seed);
  const auto n = static_cast<Eigen::Index>(devices);
  matrix x(rows, forward ? 2 * n : n);
  for (Eigen::Index r = 0; r < rows; ++r) {
    for (Eigen::Index c = 0; c < x.cols(); ++c)
      x(r, c) = static_cast<float>(c == 1  ? gen.uniform(0.0, 4.0)
                                   : c < n ? gen.uniform(0.0, 3000.0)
                                           : gen.uniform(0.0, 40.0));
  }
  return x;
}

// NeuroShard's shape (128-64-32-16) with PyTorch's init, a normaliser fitted
// on rows like the inputs, one feature's std set to 0 (the divide-by-1 rule).
comm_cost_net random_comm_net(std::size_t devices, bool forward, std::uint64_t seed,
                              std::vector<Eigen::Index> hidden = {128, 64, 32, 16}) {
  const auto n = static_cast<Eigen::Index>(devices);
  comm_cost_net_options o;
  o.features = forward ? 2 * n : n;
  o.outputs = n;
  o.hidden = std::move(hidden);
  comm_cost_net net(o, seed);
  net.feature_norm = embplan::nn::normalizer::fit(comm_rows(64, devices, forward, seed + 100));
  net.feature_norm.stddev(0, 1) = 0.0f;
  return net;
}

std::vector<float> comm_packed_rows(const packed_comm_cost_net& net, const matrix& x) {
  std::vector<float> out(static_cast<std::size_t>(x.rows()) * net.outputs());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    net(std::span<const float>(x.row(r).data(), net.features()),
        std::span<float>(out.data() + static_cast<std::size_t>(r) * net.outputs(), net.outputs()));
  }
  return out;
}

}  // namespace

TEST_CASE("every kernel gives the scalar kernel's floats, bit for bit") {
  for (const std::size_t devices : {std::size_t{4}, std::size_t{8}}) {
    for (const bool forward : {true, false}) {
      CAPTURE(devices);
      CAPTURE(forward);
      const comm_cost_net net = random_comm_net(devices, forward, 10 + devices);
      const matrix x = comm_rows(300, devices, forward, 20 + devices);
      const auto reference = comm_packed_rows(packed_comm_cost_net(net, simd_kernel::scalar), x);
      // Both signs among the outputs, so that a clamp or a ReLU on the last
      // layer would show.
      CHECK(std::any_of(reference.begin(), reference.end(), [](float v) { return v < 0.0f; }));
      CHECK(std::any_of(reference.begin(), reference.end(), [](float v) { return v > 0.0f; }));
      for (const auto k : embplan::test::runnable_kernels()) {
        CAPTURE(to_string(k));
        const auto got = comm_packed_rows(packed_comm_cost_net(net, k), x);
        REQUIRE(got.size() == reference.size());
        CHECK(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("packed outputs equal comm_cost_net's up to float rounding") {
  for (const std::size_t devices : {std::size_t{4}, std::size_t{8}}) {
    for (const bool forward : {true, false}) {
      CAPTURE(devices);
      CAPTURE(forward);
      const comm_cost_net net = random_comm_net(devices, forward, 30 + devices);
      const matrix x = comm_rows(100, devices, forward, 40 + devices);
      const matrix eigen = net(x);
      for (const auto k : embplan::test::runnable_kernels()) {
        CAPTURE(to_string(k));
        const auto got = comm_packed_rows(packed_comm_cost_net(net, k), x);
        for (Eigen::Index r = 0; r < x.rows(); ++r) {
          for (Eigen::Index d = 0; d < eigen.cols(); ++d) {
            const double ref = eigen(r, d);
            const double v = got[static_cast<std::size_t>(r * eigen.cols() + d)];
            CHECK(std::abs(v - ref) <= 1e-5 * std::max(1.0, std::abs(ref)));
          }
        }
      }
    }
  }
}

TEST_CASE("other shapes: wide layers (heap scratch), one layer, ReLU after the last") {
  comm_cost_net wide = random_comm_net(4, true, 50, {300, 40});
  comm_cost_net single = random_comm_net(4, false, 51, {});
  comm_cost_net relu_last = random_comm_net(8, false, 52);
  relu_last.hidden.relu_after_last = true;
  for (const comm_cost_net* net : {&wide, &single, &relu_last}) {
    const std::size_t devices = static_cast<std::size_t>(net->hidden.out_features());
    const bool forward = net->hidden.in_features() == 2 * net->hidden.out_features();
    const matrix x = comm_rows(20, devices, forward, 53);
    const matrix eigen = (*net)(x);
    const auto reference = comm_packed_rows(packed_comm_cost_net(*net, simd_kernel::scalar), x);
    for (const auto k : embplan::test::runnable_kernels()) {
      CAPTURE(to_string(k));
      const auto got = comm_packed_rows(packed_comm_cost_net(*net, k), x);
      CHECK(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)) == 0);
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double ref = eigen.data()[i];
        CHECK(std::abs(got[i] - ref) <= 1e-5 * std::max(1.0, std::abs(ref)));
      }
    }
  }
}

TEST_CASE("batch: each row's outputs are operator()'s on that row, bit for bit, on every kernel") {
  // Row counts around the kernels' blocks (AVX-512 6, AVX2 3) and batch()'s
  // passes of 12; shapes with an input count that is no multiple of 4 (the
  // leftover k of the four partial sums) and a wide layer (heap scratch).
  std::vector<comm_cost_net> nets = {random_comm_net(4, true, 80), random_comm_net(8, false, 81),
                                     random_comm_net(3, true, 82, {300, 7}),
                                     random_comm_net(5, false, 83, {})};
  for (std::size_t i = 0; i < nets.size(); ++i) {
    const comm_cost_net& net = nets[i];
    CAPTURE(i);
    const auto devices = static_cast<std::size_t>(net.hidden.out_features());
    const bool forward = net.hidden.in_features() == 2 * net.hidden.out_features();
    for (const auto k : embplan::test::runnable_kernels()) {
      CAPTURE(to_string(k));
      const packed_comm_cost_net packed(net, k);
      for (const Eigen::Index rows : {0, 1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 25}) {
        CAPTURE(rows);
        const matrix x = comm_rows(rows, devices, forward, 84 + static_cast<std::uint64_t>(rows));
        const auto one_by_one = comm_packed_rows(packed, x);
        std::vector<float> got(one_by_one.size(), -1.0f);
        packed.batch(std::span<const float>(x.data(), static_cast<std::size_t>(x.size())), got);
        REQUIRE(got.size() == one_by_one.size());
        // memcmp: bitwise, -0.0 apart from 0.0 (no call on 0 rows' null data).
        if (!got.empty())
          CHECK(std::memcmp(got.data(), one_by_one.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("a snapshot: later changes to the net do not reach it; const calls from threads agree") {
  comm_cost_net net = random_comm_net(4, true, 60);
  const matrix x = comm_rows(16, 4, true, 61);
  const packed_comm_cost_net packed(net);
  const auto before = comm_packed_rows(packed, x);
  net.hidden.layers[0].weight.setZero();
  net.feature_norm.mean.setZero();
  CHECK(comm_packed_rows(packed, x) == before);
  std::vector<float> got0, got1;
  auto work = [&](std::vector<float>& got) {
    for (int rep = 0; rep < 50; ++rep)
      got = comm_packed_rows(packed, x);
  };
  std::thread t0(work, std::ref(got0));
  std::thread t1(work, std::ref(got1));
  t0.join();
  t1.join();
  CHECK(got0 == before);
  CHECK(got1 == before);
}

TEST_CASE("bad input names the field") {
  const comm_cost_net good = random_comm_net(4, false, 70);

  comm_cost_net empty = good;
  empty.hidden.layers.clear();
  CHECK(embplan::test::message_of([&] {
          packed_comm_cost_net{empty};
        }).find("packed_comm_cost_net.net.hidden") != std::string::npos);

  comm_cost_net broken = good;
  broken.hidden.layers[2].weight = matrix::Zero(32, 5);
  CHECK(embplan::test::message_of([&] {
          packed_comm_cost_net{broken};
        }).find("packed_comm_cost_net.net.hidden.layers[2].in_features") != std::string::npos);

  comm_cost_net bad_std = good;
  bad_std.feature_norm.stddev = matrix::Ones(1, 3);
  CHECK(embplan::test::message_of([&] {
          packed_comm_cost_net{bad_std};
        }).find("packed_comm_cost_net.net.feature_norm.stddev") != std::string::npos);

  const packed_comm_cost_net packed(good);
  std::vector<float> x(5), y(4);
  CHECK(embplan::test::message_of([&] { packed(x, y); }).find("packed_comm_cost_net.input.size") !=
        std::string::npos);
  x.resize(4);
  y.resize(3);
  CHECK(embplan::test::message_of([&] { packed(x, y); }).find("packed_comm_cost_net.output.size") !=
        std::string::npos);

  // batch(): x a whole number of rows, y one output row per input row.
  x.resize(6);
  y.resize(4);
  const auto rows_msg = embplan::test::message_of([&] { packed.batch(x, y); });
  CHECK(rows_msg.find("packed_comm_cost_net.input.size' = 6") != std::string::npos);
  CHECK(rows_msg.find("a multiple of the network's feature count 4") != std::string::npos);
  x.resize(8);
  y.resize(4);
  const auto out_msg = embplan::test::message_of([&] { packed.batch(x, y); });
  CHECK(out_msg.find("packed_comm_cost_net.output.size' = 4") != std::string::npos);
  CHECK(out_msg.find("2 rows") != std::string::npos);

  const auto bogus =
      embplan::test::message_of([&] { packed_comm_cost_net(good, static_cast<simd_kernel>(9)); });
  CHECK(bogus.find("packed_comm_cost_net.kernel' = 9") != std::string::npos);
  for (const auto k : {simd_kernel::avx2, simd_kernel::avx512}) {
    CAPTURE(to_string(k));
    if (embplan::nn::simd_kernel_supported(k)) {
      CHECK(packed_comm_cost_net(good, k).kernel() == k);
    } else {
      const auto msg = embplan::test::message_of([&] { packed_comm_cost_net{good, k}; });
      CHECK(msg.find("packed_comm_cost_net.kernel") != std::string::npos);
    }
  }
  CHECK(packed.kernel() != simd_kernel::automatic);
}
