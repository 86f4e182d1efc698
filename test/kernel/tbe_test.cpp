#include "embplan/kernel/tbe.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "embplan/core/random.hpp"
#include "support/message_of.hpp"

namespace k = embplan::kernel;

namespace {
using embplan::test::message_of;
}  // namespace

#if defined(__FLT16_MAX__)
TEST_CASE("half: to_float is exact for every bit pattern (checked against _Float16)") {
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const k::half h{static_cast<std::uint16_t>(b)};
    const float got = k::to_float(h);
    const auto ref = static_cast<float>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(b)));
    if (std::isnan(ref)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(ref));
    }
  }
}

TEST_CASE("half: to_half rounds to nearest even like the compiler's _Float16") {
  embplan::rng gen(7);
  std::vector<float> cases{0.0f,
                           -0.0f,
                           1.0f,
                           65504.0f,
                           65519.0f,
                           65520.0f,
                           1e-8f,
                           2.98e-8f,
                           2.9802322e-08f,
                           5.96e-8f,
                           6.1035156e-05f,
                           6.1e-05f,
                           std::numeric_limits<float>::infinity(),
                           1e30f};
  for (int i = 0; i < 200000; ++i) {
    // random bit patterns over the half range, with exponents from 2^-27 to 2^17
    const auto e = static_cast<std::uint32_t>(100 + gen.below(44));
    const auto m = static_cast<std::uint32_t>(gen.below(1u << 23));
    const std::uint32_t s = gen.below(2) != 0 ? 0x80000000u : 0u;
    cases.push_back(std::bit_cast<float>(s | (e << 23) | m));
  }
  for (const float f : cases) {
    const auto ref = std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
    INFO("f = " << f);
    REQUIRE(k::to_half(f).bits == ref);
  }
  CHECK(std::isnan(k::to_float(k::to_half(std::numeric_limits<float>::quiet_NaN()))));
}
#else
TEST_CASE("half: known values (no _Float16 in this compiler)") {
  CHECK(k::to_half(1.0f).bits == 0x3c00);
  CHECK(k::to_half(65504.0f).bits == 0x7bff);
  CHECK(k::to_half(65520.0f).bits == 0x7c00);
  CHECK(k::to_float(k::half{0x0001}) == std::ldexp(1.0f, -24));
}
#endif

TEST_CASE("index arithmetic: bags, outputs, weights, linear rows") {
  CHECK(k::index::bag(2, 5, 7) == 19);
  CHECK(k::index::bag_table(19, 7) == 2);
  CHECK(k::index::bag_sample(19, 7) == 5);
  CHECK(k::index::output_offset(3, 40, 8) == 128);
  CHECK(k::index::weight_offset(100, 4, 16) == 164);
  const std::int64_t row_offsets[] = {0, 10, 10, 25, 26};  // table 1 is empty
  CHECK(k::index::table_of_linear_row(row_offsets, 4, 0) == 0);
  CHECK(k::index::table_of_linear_row(row_offsets, 4, 9) == 0);
  CHECK(k::index::table_of_linear_row(row_offsets, 4, 10) == 2);
  CHECK(k::index::table_of_linear_row(row_offsets, 4, 24) == 2);
  CHECK(k::index::table_of_linear_row(row_offsets, 4, 25) == 3);
  CHECK(k::index::linear_row(row_offsets[2], 14) == 24);
  CHECK(k::index::radix_end_bit(1) == 1);
  CHECK(k::index::radix_end_bit(2) == 1);
  CHECK(k::index::radix_end_bit(3) == 2);
  CHECK(k::index::radix_end_bit(1024) == 10);
  CHECK(k::index::radix_end_bit(1025) == 11);
  CHECK(k::index::lanes_per_bag(4) == 8);
  CHECK(k::index::lanes_per_bag(64) == 16);
  CHECK(k::index::lanes_per_bag(128) == 32);
  CHECK(k::index::lanes_per_bag(1024) == 32);
  CHECK(k::index::segment_chunks(0, 32) == 0);
  CHECK(k::index::segment_chunks(33, 32) == 2);
  CHECK(k::index::bag_scale(k::pooling_mode::mean, 4) == 0.25f);
  CHECK(k::index::bag_scale(k::pooling_mode::mean, 0) == 1.0f);
  CHECK(k::index::bag_scale(k::pooling_mode::sum, 4) == 1.0f);
}

TEST_CASE("make_tbe_layout: offsets and bad input") {
  const std::vector<std::int64_t> rows{10, 3, 7};
  const std::vector<std::int32_t> dims{4, 8, 16};
  const auto l = k::make_tbe_layout(rows, dims);
  CHECK(l.weights_offsets == std::vector<std::int64_t>{0, 40, 64, 176});
  CHECK(l.d_offsets == std::vector<std::int64_t>{0, 4, 12, 28});
  CHECK(l.row_offsets == std::vector<std::int64_t>{0, 10, 13, 20});
  CHECK(l.total_dim() == 28);
  const std::vector<std::int64_t> bad_rows{10, 0};
  const std::vector<std::int32_t> two_dims{4, 4};
  CHECK(message_of([&] {
          (void)k::make_tbe_layout(bad_rows, two_dims);
        }).find("tbe.tables[1].rows") != std::string::npos);
  CHECK(message_of([&] { (void)k::make_tbe_layout(rows, two_dims); }).find("tbe.dims.size") !=
        std::string::npos);
  const std::vector<std::int64_t> huge{std::int64_t{1} << 62};
  const std::vector<std::int32_t> big_dim{64};
  CHECK(message_of([&] { (void)k::make_tbe_layout(huge, big_dim); }).find("tbe.tables[0]") !=
        std::string::npos);
}

TEST_CASE("validate: offsets, indices and per-sample weights") {
  const std::vector<std::int64_t> rows{5, 3};
  const std::vector<std::int32_t> dims{4, 4};
  const auto l = k::make_tbe_layout(rows, dims);
  // B = 2: bags (0,0) (0,1) (1,0) (1,1)
  std::vector<std::int64_t> indices{0, 4, 1, 2, 2};
  std::vector<std::int64_t> offsets{0, 2, 3, 3, 5};
  k::tbe_batch_view batch{.batch_size = 2, .indices = indices, .offsets = offsets};
  CHECK_NOTHROW(k::validate(l, batch));

  indices[4] = 3;  // table 1 has 3 rows
  auto msg = message_of([&] { k::validate(l, batch); });
  CHECK(msg.find("tbe.indices[4] (table 1)") != std::string::npos);
  CHECK(msg.find("3") != std::string::npos);
  CHECK(msg.find("[0, 3)") != std::string::npos);
  indices[4] = -1;
  CHECK(message_of([&] { k::validate(l, batch); }).find("-1") != std::string::npos);
  indices[4] = 2;

  offsets[2] = 1;  // decreasing
  msg = message_of([&] { k::validate(l, batch); });
  CHECK(msg.find("tbe.offsets[2]") != std::string::npos);
  CHECK(msg.find("non-decreasing") != std::string::npos);
  offsets[2] = 3;
  offsets[4] = 4;  // does not end at the indices' length
  msg = message_of([&] { k::validate(l, batch); });
  CHECK(msg.find("tbe.offsets[4]") != std::string::npos);
  CHECK(msg.find("number of indices (5)") != std::string::npos);
  offsets[4] = 5;

  const std::vector<std::int64_t> short_offsets{0, 2, 5};
  CHECK(message_of([&] {
          k::validate(l, {.batch_size = 2, .indices = indices, .offsets = short_offsets});
        }).find("tbe.offsets.size") != std::string::npos);
  const std::vector<float> psw{1.0f, 2.0f};
  msg = message_of([&] {
    k::validate(
        l, {.batch_size = 2, .indices = indices, .offsets = offsets, .per_sample_weights = psw});
  });
  CHECK(msg.find("tbe.per_sample_weights.size") != std::string::npos);
  CHECK(msg.find("2") != std::string::npos);
}
