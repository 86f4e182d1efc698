// The packed network gives the same floats, bit for bit, on every kernel
// (scalar, AVX2, AVX-512): the kernels follow one
// arithmetic contract (nn/detail/packed_layers.hpp). Each wide kernel is
// compared with the scalar one where this CPU runs it; a skipped kernel is
// reported on stdout.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/detail/packed_kernels_x86.hpp"
#include "embplan/nn/detail/packed_layers.hpp"
#include "embplan/nn/packed_compute_cost_net.hpp"

using embplan::nn::compute_cost_net;
using embplan::nn::compute_cost_net_options;
using embplan::nn::matrix;
using embplan::nn::packed_compute_cost_net;
using embplan::nn::simd_kernel;
namespace nd = embplan::nn::detail;

namespace {

// The wide kernels this CPU runs; the others are named on stdout.
std::vector<simd_kernel> wide_kernels() {
  std::vector<simd_kernel> out;
  for (const auto k : {simd_kernel::avx2, simd_kernel::avx512}) {
    if (embplan::nn::simd_kernel_supported(k)) {
      out.push_back(k);
    } else {
      std::cout << "packed_isa_test: kernel " << embplan::nn::to_string(k)
                << " skipped (this CPU or build does not run it)\n";
    }
  }
  return out;
}

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

// Values over several magnitudes, both signs, a few exact zeros.
std::vector<float> random_floats(std::size_t n, embplan::rng& gen) {
  std::vector<float> v(n);
  for (auto& x : v) {
    const double mag = std::pow(10.0, gen.uniform(-3.0, 2.0));
    x = gen.uniform(0.0, 1.0) < 0.05 ? 0.0f : static_cast<float>(gen.uniform(-1.0, 1.0) * mag);
  }
  return v;
}

matrix isa_random_features(Eigen::Index rows, Eigen::Index cols, embplan::rng& gen) {
  matrix x(rows, cols);
  for (auto& v : x.reshaped())
    v = static_cast<float>(gen.uniform(-4.0, 4.0));
  if (cols > 0) x.col(0).array() += 1000.0f;  // a large offset, as row counts have
  return x;
}

// A net with random weights and a normaliser with one std 0 (divide by 1).
compute_cost_net isa_random_net(const compute_cost_net_options& o, std::uint64_t seed) {
  compute_cost_net net(o, seed);
  embplan::rng gen(seed + 100);
  for (auto& v : net.feature_norm.mean.reshaped())
    v = static_cast<float>(gen.uniform(-2.0, 2.0));
  for (auto& v : net.feature_norm.stddev.reshaped())
    v = static_cast<float>(gen.uniform(0.3, 3.0));
  net.feature_norm.mean(0, 0) = 1000.0f;
  if (o.table_features > 1) net.feature_norm.stddev(0, 1) = 0.0f;
  return net;
}

// Calls f with each wide kernel's ops type this build has (avx2_ops,
// avx512_ops), where this CPU runs it.
template <class F>
void for_each_wide_ops(F&& f) {
#ifdef EMBPLAN_NN_X86_KERNELS
  if (nd::cpu_has_avx2()) f(nd::avx2_ops{}, "avx2");
  if (nd::cpu_has_avx512()) f(nd::avx512_ops{}, "avx512");
#else
  (void)f;
  std::cout << "packed_isa_test: no x86 kernels in this build; scalar only\n";
#endif
}

struct net_shape {
  Eigen::Index features;
  std::vector<Eigen::Index> table;
  std::vector<Eigen::Index> head;
  bool relu_after_last;
};

}  // namespace

// NeuroShard's shape (20 features, table MLP 128-32, head 32-64-1), and
// shapes with tails everywhere: feature counts and widths that are not
// multiples of 4, 8, 16 or 32; heads of one layer (the cost is z[0]), two
// (ReLU + dot) and three or four (vecmat, with leftover k).
TEST_CASE("packed net: every kernel gives the scalar kernel's floats, bit for bit") {
  const auto wide = wide_kernels();
  const std::vector<net_shape> shapes{
      {20, {128, 32}, {32, 64}, false},
      {21, {128, 32}, {32, 64}, false},
      {1, {33}, {33}, false},
      {7, {50, 17}, {17, 70, 5}, false},
      {33, {64, 64, 40}, {40, 9, 23, 3}, true},
      {16, {31}, {31, 48}, true},
  };
  embplan::rng gen(19);
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    CAPTURE(s);
    const net_shape& shape = shapes[s];
    compute_cost_net net = isa_random_net({.table_features = shape.features,
                                           .table_mlp_sizes = shape.table,
                                           .pred_mlp_sizes = shape.head},
                                          s + 1);
    net.c_hidden.relu_after_last = shape.relu_after_last;
    const packed_compute_cost_net scalar(net, simd_kernel::scalar);
    const std::size_t size = scalar.term_size();
    for (const auto k : wide) {
      CAPTURE(embplan::nn::to_string(k));
      const packed_compute_cost_net packed(net, k);
      REQUIRE(packed.term_size() == size);
      // Row counts across the register blocks (12 / 6 rows) and chunks (16 rows).
      for (const Eigen::Index rows : {0, 1, 2, 3, 5, 6, 7, 11, 12, 13, 16, 17, 24, 25, 40, 100}) {
        CAPTURE(rows);
        const matrix x = isa_random_features(rows, shape.features, gen);
        CHECK(bits(packed(x)) == bits(scalar(x)));
        // A block of a wider matrix (outer stride past the row).
        if (rows > 0) {
          const matrix wider = isa_random_features(rows, shape.features + 5, gen);
          const auto block = wider.leftCols(shape.features);
          CHECK(bits(packed(block)) == bits(scalar(block)));
        }
      }
      // term() of single rows, and finish() of random sums, negative
      // entries (ReLU), -0 and NaN included (ReLU maps both to +0).
      std::vector<float> a(size), b(size);
      for (int trial = 0; trial < 50; ++trial) {
        CAPTURE(trial);
        const matrix row = isa_random_features(1, shape.features, gen);
        packed.term(row.data(), a.data());
        scalar.term(row.data(), b.data());
        for (std::size_t i = 0; i < size; ++i)
          CHECK(bits(a[i]) == bits(b[i]));
        std::vector<float> z = random_floats(size, gen);
        if (trial % 5 == 1) z[0] = -0.0f;
        if (trial % 5 == 2) z[size - 1] = std::numeric_limits<float>::quiet_NaN();
        CHECK(bits(packed.finish(z.data())) == bits(scalar.finish(z.data())));
        packed.start(a.data());
        packed.add(a.data(), z.data());
        scalar.start(b.data());
        scalar.add(b.data(), z.data());
        for (std::size_t i = 0; i < size; ++i)
          CHECK(bits(a[i]) == bits(b[i]));
        // add_finish: out = a + z and finish(out) in one call, into another
        // buffer and in place, is add() then finish() on every kernel.
        std::vector<float> sum = a;
        packed.add(sum.data(), z.data());
        const float want = scalar.finish(sum.data());
        std::vector<float> out(size, 7.0f);
        CHECK(bits(packed.add_finish(out.data(), a.data(), z.data())) == bits(want));
        CHECK(bits(scalar.add_finish(out.data(), a.data(), z.data())) == bits(want));
        for (std::size_t i = 0; i < size; ++i)
          CHECK(bits(out[i]) == bits(sum[i]));
        std::vector<float> in_place = a;
        CHECK(bits(packed.add_finish(in_place.data(), in_place.data(), z.data())) == bits(want));
        for (std::size_t i = 0; i < size; ++i)
          CHECK(bits(in_place[i]) == bits(sum[i]));
      }
    }
  }
}

// The kernels' operations one by one, on sizes with tails.
TEST_CASE(
    "packed kernels: dot, relu_dot, add_relu_dot, vecmat, layer, layer_sum, normalize are bitwise "
    "scalar's") {
  embplan::rng gen(23);
  for_each_wide_ops([&](auto ops, const char* name) {
    using ops_t = decltype(ops);
    CAPTURE(std::string(name));
    for (std::size_t k_pad = 16; k_pad <= 272; k_pad += 16) {
      CAPTURE(k_pad);
      for (int trial = 0; trial < 20; ++trial) {
        const auto in = random_floats(k_pad, gen);
        const auto w = random_floats(k_pad, gen);
        CHECK(bits(ops_t::dot(in.data(), w.data(), k_pad)) ==
              bits(nd::scalar_ops::dot(in.data(), w.data(), k_pad)));
        CHECK(bits(ops_t::relu_dot(in.data(), w.data(), k_pad)) ==
              bits(nd::scalar_ops::relu_dot(in.data(), w.data(), k_pad)));
        // add_relu_dot: the sum stored, and relu_dot of it.
        auto x = random_floats(k_pad, gen);
        if (trial % 4 == 1) x[0] = -in[0];  // a zero sum (ReLU's edge)
        std::vector<float> sum(k_pad), got(k_pad);
        for (std::size_t k = 0; k < k_pad; ++k)
          sum[k] = in[k] + x[k];
        CHECK(bits(ops_t::add_relu_dot(got.data(), in.data(), x.data(), w.data(), k_pad)) ==
              bits(nd::scalar_ops::relu_dot(sum.data(), w.data(), k_pad)));
        for (std::size_t k = 0; k < k_pad; ++k)
          CHECK(bits(got[k]) == bits(sum[k]));
      }
    }
    for (const std::size_t n_pad : {std::size_t{32}, std::size_t{64}, std::size_t{96}}) {
      for (std::size_t k = 1; k <= 41; ++k) {
        CAPTURE(n_pad);
        CAPTURE(k);
        const auto w = random_floats(k * n_pad, gen);
        const auto b = random_floats(n_pad, gen);
        for (const bool relu : {false, true}) {
          const nd::layer_view l{w.data(), b.data(), k, n_pad, relu};
          // vecmat: one row, four partial sums over k.
          const auto in = random_floats(k, gen);
          std::vector<float> o1(n_pad), o2(n_pad);
          ops_t::vecmat(in.data(), l, o1.data());
          nd::scalar_ops::vecmat(in.data(), l, o2.data());
          for (std::size_t n = 0; n < n_pad; ++n)
            CHECK(bits(o1[n]) == bits(o2[n]));
          // layer and layer_sum on 1..29 rows with a row stride past k.
          const std::size_t rows = 1 + (k * 7 + n_pad) % 29;
          const std::size_t stride = k + 3;
          const auto x = random_floats(rows * stride, gen);
          std::vector<float> y1(rows * n_pad), y2(rows * n_pad);
          ops_t::layer(x.data(), stride, rows, l, y1.data(), n_pad);
          nd::scalar_ops::layer(x.data(), stride, rows, l, y2.data(), n_pad);
          for (std::size_t i = 0; i < y1.size(); ++i)
            CHECK(bits(y1[i]) == bits(y2[i]));
          auto s1 = random_floats(n_pad, gen);
          auto s2 = s1;
          std::vector<float> tmp(n_pad);
          ops_t::layer_sum(x.data(), stride, rows, l, s1.data(), tmp.data());
          nd::scalar_ops::layer_sum(x.data(), stride, rows, l, s2.data(), tmp.data());
          for (std::size_t n = 0; n < n_pad; ++n)
            CHECK(bits(s1[n]) == bits(s2[n]));
        }
      }
    }
    for (std::size_t f = 1; f <= 40; ++f) {
      CAPTURE(f);
      const std::size_t f_pad = nd::round_up(f, 16);
      auto mean = random_floats(f_pad, gen);
      auto inv_std = random_floats(f_pad, gen);
      for (std::size_t i = f; i < f_pad; ++i)
        mean[i] = inv_std[i] = 0.0f;  // the packed layout's zero padding
      const nd::norm_view nv{mean.data(), inv_std.data(), f};
      const std::size_t rows = 3;
      const std::size_t out_stride = nd::round_up(f, nd::packed_width);
      const auto x = random_floats(rows * (f + 1), gen);
      std::vector<float> o1(rows * out_stride), o2(rows * out_stride);
      ops_t::normalize(x.data(), f + 1, rows, nv, o1.data(), out_stride);
      nd::scalar_ops::normalize(x.data(), f + 1, rows, nv, o2.data(), out_stride);
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t i = 0; i < f; ++i)
          CHECK(bits(o1[r * out_stride + i]) == bits(o2[r * out_stride + i]));
      }
    }
  });
}

// The contract's rounding is the fused multiply-add's in every kernel, the
// scalar one included (std::fma, not the compiler's choice): a * a + c with
// a = 1 + 2^-12, c = -(1 + 2^-11) is 2^-24 when fused and 0 when the product
// is rounded to a float first.
TEST_CASE("packed kernels fuse multiply-adds (one rounding), the scalar one included") {
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const float c = -(1.0f + std::ldexp(1.0f, -11));
  const std::vector<float> bias(nd::packed_width, c);
  const std::vector<float> weight(nd::packed_width, a);
  const nd::layer_view l{weight.data(), bias.data(), 1, nd::packed_width, false};
  std::vector<float> out(nd::packed_width);
  nd::scalar_ops::layer(&a, 1, 1, l, out.data(), nd::packed_width);
  CHECK(out[0] == std::ldexp(1.0f, -24));
  for_each_wide_ops([&](auto ops, const char* name) {
    CAPTURE(std::string(name));
    std::vector<float> wide(nd::packed_width);
    decltype(ops)::layer(&a, 1, 1, l, wide.data(), nd::packed_width);
    CHECK(wide[0] == std::ldexp(1.0f, -24));
  });
}

// The scalar kernel's multiply-add without an FMA unit: std::fma's value on
// random triples over the whole float range (products near the subnormal
// range, cancellation, ties), and on special values.
TEST_CASE("fma_round_to_odd is std::fma, bit for bit") {
  embplan::rng gen(29);
  const auto random_float = [&] {
    switch (gen.between(0, 3)) {
      case 0:  // any bit pattern that is a finite float
        while (true) {
          const auto x = std::bit_cast<float>(static_cast<std::uint32_t>(gen()));
          if (std::isfinite(x)) return x;
        }
      case 1:  // near 1, where ties and cancellation are common
        return static_cast<float>(gen.uniform(-2.0, 2.0));
      case 2:  // a few significant bits: exact products, exact ties
        return std::ldexp(static_cast<float>(gen.between(-64, 64)),
                          static_cast<int>(gen.between(-140, 100)));
      default:
        return static_cast<float>(gen.uniform(-1.0, 1.0) *
                                  std::pow(2.0, static_cast<double>(gen.between(-149, 127))));
    }
  };
  std::size_t mismatches = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    const float a = random_float();
    const float b = random_float();
    // c near -a*b half the time: the sum cancels and its rounding is the FMA's.
    const float c = gen.between(0, 1) == 0 ? random_float() : static_cast<float>(-(double{a} * b));
    const float want = std::fma(a, b, c);
    const float got = nd::fma_round_to_odd(a, b, c);
    if (bits(got) != bits(want) && !(std::isnan(got) && std::isnan(want))) {
      if (++mismatches <= 5) {
        CAPTURE(a);
        CAPTURE(b);
        CAPTURE(c);
        CHECK(bits(got) == bits(want));
      }
    }
  }
  CHECK(mismatches == 0);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float max = std::numeric_limits<float>::max();
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (const float a : {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, nan, max, tiny, -tiny}) {
    for (const float b : {0.0f, -0.0f, 1.0f, -3.0f, inf, nan, max, 0.5f, tiny}) {
      for (const float c : {0.0f, -0.0f, 1.0f, -inf, inf, nan, -max, tiny, -tiny}) {
        const float want = std::fma(a, b, c);
        const float got = nd::fma_round_to_odd(a, b, c);
        CAPTURE(a);
        CAPTURE(b);
        CAPTURE(c);
        CHECK((bits(got) == bits(want) || (std::isnan(got) && std::isnan(want))));
      }
    }
  }
}
