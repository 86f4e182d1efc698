#pragma once
// .npy read / write for index traces and anything else numpy saves (the
// embplan::npy component, docs/library.md), into and out of xtensor
// containers. The header is parsed here, not by a Python-literal library, so
// that every problem — bad magic, an unknown version, a header or data running
// past the end of the file, a dtype, byte order, memory order or rank other
// than the one asked for — is an embplan::error naming the file and the field.
//
// Element types: int64, int32, uint16, uint8, float32, float64 ('<i8', '<i4',
// '<u2', '|u1', '<f4', '<f8'), little-endian as numpy writes them on x86 and
// ARM. A request for int64 also reads an int32 file ('<i4'), widening each
// value: index files are often saved as int32 and widening is exact. Nothing
// else converts: asking for float32 from a float64 file is an error, not a
// silent rounding.

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <xtensor/xtensor.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/atomic_file.hpp"
#include "embplan/io/detail/npy_format.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

template <std::size_t N>
struct npy_layout {
  npy_decode how = npy_decode::same;
  std::array<std::size_t, N> shape{};
  std::size_t count = 0;         // elements
  std::uint64_t data_bytes = 0;  // what the shape and the file's dtype need
};

// Checks a parsed header against a request for an N-dimensional T array.
template <class T, std::size_t N>
npy_layout<N> check_npy_request(const npy_header& h, std::string_view source) {
  using embplan::detail::fail;
  npy_layout<N> out;
  out.how = npy_decode_for<T>(h.descr, source);
  if (h.shape.size() != N) {
    fail(npy_field(source, "shape"), npy_shape_text(h.shape),
         "a " + std::to_string(N) + "-dimensional array (ndim = " + std::to_string(N) + ")");
  }
  // Column-major data would need a transpose; a 1-D array reads the same either way.
  if (h.fortran_order && h.shape.size() > 1) {
    fail(npy_field(source, "fortran_order"), true,
         "False for a " + std::to_string(h.shape.size()) +
             "-dimensional array (save it with np.ascontiguousarray)");
  }
  const std::uint64_t element_bytes = out.how == npy_decode::widen_i4 ? 4 : sizeof(T);
  std::uint64_t count = 1;
  for (std::size_t i = 0; i < N; ++i) {
    const auto d = static_cast<std::uint64_t>(h.shape[i]);
    if (__builtin_mul_overflow(count, d, &count)) count = ~std::uint64_t{0};
    out.shape[i] = static_cast<std::size_t>(d);
  }
  if (__builtin_mul_overflow(count, element_bytes, &out.data_bytes)) {
    fail(npy_field(source, "shape"), npy_shape_text(h.shape),
         "a shape whose byte size fits in 64 bits");
  }
  out.count = static_cast<std::size_t>(count);
  return out;
}

inline void check_npy_data_size(std::uint64_t present, std::uint64_t needed, const npy_header& h,
                                std::string_view source) {
  if (present == needed) return;
  std::string expected = std::to_string(needed) + " bytes of data for shape " +
                         npy_shape_text(h.shape) + " of '" + h.descr + "'";
  expected += present < needed ? " (truncated file?)" : " (trailing bytes after the array)";
  embplan::detail::fail(npy_field(source, "data_bytes"), present, expected);
}

template <class T>
std::string npy_checked_header(std::size_t values, std::span<const std::int64_t> shape) {
  static_assert(npy_supported<T>,
                "write_npy: T must be int64, int32, uint16, uint8, float or double");
  std::size_t count = 1;
  for (const auto d : shape)
    count *= static_cast<std::size_t>(d);
  if (count != values) {
    embplan::detail::fail("shape", npy_shape_text(shape),
                          "a shape holding the " + std::to_string(values) + " values given");
  }
  return npy_header_bytes(npy_descr_of<T>(), shape);
}

// Header, then the data streamed from `values` (no copy of a large trace on a
// little-endian machine; 1 MiB chunks otherwise), atomically: a write that
// fails part-way leaves the previous file as it was.
template <class T>
void write_npy_file(const std::filesystem::path& file, std::span<const T> values,
                    std::span<const std::int64_t> shape) {
  const std::string header = npy_checked_header<T>(values.size(), shape);
  atomic_file out(file);
  out.write(header);
  if constexpr (std::endian::native == std::endian::little) {
    out.write(values.data(), values.size_bytes());
  } else {
    constexpr std::size_t chunk = (std::size_t{1} << 20) / sizeof(T);
    std::vector<std::byte> buffer(chunk * sizeof(T));
    for (std::size_t i = 0; i < values.size(); i += chunk) {
      const std::size_t n = std::min(chunk, values.size() - i);
      npy_encode_elements(values.data() + i, n, buffer.data());
      out.write(buffer.data(), n * sizeof(T));
    }
  }
  out.commit();
}

}  // namespace detail

// Parses a whole .npy file held in memory. `source` names it in messages.
template <class T, std::size_t N = 1>
xt::xtensor<T, N> parse_npy(std::span<const std::byte> bytes, std::string_view source = "<input>") {
  static_assert(detail::npy_supported<T>,
                "read_npy / parse_npy: T must be int64, int32, uint16, uint8, float or double");
  using namespace detail;
  const auto pre = parse_npy_preamble(bytes, bytes.size(), source);
  const auto* text = reinterpret_cast<const char*>(bytes.data() + pre.header_begin);
  const auto header =
      parse_npy_header(std::string_view(text, static_cast<std::size_t>(pre.header_bytes)), source);
  const auto layout = check_npy_request<T, N>(header, source);
  const std::uint64_t data_begin = pre.header_begin + pre.header_bytes;
  check_npy_data_size(bytes.size() - data_begin, layout.data_bytes, header, source);
  xt::xtensor<T, N> out(layout.shape);
  npy_decode_elements(bytes.data() + data_begin, layout.count, layout.how, out.data());
  return out;
}

// Reads a .npy file: the header first, then the data straight into the
// returned container (no second copy of a large index file).
template <class T, std::size_t N = 1>
xt::xtensor<T, N> read_npy(const std::filesystem::path& file) {
  static_assert(detail::npy_supported<T>,
                "read_npy / parse_npy: T must be int64, int32, uint16, uint8, float or double");
  using namespace detail;
  const std::string name = file.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    embplan::detail::fail("file", name, "an existing .npy file");
  }
  const std::uint64_t file_bytes = std::filesystem::file_size(file, ec);
  std::ifstream in(file, std::ios::binary);
  if (ec || !in) embplan::detail::fail("file", name, "a readable .npy file");
  const auto read_into = [&](std::byte* dst, std::uint64_t n) {
    in.read(reinterpret_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (static_cast<std::uint64_t>(in.gcount()) != n) {
      embplan::detail::fail("file", name, "a readable .npy file (short read)");
    }
  };

  std::vector<std::byte> head(
      static_cast<std::size_t>(std::min<std::uint64_t>(file_bytes, npy_preamble_v2_bytes)));
  read_into(head.data(), head.size());
  const auto pre = parse_npy_preamble(head, file_bytes, name);
  head.resize(pre.header_begin + static_cast<std::size_t>(pre.header_bytes));
  in.seekg(static_cast<std::streamoff>(pre.header_begin));
  read_into(head.data() + pre.header_begin, pre.header_bytes);
  const auto* text = reinterpret_cast<const char*>(head.data() + pre.header_begin);
  const auto header =
      parse_npy_header(std::string_view(text, static_cast<std::size_t>(pre.header_bytes)), name);
  const auto layout = check_npy_request<T, N>(header, name);
  check_npy_data_size(file_bytes - head.size(), layout.data_bytes, header, name);

  xt::xtensor<T, N> out(layout.shape);
  if (layout.how == npy_decode::same && std::endian::native == std::endian::little) {
    read_into(reinterpret_cast<std::byte*>(out.data()), layout.data_bytes);
  } else {
    std::vector<std::byte> raw(static_cast<std::size_t>(layout.data_bytes));
    read_into(raw.data(), raw.size());
    npy_decode_elements(raw.data(), layout.count, layout.how, out.data());
  }
  return out;
}

// The bytes of a .npy file (version 1.0, C order) holding `values` with `shape`.
template <class T>
std::vector<std::byte> serialize_npy(std::span<const T> values,
                                     std::span<const std::int64_t> shape) {
  const std::string header = detail::npy_checked_header<T>(values.size(), shape);
  std::vector<std::byte> out(header.size() + values.size_bytes());
  for (std::size_t i = 0; i < header.size(); ++i)
    out[i] = static_cast<std::byte>(header[i]);
  detail::npy_encode_elements(values.data(), values.size(), out.data() + header.size());
  return out;
}

template <class T, std::size_t N>
std::vector<std::byte> serialize_npy(const xt::xtensor<T, N>& a) {
  std::array<std::int64_t, N> shape{};
  for (std::size_t i = 0; i < N; ++i)
    shape[i] = static_cast<std::int64_t>(a.shape()[i]);
  return serialize_npy<T>(std::span<const T>(a.data(), a.size()), shape);
}

// Writes `values` as a 1-D array (a trace's indices or offsets).
template <class T>
void write_npy(const std::filesystem::path& file, std::span<const T> values) {
  const std::array<std::int64_t, 1> shape{static_cast<std::int64_t>(values.size())};
  detail::write_npy_file<T>(file, values, shape);
}

template <class T>
void write_npy(const std::filesystem::path& file, const std::vector<T>& values) {
  write_npy<T>(file, std::span<const T>(values));
}

template <class T, std::size_t N>
void write_npy(const std::filesystem::path& file, const xt::xtensor<T, N>& a) {
  std::array<std::int64_t, N> shape{};
  for (std::size_t i = 0; i < N; ++i)
    shape[i] = static_cast<std::int64_t>(a.shape()[i]);
  detail::write_npy_file<T>(file, std::span<const T>(a.data(), a.size()), shape);
}

}  // namespace embplan::inline EMBPLAN_ABI::io
