#include "embplan/io/safetensors.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "embplan/io/detail/half_float.hpp"

#include "support/message_of.hpp"

namespace {

using embplan::io::parse_safetensors;
using embplan::io::safetensors_file;
using embplan::io::serialize_safetensors;
using embplan::io::tensor;
using embplan::io::detail::bfloat16_bits_to_float;
using embplan::io::detail::float_to_bfloat16_bits;
using embplan::io::detail::float_to_half_bits;
using embplan::io::detail::half_bits_to_float;

const std::filesystem::path golden_dir =
    std::filesystem::path(EMBPLAN_SOURCE_DIR) / "test" / "nn" / "golden";

// A file from its parts: the 8-byte length (the header's own unless
// `header_length` says otherwise), the header text, then `data`.
std::vector<std::byte> file_bytes(const std::string& header, const std::vector<std::uint8_t>& data,
                                  std::uint64_t header_length = ~std::uint64_t{0}) {
  if (header_length == ~std::uint64_t{0}) header_length = header.size();
  std::vector<std::byte> out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<std::byte>((header_length >> (8 * i)) & 0xffu));
  for (const char c : header)
    out.push_back(static_cast<std::byte>(c));
  for (const auto b : data)
    out.push_back(static_cast<std::byte>(b));
  return out;
}

std::vector<std::uint8_t> zeros(std::size_t n) {
  return std::vector<std::uint8_t>(n, 0);
}

std::vector<std::byte> read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i)
    out[i] = static_cast<std::byte>(chars[i]);
  return out;
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

float rounded_half(float x) {
  return half_bits_to_float(float_to_half_bits(x));
}

safetensors_file sample_file() {
  safetensors_file f;
  f.tensors["t_hidden.0.weight"] = {
      .dtype = "F32", .shape = {2, 3}, .values = {1, -2, 3.5f, 0, -0.0f, 1e-30f}};
  f.tensors["t_hidden.0.bias"] = {.dtype = "F32", .shape = {2}, .values = {0.25f, -7}};
  f.tensors["scalar"] = {.dtype = "F32", .shape = {}, .values = {42}};
  f.tensors["empty"] = {.dtype = "F32", .shape = {0, 3}, .values = {}};
  f.metadata["format"] = "pt";
  f.metadata["note"] = "quotes \" and\nnewlines";
  return f;
}

}  // namespace

// ------------------------------------------------------------ round trips

TEST_CASE("safetensors: F32 round trip keeps names, shapes, bits and metadata") {
  const auto f = sample_file();
  const auto bytes = serialize_safetensors(f);
  const auto back = parse_safetensors(bytes, "mem");
  CHECK(back.source == "mem");
  CHECK(back.metadata == f.metadata);
  REQUIRE(back.tensors.size() == f.tensors.size());
  for (const auto& [name, t] : f.tensors) {
    const auto& b = back.tensors.at(name);
    CHECK(b.dtype == "F32");
    CHECK(b.shape == t.shape);
    REQUIRE(b.values.size() == t.values.size());
    for (std::size_t i = 0; i < t.values.size(); ++i)
      CHECK(same_bits(b.values[i], t.values[i]));
  }
  // Deterministic, and the same bytes again after a round trip.
  CHECK(serialize_safetensors(back) == bytes);
}

TEST_CASE(
    "safetensors: the layout is little-endian, padded to 8, tensors widest first then by name") {
  safetensors_file f;
  f.tensors["b"] = {.dtype = "F32", .shape = {1}, .values = {1.0f}};
  f.tensors["a"] = {.dtype = "F16", .shape = {1}, .values = {1.0f}};
  f.tensors["c"] = {.dtype = "I64", .shape = {1}, .values = {-2.0f}};
  const auto bytes = serialize_safetensors(f);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(std::to_integer<unsigned>(bytes[i])) << (8 * i);
  CHECK(n % 8 == 0);
  const std::string header(reinterpret_cast<const char*>(bytes.data() + 8), n);
  CHECK(
      header.rfind(
          R"({"c":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"a":{"dtype":"F16","shape":[1],"data_offsets":[12,14]}})",
          0) == 0);
  REQUIRE(bytes.size() == 8 + n + 14);
  const auto* data = bytes.data() + 8 + n;
  const std::vector<unsigned> expected{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // -2 (I64)
                                       0x00, 0x00, 0x80, 0x3f,                          // 1.0f
                                       0x00, 0x3c};                                     // 1.0 half
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(std::to_integer<unsigned>(data[i]) == expected[i]);
}

TEST_CASE("safetensors: F16 round trip rounds to the nearest half") {
  safetensors_file f;
  f.tensors["w"] = {
      .dtype = "F32", .shape = {6}, .values = {1.0f, 0.1f, -65504.0f, 1e-7f, 70000.0f, 3.14159f}};
  const auto back = parse_safetensors(serialize_safetensors(f, "F16"));
  const auto& w = back.tensors.at("w");
  CHECK(w.dtype == "F16");
  REQUIRE(w.values.size() == 6);
  CHECK(w.values[0] == 1.0f);
  CHECK(w.values[1] == doctest::Approx(0.1).epsilon(1e-3));
  CHECK(w.values[1] != 0.1f);
  CHECK(w.values[2] == -65504.0f);
  CHECK(w.values[3] == doctest::Approx(1e-7).epsilon(0.1));  // a subnormal half
  CHECK(std::isinf(w.values[4]));
  CHECK(w.values[5] == 3.140625f);
  // Writing the F16 values again changes nothing.
  CHECK(serialize_safetensors(back) == serialize_safetensors(f, "F16"));
}

TEST_CASE("safetensors: BF16, F64, I64 and I32 are read into float32") {
  safetensors_file f;
  f.tensors["bf"] = {.dtype = "BF16", .shape = {3}, .values = {1.0f, -3.0f, 1.00390625f}};
  f.tensors["f64"] = {.dtype = "F64", .shape = {2}, .values = {0.1f, -1e30f}};
  f.tensors["i64"] = {.dtype = "I64", .shape = {3}, .values = {0.0f, -5.0f, 16777216.0f}};
  f.tensors["i32"] = {.dtype = "I32", .shape = {2, 1}, .values = {7.0f, -2147483648.0f / 128}};
  const auto back = parse_safetensors(serialize_safetensors(f));
  CHECK(back.tensors.at("bf").values == std::vector<float>{1.0f, -3.0f, 1.0f});  // tie to even
  CHECK(back.tensors.at("f64").values == f.tensors.at("f64").values);
  CHECK(back.tensors.at("i64").values == f.tensors.at("i64").values);
  CHECK(back.tensors.at("i32").values == f.tensors.at("i32").values);
  CHECK(back.tensors.at("i32").dtype == "I32");
}

TEST_CASE("safetensors: files on disk") {
  const auto dir = std::filesystem::path(EMBPLAN_BINARY_DIR) / "safetensors_test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "sample.safetensors";
  embplan::io::write_safetensors(file, sample_file());
  const auto back = embplan::io::read_safetensors(file);
  CHECK(back.source == file.string());
  CHECK(back.tensors.at("t_hidden.0.bias").values == std::vector<float>{0.25f, -7});
  CHECK(read_bytes(file) == serialize_safetensors(sample_file()));

  const auto missing = (dir / "nope.safetensors").string();
  const auto msg = embplan::test::message_of([&] { embplan::io::read_safetensors(missing); });
  CHECK(msg.find(missing) != std::string::npos);
  CHECK(msg.find("an existing safetensors file") != std::string::npos);
  CHECK(embplan::test::message_of([&] {
          embplan::io::read_safetensors(dir);
        }).find("a directory is not a regular file") != std::string::npos);
}

TEST_CASE("safetensors: special files are refused, naming the path") {
  // /dev/zero was read until memory ran out.
  for (const std::string special : {"/dev/zero", "/dev/null"}) {
    if (!std::filesystem::exists(special)) continue;
    const auto msg = embplan::test::message_of([&] { embplan::io::read_safetensors(special); });
    CHECK(msg.find("field 'file' = \"" + special + "\"") != std::string::npos);
    CHECK(msg.find("a safetensors file; a device, pipe or socket is not a regular file") !=
          std::string::npos);
  }
}

TEST_CASE("safetensors: a deeply nested header is refused at the depth limit") {
  // 100000 levels overflowed the recursive JSON parser with a SIGSEGV.
  const std::size_t depth = 100'000;
  const std::string header = std::string(depth, '[') + std::string(depth, ']');
  std::vector<std::byte> bytes(8);
  for (std::size_t i = 0; i < 8; ++i)
    bytes[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
  for (const char c : header)
    bytes.push_back(static_cast<std::byte>(c));
  const auto msg = embplan::test::message_of([&] { parse_safetensors(bytes, "deep.safetensors"); });
  CHECK(msg.find("deep.safetensors: header: JSON nested deeper than 128 levels at byte 137") !=
        std::string::npos);
}

// ------------------------------------------------------------ half / bfloat16

TEST_CASE("half conversion: edge values round to nearest, ties to even") {
  const float t = std::ldexp(1.0f, -24);  // smallest half subnormal
  CHECK(rounded_half(65504.0f) == 65504.0f);
  CHECK(rounded_half(65519.99f) == 65504.0f);
  CHECK(std::isinf(rounded_half(65520.0f)));  // the tie goes to the even neighbour: inf
  CHECK(rounded_half(-1e9f) == -std::numeric_limits<float>::infinity());
  CHECK(rounded_half(t) == t);
  CHECK(rounded_half(0.5f * t) == 0.0f);  // tie between 0 and t -> 0
  CHECK(rounded_half(std::nextafter(0.5f * t, 1.0f)) == t);
  CHECK(rounded_half(1.5f * t) == 2 * t);  // tie -> even (2)
  CHECK(rounded_half(2.5f * t) == 2 * t);  // tie -> even (2)
  CHECK(rounded_half(3.5f * t) == 4 * t);
  CHECK(rounded_half(1023 * t) == 1023 * t);     // largest subnormal
  CHECK(rounded_half(1023.5f * t) == 1024 * t);  // rounds up into the smallest normal
  CHECK(rounded_half(1.0f + std::ldexp(1.0f, -11)) == 1.0f);
  CHECK(rounded_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 1.0f + std::ldexp(1.0f, -9));
  CHECK(rounded_half(2049.0f) == 2048.0f);
  CHECK(rounded_half(2051.0f) == 2052.0f);
  CHECK(std::signbit(rounded_half(-0.0f)));
  CHECK(std::signbit(rounded_half(-1e-30f)));
  CHECK(std::isnan(rounded_half(std::numeric_limits<float>::quiet_NaN())));
  CHECK(float_to_half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(half_bits_to_float(0x0001) == t);
  CHECK(half_bits_to_float(0x03ff) == 1023 * t);
  CHECK(half_bits_to_float(0x7bff) == 65504.0f);
  // A signalling-NaN payload that lives only in the low float bits stays a NaN.
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(std::bit_cast<float>(0x7f800001u)))));
}

TEST_CASE("half conversion: every one of the 65536 halves survives float and back") {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = half_bits_to_float(bits);
    const bool is_nan = (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    if (is_nan) {
      CHECK(std::isnan(f));
      CHECK(std::isnan(half_bits_to_float(float_to_half_bits(f))));
      continue;
    }
    CHECK(float_to_half_bits(f) == bits);
    if ((bits & 0x7c00u) == 0) {  // subnormal or zero: mantissa x 2^-24
      const float expected = std::ldexp(static_cast<float>(bits & 0x3ffu), -24);
      CHECK(f == ((bits & 0x8000u) != 0 ? -expected : expected));
    }
  }
}

TEST_CASE("bfloat16 conversion rounds to nearest even and keeps NaN") {
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(bfloat16_bits_to_float(0x3f80) == 1.0f);
  CHECK(bfloat16_bits_to_float(float_to_bfloat16_bits(1.00390625f)) == 1.0f);       // tie -> even
  CHECK(bfloat16_bits_to_float(float_to_bfloat16_bits(1.01171875f)) == 1.015625f);  // tie -> even
  CHECK(std::isinf(bfloat16_bits_to_float(float_to_bfloat16_bits(3.4e38f))));
  CHECK(std::isnan(
      bfloat16_bits_to_float(float_to_bfloat16_bits(std::bit_cast<float>(0x7f800001u)))));
}

// ------------------------------------------------------------ PyTorch's files

TEST_CASE("golden: PyTorch's F16 and BF16 roundings match ours") {
  const auto f = embplan::io::read_safetensors(golden_dir / "half_golden.safetensors");
  const auto& values = embplan::io::require_tensor(f, "values", {-1}).values;
  const auto& f16 = embplan::io::require_tensor(f, "values_f16", {-1});
  const auto& bf16 = embplan::io::require_tensor(f, "values_bf16", {-1});
  CHECK(f16.dtype == "F16");
  CHECK(bf16.dtype == "BF16");
  REQUIRE(values.size() > 200);
  REQUIRE(f16.values.size() == values.size());
  REQUIRE(bf16.values.size() == values.size());
  int nans = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    CAPTURE(i);
    CAPTURE(values[i]);
    if (std::isnan(values[i])) {
      ++nans;
      CHECK(std::isnan(f16.values[i]));
      CHECK(std::isnan(bf16.values[i]));
      continue;
    }
    CHECK(same_bits(f16.values[i], rounded_half(values[i])));
    CHECK(same_bits(bf16.values[i], bfloat16_bits_to_float(float_to_bfloat16_bits(values[i]))));
  }
  CHECK(nans == 1);
}

TEST_CASE("golden: every file PyTorch wrote reads, and writes back to the same bytes") {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(golden_dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    ++files;
    CAPTURE(entry.path().string());
    const auto bytes = read_bytes(entry.path());
    const auto f = parse_safetensors(bytes, entry.path().string());
    CHECK(f.metadata.at("format") == "embplan golden v1");
    CHECK_FALSE(f.tensors.empty());
    CHECK(serialize_safetensors(f) == bytes);
  }
  CHECK(files == 9);  // tools/make_golden.py writes eight, make_dreamshard_cost.py one
}

TEST_CASE("golden: the NeuroShard checkpoint has ComputeCostNet's names and shapes") {
  const auto f = embplan::io::read_safetensors(golden_dir / "neuroshard_compute_init.safetensors");
  embplan::io::check_names(
      f, {"t_hidden.0.weight", "t_hidden.0.bias", "t_hidden.1.weight", "t_hidden.1.bias",
          "c_hidden.0.weight", "c_hidden.0.bias", "c_hidden.1.weight", "c_hidden.1.bias",
          "feature_means", "feature_stds"});
  embplan::io::check_finite(f);
  CHECK(embplan::io::require_tensor(f, "t_hidden.0.weight", {128, 21}).values.size() == 128 * 21);
  embplan::io::require_tensor(f, "t_hidden.1.weight", {32, 128});
  embplan::io::require_tensor(f, "c_hidden.0.weight", {64, 32});
  embplan::io::require_tensor(f, "c_hidden.1.bias", {1});
  CHECK(f.metadata.at("table_mlp_sizes") == "[128, 32]");
  // PyTorch's default nn.Linear init: U(-1/sqrt(in), 1/sqrt(in)).
  const float bound = 1.0f / std::sqrt(21.0f);
  for (const float w : f.tensors.at("t_hidden.0.weight").values) {
    CHECK(w >= -bound);
    CHECK(w <= bound);
  }
  const auto mlp = embplan::io::read_safetensors(golden_dir / "mlp_golden.safetensors");
  CHECK(mlp.tensors.at("mlp_head_f16.0.weight").dtype == "F16");
  CHECK(mlp.tensors.at("reduce_sum.lengths").dtype == "I64");
  CHECK(mlp.tensors.at("reduce_sum.lengths").values == std::vector<float>{3, 1, 7, 2, 6, 4});
}

// ------------------------------------------------------------ bad input

TEST_CASE("safetensors: a file shorter than the header length field") {
  const std::vector<std::byte> five(5);
  const auto msg = embplan::test::message_of([&] { parse_safetensors(five, "tiny.safetensors"); });
  CHECK(msg.find("tiny.safetensors: size_bytes") != std::string::npos);
  CHECK(msg.find("= 5") != std::string::npos);
  CHECK(msg.find("at least 8 bytes") != std::string::npos);
}

TEST_CASE("safetensors: a header length larger than the file") {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const auto lying = file_bytes(header, zeros(4), 1000);
  const auto msg =
      embplan::test::message_of([&] { parse_safetensors(lying, "lying.safetensors"); });
  CHECK(msg.find("lying.safetensors: header_length") != std::string::npos);
  CHECK(msg.find("= 1000") != std::string::npos);
  CHECK(msg.find("at most " + std::to_string(header.size() + 4)) != std::string::npos);

  const auto huge = file_bytes(header, zeros(4), std::uint64_t{1} << 63);
  CHECK(embplan::test::message_of([&] {
          parse_safetensors(huge, "huge");
        }).find("= 9223372036854775808") != std::string::npos);

  // A length that stops short of the JSON's end leaves the header unparsable.
  const auto short_length = file_bytes(header, zeros(4), 20);
  const auto msg2 = embplan::test::message_of([&] { parse_safetensors(short_length, "short"); });
  CHECK(msg2.find("short: header: invalid JSON") != std::string::npos);
}

TEST_CASE("safetensors: a JSON or text file is not a safetensors file") {
  // Its first 8 bytes would read as a header length of some 7e18 bytes.
  const std::string json = "{\n  \"name\": \"ranking-v3\", \"tables\": []}\n";
  const auto as_bytes = [](const std::string& text) {
    std::vector<std::byte> out;
    for (const char c : text)
      out.push_back(static_cast<std::byte>(c));
    return out;
  };
  const auto msg =
      embplan::test::message_of([&] { parse_safetensors(as_bytes(json), "task.json"); });
  CHECK(msg.find("field 'task.json: header_length' = \"{\\n  \"nam\"") != std::string::npos);
  CHECK(msg.find("task.json is not a safetensors file: it starts with '{' (a JSON file?)") !=
        std::string::npos);
  CHECK(msg.find("truncated") == std::string::npos);

  const auto text = embplan::test::message_of(
      [&] { parse_safetensors(as_bytes("  hello, world\n"), "notes.txt"); });
  CHECK(text.find("notes.txt is not a safetensors file: it starts with 'h' (a text file?)") !=
        std::string::npos);

  // From a file, the message names its path.
  const auto dir = std::filesystem::path(EMBPLAN_BINARY_DIR) / "safetensors_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / "model.json";
  {
    std::ofstream out(path, std::ios::binary);
    out << json;
  }
  const auto from_file =
      embplan::test::message_of([&] { (void)embplan::io::read_safetensors(path); });
  CHECK(from_file.find(path.string() + " is not a safetensors file") != std::string::npos);

  // A real header length that runs past the end still reads as a truncated file.
  auto cut = serialize_safetensors(sample_file());
  cut.erase(cut.begin() + 20, cut.end());
  const auto truncated =
      embplan::test::message_of([&] { parse_safetensors(cut, "cut.safetensors"); });
  CHECK(truncated.find("truncated file?") != std::string::npos);
  CHECK(truncated.find("not a safetensors file") == std::string::npos);
}

TEST_CASE("safetensors: a truncated file") {
  auto bytes = serialize_safetensors(sample_file());
  bytes.erase(bytes.end() - 3, bytes.end());
  const auto msg = embplan::test::message_of([&] { parse_safetensors(bytes, "cut.safetensors"); });
  CHECK(msg.find("cut.safetensors: tensors[\"t_hidden.0.weight\"].data_offsets") !=
        std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);

  bytes.erase(bytes.begin() + 20, bytes.end());  // inside the header
  CHECK(embplan::test::message_of([&] {
          parse_safetensors(bytes, "cut2");
        }).find("cut2: header_length") != std::string::npos);
}

TEST_CASE("safetensors: the header must be a JSON object of tensor entries") {
  CHECK(embplan::test::message_of([] {
          parse_safetensors(file_bytes("[1, 2]", {}), "arr");
        }).find("field 'arr: header' = [1,2]: expected a JSON object") != std::string::npos);
  CHECK(embplan::test::message_of([] {
          parse_safetensors(file_bytes("{\"a\": ", {}), "bad");
        }).find("bad: header: invalid JSON at byte") != std::string::npos);
  CHECK(embplan::test::message_of([] {
          parse_safetensors(file_bytes(R"({"a": 5})", {}), "num");
        }).find("field 'num: tensors[\"a\"]' = 5: expected an object") != std::string::npos);
  const auto missing = embplan::test::message_of([] {
    parse_safetensors(file_bytes(R"({"a":{"dtype":"F32","data_offsets":[0,0]}})", {}), "m");
  });
  CHECK(missing.find("field 'm: tensors[\"a\"].shape' is missing") != std::string::npos);
}

TEST_CASE("safetensors: a dtype embplan does not read") {
  const auto msg = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", zeros(4)),
        "f8.safetensors");
  });
  CHECK(msg.find("f8.safetensors: tensors[\"w\"].dtype") != std::string::npos);
  CHECK(msg.find("\"F8_E4M3\"") != std::string::npos);
  CHECK(msg.find("one of \"F32\", \"F16\"") != std::string::npos);
  CHECK(embplan::test::message_of([] {
          parse_safetensors(
              file_bytes(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", zeros(4)), "x");
        }).find("tensors[\"w\"].dtype' = 4: expected a string") != std::string::npos);
}

TEST_CASE("safetensors: bad shapes") {
  const auto negative = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,0]}})", {}), "neg");
  });
  CHECK(negative.find("field 'neg: tensors[\"w\"].shape' = [2,-3]: expected non-negative") !=
        std::string::npos);
  const auto overflow = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(
            R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}})", {}),
        "big");
  });
  CHECK(overflow.find("big: tensors[\"w\"].shape' = [4294967296,4294967296,2]") !=
        std::string::npos);
  CHECK(overflow.find("fits in 64 bits") != std::string::npos);
  // The element count fits, the byte count does not.
  const auto bytes_overflow = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})",
                   {}),
        "big");
  });
  CHECK(bytes_overflow.find("byte size fits in 64 bits") != std::string::npos);
  CHECK(embplan::test::message_of([] {
          parse_safetensors(
              file_bytes(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", zeros(4)),
              "frac");
        }).find("tensors[\"w\"].shape[0]' = 1.5: expected an integer") != std::string::npos);
}

TEST_CASE("safetensors: offsets out of the buffer, inverted or the wrong size") {
  const auto out_of_range = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", zeros(4)), "oob");
  });
  CHECK(out_of_range.find("field 'oob: tensors[\"w\"].data_offsets' = [0,8]") != std::string::npos);
  CHECK(out_of_range.find("within the data buffer of 4 bytes") != std::string::npos);

  const auto inverted = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", zeros(4)), "inv");
  });
  CHECK(inverted.find("data_offsets' = [4,0]: expected begin <= end") != std::string::npos);

  const auto size = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", zeros(8)), "size");
  });
  CHECK(size.find("field 'size: tensors[\"w\"].data_offsets' = [0,8]: expected 12 bytes") !=
        std::string::npos);

  const auto not_pair = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", zeros(4)), "pair");
  });
  CHECK(not_pair.find("data_offsets' = [0]: expected [begin, end]") != std::string::npos);
  CHECK(embplan::test::message_of([] {
          parse_safetensors(
              file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", zeros(4)),
              "negoff");
        }).find("data_offsets[0]' = -4: expected a non-negative integer") != std::string::npos);
}

TEST_CASE("safetensors: overlapping, gapped and trailing data") {
  const auto overlap = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            zeros(12)),
        "overlap");
  });
  CHECK(overlap.find("field 'overlap: tensors[\"b\"].data_offsets' = [4,12]") != std::string::npos);
  CHECK(overlap.find("begin at byte 8, where tensor \"a\" ends") != std::string::npos);

  const auto gap = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            zeros(12)),
        "gap");
  });
  CHECK(gap.find("gap: tensors[\"b\"].data_offsets' = [8,12]: expected to begin at byte 4") !=
        std::string::npos);

  const auto trailing = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", zeros(6)), "trail");
  });
  CHECK(trailing.find("field 'trail: data_size_bytes' = 6: expected 4 bytes") != std::string::npos);
}

TEST_CASE("safetensors: duplicate names") {
  const auto twice = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(
            R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            zeros(8)),
        "dup");
  });
  CHECK(twice.find("field 'dup: tensors[\"w\"]' appears twice") != std::string::npos);
  const auto inner = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})",
                   zeros(4)),
        "dup");
  });
  CHECK(inner.find("field 'dup: tensors[\"w\"].dtype' appears twice") != std::string::npos);
}

TEST_CASE("safetensors: a NUL after the header's JSON is refused, naming the byte") {
  // The header may be padded with spaces; a NUL is not whitespace, though
  // nlohmann's lexer took it for the end of its input and read the object alone.
  const std::string header =
      std::string(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})") + '\0' + "   ";
  const auto msg =
      embplan::test::message_of([&] { parse_safetensors(file_bytes(header, zeros(4)), "nul"); });
  CHECK(msg.find("nul: header: a NUL byte at byte 63") != std::string::npos);
  // Spaces alone still pad.
  const std::string padded =
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})" + std::string(7, ' ');
  CHECK(parse_safetensors(file_bytes(padded, zeros(4)), "pad").tensors.at("w").values.size() == 1);
}

TEST_CASE("safetensors: a tensor entry with an unknown key is refused; metadata is free-form") {
  const auto msg = embplan::test::message_of([] {
    parse_safetensors(
        file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"dtpye":"F16"}})",
                   zeros(4)),
        "k.safetensors");
  });
  CHECK(msg.find("field 'k.safetensors: tensors[\"w\"].dtpye' = \"F16\": expected a known key "
                 "(did you mean \"dtype\"?), one of \"dtype\", \"shape\", \"data_offsets\"") !=
        std::string::npos);
  CHECK(embplan::test::message_of([] {
          parse_safetensors(
              file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"offsets":1}})",
                         zeros(4)),
              "o");
        })
            .find("field 'o: tensors[\"w\"].offsets' = 1: expected a known key (did you mean "
                  "\"data_offsets\"?)") != std::string::npos);

  // "__metadata__" keeps any string keys.
  const auto ok =
      parse_safetensors(file_bytes(R"({"__metadata__":{"format":"pt","anything":"goes"},)"
                                   R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                   zeros(4)));
  CHECK(ok.metadata.at("anything") == "goes");
  CHECK(ok.tensors.at("w").values.size() == 1);
}

TEST_CASE("safetensors: metadata values must be strings") {
  const auto msg = embplan::test::message_of(
      [] { parse_safetensors(file_bytes(R"({"__metadata__":{"epochs":3}})", {}), "meta"); });
  CHECK(msg.find("field 'meta: __metadata__[\"epochs\"]' = 3: expected a string") !=
        std::string::npos);
  const auto ok = parse_safetensors(file_bytes(R"({"__metadata__":{"k":"v"}})", {}));
  CHECK(ok.tensors.empty());
  CHECK(ok.metadata.at("k") == "v");
}

TEST_CASE("safetensors: values that float32 would change are refused") {
  safetensors_file f;
  f.tensors["ids"] = {.dtype = "I64", .shape = {2}, .values = {1.0f, 0.0f}};
  auto bytes = serialize_safetensors(f);
  bytes[bytes.size() - 1] = std::byte{0x01};  // second I64 = 2^56
  const auto big = embplan::test::message_of([&] { parse_safetensors(bytes, "ints"); });
  CHECK(big.find("field 'ints: tensors[\"ids\"].values[1]' = 72057594037927936") !=
        std::string::npos);
  CHECK(big.find("at most 2^24") != std::string::npos);

  safetensors_file d;
  d.tensors["x"] = {.dtype = "F64", .shape = {1}, .values = {1.0f}};
  auto dbytes = serialize_safetensors(d);
  const double huge = 1e300;
  const auto bits = std::bit_cast<std::uint64_t>(huge);
  for (int i = 0; i < 8; ++i)
    dbytes[dbytes.size() - 8 + i] = static_cast<std::byte>((bits >> (8 * i)) & 0xffu);
  const auto range = embplan::test::message_of([&] { parse_safetensors(dbytes, "f64"); });
  CHECK(range.find("field 'f64: tensors[\"x\"].values[0]' = 1.0000000000000001e+300") !=
        std::string::npos);
  CHECK(range.find("float32 range") != std::string::npos);
}

TEST_CASE("safetensors: writing refuses what it cannot store") {
  safetensors_file f;
  f.tensors["w"] = {.dtype = "F32", .shape = {2, 2}, .values = {1, 2, 3}};
  CHECK(embplan::test::message_of([&] {
          serialize_safetensors(f);
        }).find("field '<output>: tensors[\"w\"].values.size' = 3: expected 4 values") !=
        std::string::npos);
  f.tensors["w"] = {.dtype = "Q4", .shape = {1}, .values = {1}};
  CHECK(embplan::test::message_of([&] {
          serialize_safetensors(f);
        }).find("tensors[\"w\"].dtype' = \"Q4\": expected a dtype") != std::string::npos);
  f.tensors["w"] = {.dtype = "I32", .shape = {2}, .values = {1, 1.5f}};
  CHECK(embplan::test::message_of([&] {
          serialize_safetensors(f);
        }).find("tensors[\"w\"].values[1]' = 1.5: expected an integer in the I32 range") !=
        std::string::npos);
  f.tensors["w"] = {.dtype = "F32", .shape = {-1}, .values = {}};
  CHECK(embplan::test::message_of([&] {
          serialize_safetensors(f);
        }).find("tensors[\"w\"].shape' = [-1]: expected non-negative") != std::string::npos);
  f.tensors.clear();
  f.tensors["__metadata__"] = {.dtype = "F32", .shape = {}, .values = {1}};
  CHECK(embplan::test::message_of([&] { serialize_safetensors(f); }).find("reserved") !=
        std::string::npos);

  const auto dir = std::filesystem::path(EMBPLAN_BINARY_DIR) / "safetensors_test" / "no" / "such";
  const auto target = (dir / "x.safetensors").string();
  const auto msg =
      embplan::test::message_of([&] { embplan::io::write_safetensors(target, sample_file()); });
  CHECK(msg.find(target) != std::string::npos);
  CHECK(msg.find("writable") != std::string::npos);
}

// ------------------------------------------------------------ model helpers

TEST_CASE("require_tensor names the tensor, the shape found and the shape expected") {
  auto f = sample_file();
  f.source = "model.safetensors";
  CHECK(embplan::io::require_tensor(f, "t_hidden.0.weight", {2, 3}).values.size() == 6);
  CHECK(embplan::io::require_tensor(f, "t_hidden.0.weight", {-1, 3}).shape ==
        std::vector<std::int64_t>{2, 3});
  CHECK(embplan::io::require_tensor(f, "scalar", {}).values == std::vector<float>{42});
  const auto wrong = embplan::test::message_of([&] {
    embplan::io::require_tensor(f, "t_hidden.0.weight", {3, 2});
  });
  CHECK(wrong ==
        "field 'model.safetensors: tensors[\"t_hidden.0.weight\"].shape' = [2,3]: expected shape "
        "[3,2]");
  const auto rank = embplan::test::message_of([&] {
    embplan::io::require_tensor(f, "t_hidden.0.bias", {2, 1});
  });
  CHECK(rank.find("= [2]: expected shape [2,1]") != std::string::npos);
  const auto missing = embplan::test::message_of([&] {
    embplan::io::require_tensor(f, "c_hidden.0.weight", {64, 32});
  });
  CHECK(missing ==
        "field 'model.safetensors: tensors[\"c_hidden.0.weight\"]' is missing: expected a tensor "
        "of shape [64,32]");
}

TEST_CASE("check_names lists every missing and every unexpected tensor in one message") {
  auto f = sample_file();
  f.source = "model.safetensors";
  embplan::io::check_names(f, {"t_hidden.0.weight", "t_hidden.0.bias", "scalar", "empty"});
  const auto msg = embplan::test::message_of([&] {
    embplan::io::check_names(f, {"t_hidden.0.weight", "t_hidden.1.weight", "c_hidden.0.bias"});
  });
  CHECK(msg.find("model.safetensors: tensor names do not match the model:") != std::string::npos);
  CHECK(msg.find(R"(missing ["c_hidden.0.bias","t_hidden.1.weight"])") != std::string::npos);
  CHECK(msg.find(R"(unexpected ["empty","scalar","t_hidden.0.bias"])") != std::string::npos);
  const std::vector<std::string> names{"t_hidden.0.weight", "t_hidden.0.bias", "scalar"};
  CHECK(embplan::test::message_of([&] { embplan::io::check_names(f, names); }) ==
        "model.safetensors: tensor names do not match the model: unexpected [\"empty\"] (expected "
        "exactly 3 tensors)");
}

TEST_CASE("check_finite refuses NaN and Inf, naming the tensor and the first bad index") {
  auto f = sample_file();
  f.source = "model.safetensors";
  embplan::io::check_finite(f);
  f.tensors["t_hidden.0.weight"].values[3] = std::numeric_limits<float>::quiet_NaN();
  f.tensors["t_hidden.0.weight"].values[5] = std::numeric_limits<float>::infinity();
  const auto msg = embplan::test::message_of([&] { embplan::io::check_finite(f); });
  CHECK(msg.find("field 'model.safetensors: tensors[\"t_hidden.0.weight\"].values[3]' = ") !=
        std::string::npos);
  CHECK(msg.find("nan") != std::string::npos);
  CHECK(msg.find("expected a finite number") != std::string::npos);
  f.tensors["t_hidden.0.weight"].values[3] = 0;
  CHECK(embplan::test::message_of([&] {
          embplan::io::check_finite(f, "t_hidden.0.weight");
        }).find("values[5]' = inf") != std::string::npos);
  CHECK_NOTHROW(embplan::io::check_finite(f, "t_hidden.0.bias"));
  CHECK(embplan::test::message_of([&] {
          embplan::io::check_finite(f, "nope");
        }).find("tensors[\"nope\"]' is missing") != std::string::npos);
  // NaN survives a round trip, so a file can carry it to check_finite.
  const auto back = parse_safetensors(serialize_safetensors(f), "back");
  CHECK(std::isinf(back.tensors.at("t_hidden.0.weight").values[5]));
  CHECK_THROWS_AS(embplan::io::check_finite(back), embplan::error);
}
