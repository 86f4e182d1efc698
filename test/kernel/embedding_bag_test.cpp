#include "embplan/kernel/embedding_bag.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/random.hpp"
#include "support/message_of.hpp"

namespace k = embplan::kernel;

namespace {

using embplan::test::message_of;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A batch that owns its arrays; view() hands the kernel a tbe_batch_view.
struct owned_batch {
  std::int64_t batch_size = 0;
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> offsets;
  std::vector<float> per_sample_weights;

  k::tbe_batch_view view() const {
    return {.batch_size = batch_size,
            .indices = indices,
            .offsets = offsets,
            .per_sample_weights = per_sample_weights};
  }
};

// Random bags of 0..max_len lookups (every table gets some empty bags), rows
// uniform, or all on `hot_rows` rows of table hot_table when given.
owned_batch random_batch(const k::tbe_layout& layout, std::int64_t batch_size, int max_len,
                         bool weighted, std::uint64_t seed, std::int64_t hot_table = -1,
                         std::int64_t hot_rows = 0) {
  embplan::rng gen(seed);
  owned_batch out;
  out.batch_size = batch_size;
  out.offsets.push_back(0);
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const std::int64_t rows = layout.rows[static_cast<std::size_t>(t)];
    for (std::int64_t b = 0; b < batch_size; ++b) {
      const auto len = b % 4 == 1 ? 0 : static_cast<std::int64_t>(gen.below(max_len + 1));
      for (std::int64_t i = 0; i < len; ++i) {
        const std::int64_t n = t == hot_table ? hot_rows : rows;
        out.indices.push_back(static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(n))));
        if (weighted) out.per_sample_weights.push_back(static_cast<float>(gen.uniform(-2.0, 2.0)));
      }
      out.offsets.push_back(static_cast<std::int64_t>(out.indices.size()));
    }
  }
  return out;
}

template <class Weight>
std::vector<Weight> random_weights(const k::tbe_layout& layout, std::uint64_t seed) {
  embplan::rng gen(seed);
  std::vector<Weight> w(static_cast<std::size_t>(layout.total_weights()));
  for (auto& x : w) {
    const auto v = static_cast<float>(gen.uniform(-1.0, 1.0));
    if constexpr (std::is_same_v<Weight, float>) {
      x = v;
    } else {
      x = k::to_half(v);
    }
  }
  return w;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  embplan::rng gen(seed);
  std::vector<float> out(n);
  for (auto& x : out)
    x = static_cast<float>(gen.uniform(-1.0, 1.0));
  return out;
}

std::uint32_t bits_of(float f) {
  return std::bit_cast<std::uint32_t>(f);
}
std::uint32_t bits_of(k::half h) {
  return h.bits;
}

// Naive forward in double; `magnitude` gets the sum of |terms| per element,
// which bounds the fp32 rounding error.
template <class Weight>
std::vector<double> reference_forward(const k::tbe_layout& layout, const std::vector<Weight>& w,
                                      const owned_batch& batch, k::pooling_mode mode,
                                      std::vector<double>& magnitude) {
  const auto total_dim = static_cast<std::size_t>(layout.total_dim());
  std::vector<double> out(static_cast<std::size_t>(batch.batch_size) * total_dim, 0.0);
  magnitude.assign(out.size(), 0.0);
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const auto ut = static_cast<std::size_t>(t);
    const auto dim = static_cast<std::size_t>(layout.dims[ut]);
    for (std::int64_t b = 0; b < batch.batch_size; ++b) {
      const auto bag = static_cast<std::size_t>(t * batch.batch_size + b);
      const std::int64_t begin = batch.offsets[bag];
      const std::int64_t end = batch.offsets[bag + 1];
      const double scale =
          mode == k::pooling_mode::mean && end > begin ? 1.0 / double(end - begin) : 1.0;
      const std::size_t o =
          static_cast<std::size_t>(b) * total_dim + static_cast<std::size_t>(layout.d_offsets[ut]);
      for (std::int64_t i = begin; i < end; ++i) {
        const double psw =
            batch.per_sample_weights.empty() ? 1.0 : batch.per_sample_weights[std::size_t(i)];
        const std::size_t row = static_cast<std::size_t>(layout.weights_offsets[ut]) +
                                static_cast<std::size_t>(batch.indices[std::size_t(i)]) * dim;
        for (std::size_t d = 0; d < dim; ++d) {
          const double term = scale * psw * double(k::to_float(w[row + d]));
          out[o + d] += term;
          magnitude[o + d] += std::abs(term);
        }
      }
    }
  }
  return out;
}

// Naive exact SGD in double: per touched (table, row), g = the sum of all its
// scaled gradient rows, then w - lr * g once.
template <class Weight>
std::vector<double> reference_backward(const k::tbe_layout& layout, const std::vector<Weight>& w,
                                       const owned_batch& batch, k::pooling_mode mode,
                                       const std::vector<float>& grad, float lr,
                                       std::vector<double>& magnitude) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> g;
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> mag;
  const auto total_dim = static_cast<std::size_t>(layout.total_dim());
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const auto ut = static_cast<std::size_t>(t);
    const auto dim = static_cast<std::size_t>(layout.dims[ut]);
    for (std::int64_t b = 0; b < batch.batch_size; ++b) {
      const auto bag = static_cast<std::size_t>(t * batch.batch_size + b);
      const std::int64_t begin = batch.offsets[bag];
      const std::int64_t end = batch.offsets[bag + 1];
      const double scale =
          mode == k::pooling_mode::mean && end > begin ? 1.0 / double(end - begin) : 1.0;
      for (std::int64_t i = begin; i < end; ++i) {
        const double psw =
            batch.per_sample_weights.empty() ? 1.0 : batch.per_sample_weights[std::size_t(i)];
        auto& acc = g[{t, batch.indices[std::size_t(i)]}];
        auto& m = mag[{t, batch.indices[std::size_t(i)]}];
        acc.resize(dim, 0.0);
        m.resize(dim, 0.0);
        for (std::size_t d = 0; d < dim; ++d) {
          const double term = scale * psw *
                              grad[static_cast<std::size_t>(b) * total_dim +
                                   static_cast<std::size_t>(layout.d_offsets[ut]) + d];
          acc[d] += term;
          m[d] += std::abs(term);
        }
      }
    }
  }
  std::vector<double> out(w.size());
  magnitude.assign(w.size(), 0.0);
  for (std::size_t i = 0; i < w.size(); ++i)
    out[i] = k::to_float(w[i]);
  for (const auto& [key, acc] : g) {
    const auto ut = static_cast<std::size_t>(key.first);
    const auto base = static_cast<std::size_t>(layout.weights_offsets[ut]) +
                      static_cast<std::size_t>(key.second) * acc.size();
    for (std::size_t d = 0; d < acc.size(); ++d) {
      out[base + d] -= double(lr) * acc[d];
      magnitude[base + d] = double(lr) * mag.at(key)[d];
    }
  }
  return out;
}

const std::vector<std::int64_t> mixed_rows{50, 7, 100, 30, 20, 40};
const std::vector<std::int32_t> mixed_dims{4, 12, 16, 36, 64, 132};

}  // namespace

TEST_CASE("isa: scalar is always there, best_isa is supported") {
  CHECK(k::isa_supported(k::isa::scalar));
  CHECK(k::isa_supported(k::best_isa()));
  const auto all = k::supported_isas();
  CHECK(all.front() == k::isa::scalar);
  CHECK(all.back() == k::best_isa());
  MESSAGE("best CPU path: " << k::isa_name(k::best_isa()));
}

TEST_CASE("cache_aligned_vector: cache lines for small blocks, huge pages for large ones") {
  const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  k::cache_aligned_vector<float> small(100, 1.0f);
  CHECK(address(small.data()) % 64 == 0);
  // 3 MiB: over the 2 MiB threshold, so aligned (and advised) as huge pages.
  k::cache_aligned_vector<float> large((std::size_t{3} << 20) / sizeof(float), 2.0f);
  CHECK(address(large.data()) % (std::size_t{2} << 20) == 0);
  CHECK(large.front() == 2.0f);
  CHECK(large.back() == 2.0f);
  large.assign(large.size() / 4, 3.0f);  // same block, reused
  CHECK(large.back() == 3.0f);
  large.resize(100);
  large.shrink_to_fit();  // reallocates below the threshold: freed with the right alignment
  CHECK(address(large.data()) % 64 == 0);
}

TEST_CASE_TEMPLATE("forward: equals a double reference on mixed dims, every path", Weight, float,
                   k::half) {
  const auto layout = k::make_tbe_layout(mixed_rows, mixed_dims);
  const auto w = random_weights<Weight>(layout, 1);
  for (const bool weighted : {false, true}) {
    const owned_batch batch = random_batch(layout, 9, 7, weighted, 2);
    for (const auto mode : {k::pooling_mode::sum, k::pooling_mode::mean}) {
      std::vector<double> magnitude;
      const auto ref = reference_forward(layout, w, batch, mode, magnitude);
      std::vector<float> first;
      for (const k::isa which : k::supported_isas()) {
        CAPTURE(k::isa_name(which));
        CAPTURE(weighted);
        CAPTURE(int(mode));
        std::vector<float> out(ref.size(), std::numeric_limits<float>::quiet_NaN());
        k::embedding_bag_forward(layout, std::span<const Weight>(w), batch.view(), mode,
                                 std::span<float>(out), which);
        for (std::size_t i = 0; i < out.size(); ++i) {
          REQUIRE(std::abs(double(out[i]) - ref[i]) <= 1e-6 * magnitude[i] + 1e-7);
        }
        // Every path performs the same operations in the same order.
        if (first.empty()) first = out;
        for (std::size_t i = 0; i < out.size(); ++i)
          REQUIRE(bits_of(out[i]) == bits_of(first[i]));
      }
    }
  }
}

TEST_CASE("forward prefetch distance: about 8 KiB of rows ahead, 16 to 256 lookups") {
  using k::detail::forward_prefetch_distance;
  static_assert(forward_prefetch_distance(16) == 256);   // fp32 dim 4: capped
  static_assert(forward_prefetch_distance(32) == 256);   // fp16 dim 16
  static_assert(forward_prefetch_distance(64) == 128);   // fp32 dim 16
  static_assert(forward_prefetch_distance(256) == 32);   // fp32 dim 64, fp16 dim 128
  static_assert(forward_prefetch_distance(512) == 16);   // fp32 dim 128
  static_assert(forward_prefetch_distance(4096) == 16);  // never below FBGEMM's 16
  CHECK(forward_prefetch_distance(0) == 256);
}

// Tables with more lookups than the prefetch distance, so the vector paths
// prefetch rows far ahead as well as clamp at the table's end (the test above
// has ~30 lookups per table: always clamped). Under ASan, a read past the
// table's indices would fail here.
TEST_CASE_TEMPLATE("forward: long index streams, far prefetch, every path", Weight, float,
                   k::half) {
  const std::vector<std::int64_t> rows{5000, 300};
  const std::vector<std::int32_t> dims{4, 128};
  const auto layout = k::make_tbe_layout(rows, dims);
  const auto w = random_weights<Weight>(layout, 3);
  const owned_batch batch = random_batch(layout, 64, 40, false, 4);
  REQUIRE(batch.offsets[64] > 2 * k::detail::forward_prefetch_distance(4 * sizeof(Weight)));
  std::vector<double> magnitude;
  const auto ref = reference_forward(layout, w, batch, k::pooling_mode::sum, magnitude);
  for (const k::isa which : k::supported_isas()) {
    CAPTURE(k::isa_name(which));
    std::vector<float> out(ref.size(), std::numeric_limits<float>::quiet_NaN());
    k::embedding_bag_forward(layout, std::span<const Weight>(w), batch.view(), k::pooling_mode::sum,
                             std::span<float>(out), which);
    for (std::size_t i = 0; i < out.size(); ++i)
      REQUIRE(std::abs(double(out[i]) - ref[i]) <= 1e-6 * magnitude[i] + 1e-7);
  }
}

TEST_CASE("forward: empty bags give zeros, empty batch gives nothing") {
  const std::vector<std::int64_t> rows{5, 5};
  const std::vector<std::int32_t> dims{20, 3};
  const auto layout = k::make_tbe_layout(rows, dims);
  const auto w = random_weights<float>(layout, 3);
  // bags (0, 0) and (1, 0) are empty; (0, 1) = row 1 of table 0, (1, 1) = row 4 of table 1
  owned_batch batch{
      .batch_size = 2, .indices = {1, 4}, .offsets = {0, 0, 1, 1, 2}, .per_sample_weights = {}};
  for (const k::isa which : k::supported_isas()) {
    for (const auto mode : {k::pooling_mode::sum, k::pooling_mode::mean}) {
      std::vector<float> out(2 * 23, 7.0f);
      k::embedding_bag_forward(layout, std::span<const float>(w), batch.view(), mode,
                               std::span<float>(out), which);
      for (std::size_t d = 0; d < 23; ++d)
        CHECK(out[d] == 0.0f);
      for (std::size_t d = 0; d < 20; ++d)
        CHECK(out[23 + d] == w[20 + d]);
      for (std::size_t d = 0; d < 3; ++d)
        CHECK(out[43 + d] == w[100 + 4 * 3 + d]);
    }
    owned_batch none{.batch_size = 0, .indices = {}, .offsets = {0}, .per_sample_weights = {}};
    std::vector<float> out;
    CHECK_NOTHROW(k::embedding_bag_forward(layout, std::span<const float>(w), none.view(),
                                           k::pooling_mode::sum, std::span<float>(out), which));
  }
}

TEST_CASE("radix_sort: stable, equals std::stable_sort for any number of key bits") {
  embplan::rng gen(5);
  std::vector<std::uint32_t> counts;
  for (const int bits : {1, 3, 11, 12, 23, 33, 40}) {
    CAPTURE(bits);
    std::vector<std::pair<std::uint64_t, std::uint32_t>> data(3000);
    for (std::size_t i = 0; i < data.size(); ++i) {
      // few distinct keys, so stability matters
      const std::uint64_t key = gen.below(40) * (std::uint64_t{1} << bits) / 41;
      data[i] = {key, static_cast<std::uint32_t>(i)};
    }
    auto expected = data;
    std::stable_sort(expected.begin(), expected.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    auto scratch = data;
    const auto sorted = k::detail::radix_sort(
        std::span(data), std::span(scratch), bits, [](const auto& e) { return e.first; }, counts);
    REQUIRE(std::equal(sorted.begin(), sorted.end(), expected.begin(), expected.end()));
  }
}

TEST_CASE("backward: linearise + sort + run-length encode, packed and wide pairs agree") {
  const auto layout = k::make_tbe_layout(mixed_rows, mixed_dims);
  const owned_batch batch = random_batch(layout, 9, 7, false, 6, 2, 3);
  k::detail::backward_buffers packed;
  k::detail::backward_buffers wide;
  k::detail::linearise_and_sort(layout, batch.view(), k::pooling_mode::sum, packed);
  k::detail::linearise_and_sort(layout, batch.view(), k::pooling_mode::sum, wide, true);
  const auto rows_of = [](const k::detail::backward_buffers& b) {
    return std::vector<std::int64_t>(b.segment_rows.begin(),
                                     b.segment_rows.begin() + std::ptrdiff_t(b.segments));
  };
  const auto begins_of = [](const k::detail::backward_buffers& b) {
    return std::vector<std::uint32_t>(b.segment_begin.begin(),
                                      b.segment_begin.begin() + std::ptrdiff_t(b.segments + 1));
  };
  CHECK(packed.sorted_positions == wide.sorted_positions);
  CHECK(rows_of(packed) == rows_of(wide));
  CHECK(begins_of(packed) == begins_of(wide));
  // Segments: strictly increasing linear rows, lookups in increasing position.
  REQUIRE(packed.segment_begin[packed.segments] == batch.indices.size());
  for (std::size_t s = 0; s < packed.segments; ++s) {
    if (s > 0) CHECK(packed.segment_rows[s] > packed.segment_rows[s - 1]);
    for (auto j = packed.segment_begin[s]; j < packed.segment_begin[s + 1]; ++j) {
      const auto pos = packed.sorted_positions[j];
      const auto t = k::index::table_of_linear_row(layout.row_offsets.data(), layout.tables(),
                                                   packed.segment_rows[s]);
      CHECK(k::index::linear_row(layout.row_offsets[std::size_t(t)], batch.indices[pos]) ==
            packed.segment_rows[s]);
      if (j > packed.segment_begin[s]) CHECK(pos > packed.sorted_positions[j - 1]);
    }
  }
  // Row ids beyond 32 bits take the wide pairs.
  const std::vector<std::int64_t> huge_rows{std::int64_t{1} << 33, 4};
  const std::vector<std::int32_t> ones{1, 1};
  const auto huge = k::make_tbe_layout(huge_rows, ones);
  owned_batch far{.batch_size = 1,
                  .indices = {std::int64_t{1} << 32, 5, std::int64_t{1} << 32, 3},
                  .offsets = {0, 3, 4},
                  .per_sample_weights = {}};
  k::detail::backward_buffers buf;
  k::detail::linearise_and_sort(huge, far.view(), k::pooling_mode::sum, buf);
  CHECK(rows_of(buf) ==
        std::vector<std::int64_t>{5, std::int64_t{1} << 32, (std::int64_t{1} << 33) + 3});
  CHECK(buf.sorted_positions == std::vector<std::uint32_t>{1, 0, 2, 3});
  CHECK(begins_of(buf) == std::vector<std::uint32_t>{0, 1, 3, 4});
}

TEST_CASE_TEMPLATE("backward: exact per-row SGD against a double reference, every path", Weight,
                   float, k::half) {
  const auto layout = k::make_tbe_layout(mixed_rows, mixed_dims);
  const auto w0 = random_weights<Weight>(layout, 7);
  const float lr = 0.05f;
  // Table 2 draws all its lookups from 3 rows: hot rows hit dozens of times.
  for (const bool weighted : {false, true}) {
    const owned_batch batch = random_batch(layout, 11, 7, weighted, 8, 2, 3);
    const auto grad =
        random_floats(std::size_t(batch.batch_size * layout.total_dim()), 9 + unsigned(weighted));
    for (const auto mode : {k::pooling_mode::sum, k::pooling_mode::mean}) {
      std::vector<double> magnitude;
      const auto ref = reference_backward(layout, w0, batch, mode, grad, lr, magnitude);
      std::vector<Weight> first;
      for (const k::isa which : k::supported_isas()) {
        CAPTURE(k::isa_name(which));
        CAPTURE(weighted);
        CAPTURE(int(mode));
        auto w = w0;
        k::backward_workspace ws;
        k::embedding_bag_backward_sgd(layout, std::span<Weight>(w), batch.view(), mode,
                                      std::span<const float>(grad), lr, ws, which);
        for (std::size_t i = 0; i < w.size(); ++i) {
          if (magnitude[i] == 0.0) {
            REQUIRE(bits_of(w[i]) == bits_of(w0[i]));  // untouched: bit-for-bit
          } else if constexpr (std::is_same_v<Weight, float>) {
            REQUIRE(std::abs(double(w[i]) - ref[i]) <= 1e-6 * magnitude[i] + 1e-7);
          } else {  // one fp16 rounding of the fp32 result
            REQUIRE(std::abs(double(k::to_float(w[i])) - ref[i]) <=
                    std::abs(ref[i]) / 1024.0 + 1e-6 * magnitude[i] + 1e-7);
          }
        }
        if (first.empty()) first = w;
        for (std::size_t i = 0; i < w.size(); ++i)
          REQUIRE(bits_of(w[i]) == bits_of(first[i]));
      }
    }
  }
}

TEST_CASE("backward: the documented order of operations, bit for bit") {
  // g = fma(factor, grad, g) over a row's lookups in increasing position, then
  // w = fma(-lr, g, w): emulated here per row, in fp32.
  const auto layout = k::make_tbe_layout(mixed_rows, mixed_dims);
  const auto w0 = random_weights<float>(layout, 11);
  const owned_batch batch = random_batch(layout, 11, 7, true, 12, 1, 2);
  const auto grad = random_floats(std::size_t(batch.batch_size * layout.total_dim()), 13);
  const float lr = 0.3f;
  const auto mode = k::pooling_mode::mean;
  auto expected = w0;
  for (std::int64_t t = 0; t < layout.tables(); ++t) {
    const auto ut = std::size_t(t);
    const auto dim = std::size_t(layout.dims[ut]);
    const auto begin = batch.offsets[std::size_t(t * batch.batch_size)];
    const auto end = batch.offsets[std::size_t((t + 1) * batch.batch_size)];
    std::map<std::int64_t, std::vector<float>> g;
    for (std::int64_t i = begin; i < end; ++i) {
      const auto bag = std::size_t(std::upper_bound(batch.offsets.begin(), batch.offsets.end(), i) -
                                   batch.offsets.begin() - 1);
      const auto b = std::size_t(bag) % std::size_t(batch.batch_size);
      const float factor = k::index::bag_scale(mode, batch.offsets[bag + 1] - batch.offsets[bag]) *
                           batch.per_sample_weights[std::size_t(i)];
      auto& acc = g[batch.indices[std::size_t(i)]];
      acc.resize(dim, 0.0f);
      for (std::size_t d = 0; d < dim; ++d) {
        acc[d] = std::fma(
            factor,
            grad[b * std::size_t(layout.total_dim()) + std::size_t(layout.d_offsets[ut]) + d],
            acc[d]);
      }
    }
    for (const auto& [row, acc] : g) {
      for (std::size_t d = 0; d < dim; ++d) {
        float& x = expected[std::size_t(layout.weights_offsets[ut]) + std::size_t(row) * dim + d];
        x = std::fma(-lr, acc[d], x);
      }
    }
  }
  for (const k::isa which : k::supported_isas()) {
    CAPTURE(k::isa_name(which));
    auto w = w0;
    k::backward_workspace ws;
    k::embedding_bag_backward_sgd(layout, std::span<float>(w), batch.view(), mode,
                                  std::span<const float>(grad), lr, ws, which);
    for (std::size_t i = 0; i < w.size(); ++i)
      REQUIRE(bits_of(w[i]) == bits_of(expected[i]));
  }
}

TEST_CASE("backward: learning rate 0 changes nothing; the workspace stops growing") {
  const auto layout = k::make_tbe_layout(mixed_rows, mixed_dims);
  const auto w0 = random_weights<k::half>(layout, 14);
  const owned_batch batch = random_batch(layout, 8, 6, true, 15);
  const auto grad = random_floats(std::size_t(batch.batch_size * layout.total_dim()), 16);
  for (const k::isa which : k::supported_isas()) {
    auto w = w0;
    k::backward_workspace ws;
    k::embedding_bag_backward_sgd(layout, std::span<k::half>(w), batch.view(), k::pooling_mode::sum,
                                  std::span<const float>(grad), 0.0f, ws, which);
    CHECK(w == w0);
    const std::size_t held = ws.bytes();
    CHECK(held > 0);
    k::embedding_bag_backward_sgd(layout, std::span<k::half>(w), batch.view(), k::pooling_mode::sum,
                                  std::span<const float>(grad), 0.5f, ws, which);
    CHECK(ws.bytes() == held);
    CHECK(w != w0);
  }
}

TEST_CASE("bad input: the message names the field and the value") {
  const std::vector<std::int64_t> rows{5, 3};
  const std::vector<std::int32_t> dims{4, 8};
  const auto layout = k::make_tbe_layout(rows, dims);
  auto w = random_weights<float>(layout, 17);
  owned_batch batch{.batch_size = 2,
                    .indices = {0, 4, 1, 2, 2},
                    .offsets = {0, 2, 3, 3, 5},
                    .per_sample_weights = {}};
  std::vector<float> out(2 * 12);
  std::vector<float> grad(2 * 12, 1.0f);
  k::backward_workspace ws;
  const auto forward = [&] {
    k::embedding_bag_forward(layout, std::span<const float>(w), batch.view(), k::pooling_mode::sum,
                             std::span<float>(out));
  };
  const auto backward = [&] {
    k::embedding_bag_backward_sgd(layout, std::span<float>(w), batch.view(), k::pooling_mode::sum,
                                  std::span<const float>(grad), 0.1f, ws);
  };
  CHECK_NOTHROW(forward());
  CHECK_NOTHROW(backward());

  SUBCASE("index out of range: table, position, value, rows") {
    batch.indices[4] = 3;
    for (const auto& msg : {message_of(forward), message_of(backward)}) {
      CHECK(contains(msg, "tbe.indices[4] (table 1)"));
      CHECK(contains(msg, "= 3"));
      CHECK(contains(msg, "[0, 3)"));
    }
    batch.indices[4] = -2;
    CHECK(contains(message_of(forward), "= -2"));
  }
  SUBCASE("offsets decreasing") {
    batch.offsets[2] = 1;
    const auto msg = message_of(forward);
    CHECK(contains(msg, "tbe.offsets[2]' = 1"));
    CHECK(contains(msg, "non-decreasing"));
  }
  SUBCASE("offsets not ending at indices.size()") {
    batch.offsets[4] = 4;
    const auto msg = message_of(backward);
    CHECK(contains(msg, "tbe.offsets[4]' = 4"));
    CHECK(contains(msg, "number of indices (5)"));
  }
  SUBCASE("per-sample weights of the wrong length") {
    batch.per_sample_weights = {1.0f, 2.0f, 3.0f};
    const auto msg = message_of(forward);
    CHECK(contains(msg, "tbe.per_sample_weights.size' = 3"));
    CHECK(contains(msg, "(5)"));
  }
  SUBCASE("weights of the wrong size") {
    w.pop_back();
    for (const auto& msg : {message_of(forward), message_of(backward)}) {
      CHECK(contains(msg, "embedding_bag.weights.size' = 43"));
      CHECK(contains(msg, "= 44"));
    }
  }
  SUBCASE("output and grad_output of the wrong size") {
    out.resize(23);
    auto msg = message_of(forward);
    CHECK(contains(msg, "embedding_bag.output.size' = 23"));
    CHECK(contains(msg, "batch_size x total_dim = 24"));
    grad.resize(25);
    msg = message_of(backward);
    CHECK(contains(msg, "embedding_bag.grad_output.size' = 25"));
    CHECK(contains(msg, "= 24"));
  }
  SUBCASE("learning rate not finite") {
    const auto msg = message_of([&] {
      k::embedding_bag_backward_sgd(layout, std::span<float>(w), batch.view(), k::pooling_mode::sum,
                                    std::span<const float>(grad),
                                    std::numeric_limits<float>::infinity(), ws);
    });
    CHECK(contains(msg, "embedding_bag.learning_rate' = inf"));
  }
  SUBCASE("an instruction set the CPU lacks") {
    for (const k::isa which : {k::isa::avx2, k::isa::avx512}) {
      if (k::isa_supported(which)) continue;
      const auto msg = message_of([&] {
        k::embedding_bag_forward(layout, std::span<const float>(w), batch.view(),
                                 k::pooling_mode::sum, std::span<float>(out), which);
      });
      CHECK(contains(msg, "embedding_bag.isa' = \"" + std::string(k::isa_name(which)) + "\""));
    }
  }
}
