#include "embplan/io/npy.hpp"

#include "support/message_of.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace {

using embplan::io::parse_npy;
using embplan::io::read_npy;
using embplan::io::serialize_npy;
using embplan::io::write_npy;

std::vector<std::byte> as_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  for (std::size_t i = 0; i < s.size(); ++i)
    out[i] = static_cast<std::byte>(s[i]);
  return out;
}

// A file from its parts: magic, version, header length (little-endian, 2
// bytes for v1 and 4 for v2/v3; the header's own unless `length` is given),
// the header text, then `data`.
std::vector<std::byte> npy_file(const std::string& header, const std::string& data,
                                unsigned major = 1, std::uint64_t length = ~std::uint64_t{0}) {
  if (length == ~std::uint64_t{0}) length = header.size();
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i)
    out += static_cast<char>((length >> (8 * i)) & 0xffu);
  return as_bytes(out + header + data);
}

// Little-endian bytes of int64 values.
std::string i8_data(const std::vector<std::int64_t>& values) {
  std::string out;
  for (const auto v : values)
    for (int i = 0; i < 8; ++i)
      out += static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xffu);
  return out;
}

std::string i4_data(const std::vector<std::int32_t>& values) {
  std::string out;
  for (const auto v : values)
    for (int i = 0; i < 4; ++i)
      out += static_cast<char>((static_cast<std::uint32_t>(v) >> (8 * i)) & 0xffu);
  return out;
}

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("embplan_npy_test_" + name);
}

void write_bytes(const std::filesystem::path& file, const std::vector<std::byte>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

const std::string i8_header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }\n";

}  // namespace

TEST_CASE("npy: reads the bytes numpy 1.24 writes (np.save of np.arange(3))") {
  // Verbatim from numpy 1.24.2: 118 header bytes, padded for in-place growth.
  const std::string header =
      "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }" + std::string(60, ' ') + "\n";
  REQUIRE(header.size() == 118);
  const auto a = parse_npy<std::int64_t>(npy_file(header, i8_data({0, 1, 2})), "arange.npy");
  REQUIRE(a.size() == 3);
  CHECK(a(0) == 0);
  CHECK(a(1) == 1);
  CHECK(a(2) == 2);
}

TEST_CASE("npy: the writer's header is numpy's: v1.0, sorted keys, 64-byte aligned") {
  xt::xtensor<std::int64_t, 1> a = {7, -1, 42};
  const auto bytes = serialize_npy(a);
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  CHECK(text.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len =
      static_cast<unsigned char>(text[8]) + 256u * static_cast<unsigned char>(text[9]);
  CHECK((10 + header_len) % 64 == 0);
  CHECK(text[10 + header_len - 1] == '\n');
  const std::string dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";
  CHECK(text.substr(10, dict.size()) == dict);
  CHECK(text.find_first_not_of(' ', 10 + dict.size()) == 10 + header_len - 1);
  CHECK(bytes.size() == 10 + header_len + 3 * 8);
  CHECK(text.substr(10 + header_len) == i8_data({7, -1, 42}));
}

TEST_CASE("npy: round trip of every element type, 1-D and 2-D, through a file") {
  SUBCASE("int64") {
    xt::xtensor<std::int64_t, 1> a = {0, std::numeric_limits<std::int64_t>::max(),
                                      std::numeric_limits<std::int64_t>::min(), -5};
    const auto f = temp_file("i8.npy");
    write_npy(f, a);
    CHECK(read_npy<std::int64_t>(f) == a);
    std::filesystem::remove(f);
  }
  SUBCASE("int32") {
    xt::xtensor<std::int32_t, 1> a = {1, -2, std::numeric_limits<std::int32_t>::min()};
    CHECK(parse_npy<std::int32_t>(serialize_npy(a)) == a);
  }
  SUBCASE("uint16 and uint8") {
    xt::xtensor<std::uint16_t, 1> a = {0, 65535, 300};
    CHECK(parse_npy<std::uint16_t>(serialize_npy(a)) == a);
    xt::xtensor<std::uint8_t, 1> b = {0, 255, 7};
    CHECK(parse_npy<std::uint8_t>(serialize_npy(b)) == b);
  }
  SUBCASE("float and double, 2-D") {
    xt::xtensor<float, 2> a = {{1.5f, -0.25f, 3.0f}, {1e-30f, 4.0f, -7.0f}};
    const auto f = temp_file("f4.npy");
    write_npy(f, a);
    const auto back = read_npy<float, 2>(f);
    CHECK(back.shape()[0] == 2);
    CHECK(back.shape()[1] == 3);
    CHECK(back == a);
    std::filesystem::remove(f);
    xt::xtensor<double, 2> d = {{0.1, 0.2}, {0.3, 1e300}};
    CHECK(parse_npy<double, 2>(serialize_npy(d)) == d);
  }
  SUBCASE("empty") {
    xt::xtensor<std::int64_t, 1> a = xt::xtensor<std::int64_t, 1>::from_shape({0});
    const auto back = parse_npy<std::int64_t>(serialize_npy(a));
    CHECK(back.size() == 0);
  }
  SUBCASE("a std::vector as a 1-D array") {
    const std::vector<std::int64_t> v = {3, 1, 4, 1, 5};
    const auto f = temp_file("vector.npy");
    write_npy(f, v);
    const auto back = read_npy<std::int64_t>(f);
    REQUIRE(back.size() == v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      CHECK(back(i) == v[i]);
    std::filesystem::remove(f);
  }
}

TEST_CASE("npy: header variants numpy accepts") {
  SUBCASE("key order, double quotes, Python 2 longs, no trailing comma") {
    const std::string h = "{\"shape\": (3L,), 'fortran_order': False, 'descr': \"<i8\"}\n";
    CHECK(parse_npy<std::int64_t>(npy_file(h, i8_data({4, 5, 6})))(2) == 6);
  }
  SUBCASE("versions 2.0 and 3.0 have a 4-byte header length") {
    CHECK(parse_npy<std::int64_t>(npy_file(i8_header, i8_data({1, 2, 3}), 2))(0) == 1);
    CHECK(parse_npy<std::int64_t>(npy_file(i8_header, i8_data({1, 2, 3}), 3))(1) == 2);
  }
  SUBCASE("fortran_order True is the same bytes for a 1-D array") {
    const std::string h = "{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }\n";
    CHECK(parse_npy<std::int64_t>(npy_file(h, i8_data({1, 2, 3})))(2) == 3);
  }
}

TEST_CASE("npy: an int32 file read as int64 is widened, sign included") {
  const std::string h = "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }\n";
  const auto bytes = npy_file(h, i4_data({0, -1, 2147483647, -2147483647 - 1}));
  const auto a = parse_npy<std::int64_t>(bytes);
  REQUIRE(a.size() == 4);
  CHECK(a(0) == 0);
  CHECK(a(1) == -1);
  CHECK(a(2) == 2147483647);
  CHECK(a(3) == -2147483648LL);
  const auto f = temp_file("i4.npy");
  write_bytes(f, bytes);
  CHECK(read_npy<std::int64_t>(f) == a);
  std::filesystem::remove(f);
  // Only that widening: an int64 file is not narrowed.
  const auto msg = embplan::test::message_of([&] {
    (void)parse_npy<std::int32_t>(npy_file(i8_header, i8_data({1, 2, 3})));
  });
  CHECK(msg.find("descr' = \"<i8\"") != std::string::npos);
  CHECK(msg.find("'<i4' (int32)") != std::string::npos);
}

TEST_CASE("npy: every malformed file is an embplan::error naming the field and the value") {
  const auto good = npy_file(i8_header, i8_data({1, 2, 3}));
  SUBCASE("bad magic") {
    auto bytes = good;
    bytes[1] = static_cast<std::byte>('X');
    const auto msg =
        embplan::test::message_of([&] { (void)parse_npy<std::int64_t>(bytes, "m.npy"); });
    CHECK(msg.find("m.npy: magic") != std::string::npos);
    CHECK(msg.find("\\x93XUMPY") != std::string::npos);
    CHECK(embplan::test::message_of([&] {
            (void)parse_npy<std::int64_t>(as_bytes("PK\x03\x04"), "z.npy");
          }).find("z.npy: magic") != std::string::npos);
  }
  SUBCASE("unsupported version") {
    const auto msg = embplan::test::message_of(
        [&] { (void)parse_npy<std::int64_t>(npy_file(i8_header, "", 4), "v.npy"); });
    CHECK(msg.find("v.npy: version") != std::string::npos);
    CHECK(msg.find("\"4.0\"") != std::string::npos);
    auto minor = good;
    minor[7] = std::byte{1};
    CHECK(embplan::test::message_of([&] {
            (void)parse_npy<std::int64_t>(minor);
          }).find("\"1.1\"") != std::string::npos);
  }
  SUBCASE("too short for a preamble") {
    const auto msg = embplan::test::message_of(
        [&] { (void)parse_npy<std::int64_t>(as_bytes("\x93NUMPY\x01"), "s.npy"); });
    CHECK(msg.find("s.npy: size_bytes") != std::string::npos);
    CHECK(msg.find("= 7") != std::string::npos);
  }
  SUBCASE("header length past the end of the file") {
    const auto bytes = npy_file(i8_header, "", 1, 5000);
    const auto msg =
        embplan::test::message_of([&] { (void)parse_npy<std::int64_t>(bytes, "h.npy"); });
    CHECK(msg.find("h.npy: header_length") != std::string::npos);
    CHECK(msg.find("5000") != std::string::npos);
    CHECK(msg.find("truncated") != std::string::npos);
  }
  SUBCASE("wrong dtype names the expected and the found descr") {
    const std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n";
    const auto msg = embplan::test::message_of(
        [&] { (void)parse_npy<std::int64_t>(npy_file(h, std::string(12, '\0')), "d.npy"); });
    CHECK(msg.find("d.npy: descr") != std::string::npos);
    CHECK(msg.find("\"<f4\"") != std::string::npos);
    CHECK(msg.find("'<i8'") != std::string::npos);
    // Not even float64 -> float32: that would round silently.
    const std::string f8 = "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n";
    CHECK(embplan::test::message_of([&] {
            (void)parse_npy<float>(npy_file(f8, std::string(8, '\0')));
          }).find("'<f4' (float32)") != std::string::npos);
  }
  SUBCASE("big-endian") {
    const std::string h = "{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }\n";
    const auto msg = embplan::test::message_of([&] {
      (void)parse_npy<std::int64_t>(npy_file(h, i8_data({1, 2, 3})), "b.npy");
    });
    CHECK(msg.find("b.npy: descr") != std::string::npos);
    CHECK(msg.find("\">i8\"") != std::string::npos);
    CHECK(msg.find("big-endian") != std::string::npos);
  }
  SUBCASE("fortran_order True with more than one dimension") {
    const std::string h = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n";
    const auto msg = embplan::test::message_of(
        [&] { (void)parse_npy<float, 2>(npy_file(h, std::string(24, '\0')), "f.npy"); });
    CHECK(msg.find("f.npy: fortran_order") != std::string::npos);
    CHECK(msg.find("= true") != std::string::npos);
  }
  SUBCASE("a rank other than the one asked for") {
    const std::string h = "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 3), }\n";
    const auto msg = embplan::test::message_of([&] {
      (void)parse_npy<std::int64_t>(npy_file(h, i8_data({1, 2, 3})), "r.npy");
    });
    CHECK(msg.find("r.npy: shape") != std::string::npos);
    CHECK(msg.find("\"(1, 3)\"") != std::string::npos);
    CHECK(msg.find("1-dimensional") != std::string::npos);
  }
  SUBCASE("truncated data, and trailing bytes") {
    const auto msg = embplan::test::message_of([&] {
      (void)parse_npy<std::int64_t>(npy_file(i8_header, i8_data({1, 2})), "t.npy");
    });
    CHECK(msg.find("t.npy: data_bytes") != std::string::npos);
    CHECK(msg.find("= 16") != std::string::npos);
    CHECK(msg.find("24 bytes") != std::string::npos);
    CHECK(msg.find("truncated") != std::string::npos);
    CHECK(embplan::test::message_of([&] {
            (void)parse_npy<std::int64_t>(npy_file(i8_header, i8_data({1, 2, 3, 4})));
          }).find("trailing") != std::string::npos);
  }
  SUBCASE("malformed header dicts") {
    const auto msg_of = [&](const std::string& h) {
      return embplan::test::message_of([&] {
        (void)parse_npy<std::int64_t>(npy_file(h, i8_data({1, 2, 3})));
      });
    };
    CHECK(msg_of("{'descr': '<i8', 'shape': (3,), }\n").find(": fortran_order' is missing") !=
          std::string::npos);
    CHECK(
        msg_of("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), 'x': 1}\n").find("\"x\"") !=
        std::string::npos);
    CHECK(msg_of("{'descr': '<i8', 'fortran_order': False, 'shape': (-3,), }\n")
              .find("non-negative integer dimension") != std::string::npos);
    CHECK(msg_of("{'descr': '<i8', 'fortran_order': false, 'shape': (3,), }\n")
              .find("True or False") != std::string::npos);
    CHECK(msg_of("{'descr': '<i8', 'descr': '<i8', 'fortran_order': False, 'shape': (3,)}\n")
              .find("appears twice") != std::string::npos);
    CHECK(
        msg_of("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), } x\n").find("after '}'") !=
        std::string::npos);
  }
}

TEST_CASE("npy: read_npy checks the file as parse_npy checks bytes") {
  SUBCASE("missing file") {
    const auto msg =
        embplan::test::message_of([] { (void)read_npy<std::int64_t>(temp_file("absent.npy")); });
    CHECK(msg.find("field 'file'") != std::string::npos);
    CHECK(msg.find("absent.npy") != std::string::npos);
  }
  SUBCASE("truncated data and header on disk") {
    const auto f = temp_file("truncated.npy");
    write_bytes(f, npy_file(i8_header, i8_data({1, 2})));
    CHECK(embplan::test::message_of([&] { (void)read_npy<std::int64_t>(f); }).find("truncated") !=
          std::string::npos);
    write_bytes(f, npy_file(i8_header, "", 1, 100000));
    CHECK(embplan::test::message_of([&] {
            (void)read_npy<std::int64_t>(f);
          }).find("header_length") != std::string::npos);
    write_bytes(f, as_bytes("\x93NUM"));
    CHECK(embplan::test::message_of([&] { (void)read_npy<std::int64_t>(f); }).find("magic") !=
          std::string::npos);
    std::filesystem::remove(f);
  }
}
