#include "embplan/data/features.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "embplan/data/trace.hpp"
#include "embplan/io/npy.hpp"

#include "support/message_of.hpp"

namespace {

using embplan::reuse_histogram;
using embplan::table_spec;
using embplan::data::extract_table_spec;
using embplan::data::extract_tbe_specs;
using embplan::data::feature_options;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("features: rows, pooling factor and reuse bins of a small table") {
  // Counts: row 5 three times (bin 2), row 3 twice (bin 1), rows 7 and 9 once (bin 0).
  const std::vector<std::int64_t> indices{5, 5, 3, 7, 5, 3, 9};
  const std::vector<std::int64_t> offsets{0, 2, 2, 7};
  const auto t = extract_table_spec(indices, offsets, {.min_rows = 1, .dim = 32, .name = "ads"});
  CHECK(t.rows == 10);
  CHECK(t.pooling_factor == doctest::Approx(7.0 / 3.0));
  CHECK(t.dim == 32);
  CHECK(t.name == "ads");
  reuse_histogram expected{};
  expected[0] = 0.5;
  expected[1] = 0.25;
  expected[2] = 0.25;
  CHECK(t.reuse_hist == expected);
}

TEST_CASE("features: rows are floored at min_rows (the papers use 100)") {
  const std::vector<std::int64_t> indices{1, 2};
  const std::vector<std::int64_t> offsets{0, 1, 2};
  CHECK(extract_table_spec(indices, offsets, {.min_rows = 100, .dim = 0, .name = ""}).rows == 100);
  CHECK(extract_table_spec(indices, offsets).rows == 3);
}

TEST_CASE("features: a table without lookups has an all-zero histogram") {
  const std::vector<std::int64_t> indices;
  const std::vector<std::int64_t> offsets{0, 0, 0, 0};
  const auto t = extract_table_spec(indices, offsets);
  CHECK(t.rows == 1);
  CHECK(t.pooling_factor == 0.0);
  CHECK(t.reuse_hist == reuse_histogram{});
}

TEST_CASE("features: bin edges at 2^k and the open last bin") {
  // Row 0: 32768 times (bin 15); row 1: 32769 times (bin 16); row 2: 4 (bin 2); row 3: 5 (bin 3).
  std::vector<std::int64_t> indices;
  indices.insert(indices.end(), 32768, 0);
  indices.insert(indices.end(), 32769, 1);
  indices.insert(indices.end(), 4, 2);
  indices.insert(indices.end(), 5, 3);
  const std::vector<std::int64_t> offsets{0, static_cast<std::int64_t>(indices.size())};
  const auto t = extract_table_spec(indices, offsets);
  reuse_histogram expected{};
  expected[15] = 0.25;
  expected[16] = 0.25;
  expected[2] = 0.25;
  expected[3] = 0.25;
  CHECK(t.reuse_hist == expected);
}

TEST_CASE("features: huge row ids (sorted counting) give what small ones (dense counting) give") {
  const std::vector<std::int64_t> small{3, 1, 3, 3, 2, 1, 0, 3};
  std::vector<std::int64_t> huge;
  for (const auto v : small)
    huge.push_back(v * 1'000'000'007LL);
  const std::vector<std::int64_t> offsets{0, 3, 8};
  const auto a = extract_table_spec(small, offsets);
  const auto b = extract_table_spec(huge, offsets);
  CHECK(a.reuse_hist == b.reuse_hist);
  CHECK(b.rows == 3'000'000'022LL);
}

TEST_CASE("features: TBE batches split table-major into one spec per table") {
  // T = 2, B = 2: table 0 bags {4}, {4, 1}; table 1 bags {}, {0, 0, 0}.
  const std::vector<std::int64_t> indices{4, 4, 1, 0, 0, 0};
  const std::vector<std::int64_t> offsets{0, 1, 3, 3, 6};
  const std::array<std::int32_t, 2> dims{8, 64};
  const auto specs = extract_tbe_specs(indices, offsets, 2, dims);
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "t0");
  CHECK(specs[0].rows == 5);
  CHECK(specs[0].dim == 8);
  CHECK(specs[0].pooling_factor == doctest::Approx(1.5));
  CHECK(specs[0].reuse_hist[0] == doctest::Approx(0.5));
  CHECK(specs[0].reuse_hist[1] == doctest::Approx(0.5));
  CHECK(specs[1].rows == 1);
  CHECK(specs[1].dim == 64);
  CHECK(specs[1].pooling_factor == doctest::Approx(1.5));
  CHECK(specs[1].reuse_hist[2] == 1.0);
  // No dims: 0 (unknown); a row floor for all tables.
  const auto plain = extract_tbe_specs(indices, offsets, 2, {}, 100);
  CHECK(plain[1].dim == 0);
  CHECK(plain[1].rows == 100);
}

TEST_CASE("features: a trace saved as .npy and read back gives the same spec") {
  table_spec spec;
  spec.rows = 5000;
  spec.dim = 16;
  spec.pooling_factor = 3.0;
  spec.reuse_hist[0] = 0.7;
  spec.reuse_hist[2] = 0.3;
  const auto trace = embplan::data::generate_trace(spec, {.batch_size = 256, .seed = 4});
  const auto dir = std::filesystem::temp_directory_path();
  const auto idx_file = dir / "embplan_features_test_indices.npy";
  const auto off_file = dir / "embplan_features_test_offsets.npy";
  embplan::io::write_npy(idx_file, trace.indices);
  embplan::io::write_npy(off_file, trace.offsets);
  const auto idx = embplan::io::read_npy<std::int64_t>(idx_file);
  const auto off = embplan::io::read_npy<std::int64_t>(off_file);
  const auto from_file = extract_table_spec(std::span<const std::int64_t>(idx.data(), idx.size()),
                                            std::span<const std::int64_t>(off.data(), off.size()));
  CHECK(from_file == extract_table_spec(trace.indices, trace.offsets));
  CHECK(from_file.pooling_factor == doctest::Approx(3.0));
  std::filesystem::remove(idx_file);
  std::filesystem::remove(off_file);
}

TEST_CASE("features: bad traces name the field and the value") {
  const std::vector<std::int64_t> indices{1, 2, 3};
  SUBCASE("offsets decreasing") {
    const std::vector<std::int64_t> offsets{0, 2, 1, 3};
    const auto msg = embplan::test::message_of([&] { (void)extract_table_spec(indices, offsets); });
    CHECK(contains(msg, "'offsets[2]' = 1"));
    CHECK(contains(msg, "non-decreasing"));
  }
  SUBCASE("offsets not starting at 0") {
    const std::vector<std::int64_t> offsets{1, 2, 3};
    CHECK(contains(embplan::test::message_of([&] { (void)extract_table_spec(indices, offsets); }),
                   "'offsets[0]' = 1"));
  }
  SUBCASE("offsets.back() is not the number of indices") {
    const std::vector<std::int64_t> offsets{0, 1, 2};
    const auto msg = embplan::test::message_of([&] { (void)extract_table_spec(indices, offsets); });
    CHECK(contains(msg, "'offsets[2]' = 2"));
    CHECK(contains(msg, "the number of indices, 3"));
  }
  SUBCASE("no bags") {
    const std::vector<std::int64_t> offsets{0};
    CHECK(contains(embplan::test::message_of([&] { (void)extract_table_spec({}, offsets); }),
                   "'offsets.size' = 1"));
  }
  SUBCASE("negative index") {
    const std::vector<std::int64_t> bad{1, -7, 3};
    const std::vector<std::int64_t> offsets{0, 3};
    CHECK(contains(embplan::test::message_of([&] { (void)extract_table_spec(bad, offsets); }),
                   "'indices[1]' = -7"));
    // In a TBE batch the position is the one in the flat array.
    const std::vector<std::int64_t> tbe{1, 2, 3, -4};
    const std::vector<std::int64_t> tbe_offsets{0, 2, 4};
    CHECK(contains(embplan::test::message_of([&] { (void)extract_tbe_specs(tbe, tbe_offsets, 2); }),
                   "'indices[3]' = -4"));
  }
  SUBCASE("min_rows") {
    const std::vector<std::int64_t> offsets{0, 3};
    CHECK(contains(embplan::test::message_of([&] {
                     (void)extract_table_spec(indices, offsets,
                                              {.min_rows = 0, .dim = 0, .name = ""});
                   }),
                   "'min_rows' = 0"));
  }
  SUBCASE("TBE sizes") {
    const std::vector<std::int64_t> offsets{0, 1, 2, 3};  // 3 bags: not T*B for T = 2
    auto msg = embplan::test::message_of([&] { (void)extract_tbe_specs(indices, offsets, 2); });
    CHECK(contains(msg, "'offsets.size' = 4"));
    CHECK(contains(msg, "T*B+1"));
    CHECK(contains(embplan::test::message_of([&] { (void)extract_tbe_specs(indices, offsets, 0); }),
                   "'tables' = 0"));
    const std::vector<std::int64_t> ok{0, 1, 3};
    const std::array<std::int32_t, 3> dims{4, 4, 4};
    CHECK(
        contains(embplan::test::message_of([&] { (void)extract_tbe_specs(indices, ok, 2, dims); }),
                 "'dims.size' = 3"));
  }
}
