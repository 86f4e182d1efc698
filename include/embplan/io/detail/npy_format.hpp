#pragma once
// The pieces of the .npy format a user never names: the preamble (magic,
// version, header length), a parser for the header's Python dict literal
// (parsed here rather than by a JSON library: it is Python syntax, with single
// quotes, True/False and tuples), the dtype table and little-endian element
// coding. Format: NEP 1 / numpy.lib.format ("Format Version 1.0" .. "3.0").
// Every problem is an embplan::error naming `source` and the field.

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io::detail {

inline constexpr std::array<unsigned char, 6> npy_magic{0x93, 'N', 'U', 'M', 'P', 'Y'};
// Magic, two version bytes, then a 2-byte (v1) or 4-byte (v2, v3) header length.
inline constexpr std::size_t npy_preamble_v1_bytes = 10;
inline constexpr std::size_t npy_preamble_v2_bytes = 12;
// numpy pads the preamble + header to a multiple of 64 bytes (ARRAY_ALIGN).
inline constexpr std::size_t npy_align_bytes = 64;

// "x.npy: descr"
inline std::string npy_field(std::string_view source, std::string_view field) {
  std::string out(source);
  out += ": ";
  out += field;
  return out;
}

// Bytes shown as text, non-printable ones as \xNN, for messages about magic.
inline std::string npy_printable(std::span<const std::byte> bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const auto b : bytes) {
    const auto c = std::to_integer<unsigned>(b);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

struct npy_preamble {
  unsigned major = 0;
  unsigned minor = 0;
  std::size_t header_begin = 0;    // byte position of the dict text
  std::uint64_t header_bytes = 0;  // its length, padding and newline included
};

inline std::uint64_t npy_load_le(const std::byte* p, std::size_t size_bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < size_bytes; ++i)
    v |= static_cast<std::uint64_t>(std::to_integer<unsigned>(p[i])) << (8 * i);
  return v;
}

// Reads magic, version and header length from the first bytes of a file of
// `file_bytes` bytes (`prefix` holds at least min(file_bytes, 12) of them) and
// checks that the header lies inside the file.
inline npy_preamble parse_npy_preamble(std::span<const std::byte> prefix, std::uint64_t file_bytes,
                                       std::string_view source) {
  using embplan::detail::fail;
  const std::size_t magic_seen = std::min(prefix.size(), npy_magic.size());
  bool magic_ok = prefix.size() >= npy_magic.size();
  for (std::size_t i = 0; i < magic_seen; ++i)
    magic_ok = magic_ok && std::to_integer<unsigned>(prefix[i]) == npy_magic[i];
  if (!magic_ok) {
    fail(npy_field(source, "magic"), npy_printable(prefix.first(magic_seen)),
         "\"\\x93NUMPY\", the start of a .npy file");
  }
  if (prefix.size() < npy_preamble_v1_bytes) {
    fail(npy_field(source, "size_bytes"), file_bytes,
         "at least 10 bytes (magic, version, header length); truncated file?");
  }
  npy_preamble p;
  p.major = std::to_integer<unsigned>(prefix[6]);
  p.minor = std::to_integer<unsigned>(prefix[7]);
  // numpy.lib.format reads exactly these three versions and refuses the rest.
  if (p.minor != 0 || p.major < 1 || p.major > 3) {
    fail(npy_field(source, "version"), std::to_string(p.major) + "." + std::to_string(p.minor),
         "1.0, 2.0 or 3.0");
  }
  const std::size_t length_bytes = p.major == 1 ? 2 : 4;
  p.header_begin = 8 + length_bytes;
  if (prefix.size() < p.header_begin) {
    fail(npy_field(source, "size_bytes"), file_bytes,
         "at least " + std::to_string(p.header_begin) + " bytes for a version " +
             std::to_string(p.major) + ".0 preamble; truncated file?");
  }
  p.header_bytes = npy_load_le(prefix.data() + 8, length_bytes);
  const std::uint64_t rest = file_bytes - p.header_begin;
  if (p.header_bytes > rest) {
    fail(npy_field(source, "header_length"), p.header_bytes,
         "at most " + std::to_string(rest) +
             " bytes, what follows it in the file (truncated file?)");
  }
  return p;
}

// ------------------------------------------------------------ header dict

struct npy_header {
  std::string descr;  // e.g. "<i8"
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

inline std::string npy_shape_text(std::span<const std::int64_t> shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ',';
  out += ')';
  return out;
}

// A recursive-descent reader for the one shape of literal numpy writes:
// {'descr': '<i8', 'fortran_order': False, 'shape': (3,), }
class npy_header_parser {
 public:
  npy_header_parser(std::string_view text, std::string_view source)
      : text_(text), source_(source) {}

  npy_header parse() {
    npy_header h;
    bool seen_descr = false;
    bool seen_order = false;
    bool seen_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        if (seen_descr) duplicate(key);
        seen_descr = true;
        skip_space();
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        if (seen_order) duplicate(key);
        seen_order = true;
        h.fortran_order = boolean_literal();
      } else if (key == "shape") {
        if (seen_shape) duplicate(key);
        seen_shape = true;
        h.shape = int_tuple();
      } else {
        embplan::detail::fail(npy_field(source_, "header"), key,
                              "only the keys 'descr', 'fortran_order' and 'shape'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        syntax("',' or '}' after the value of '" + key + "'");
      }
    }
    skip_space();
    if (pos_ != text_.size()) syntax("nothing but spaces and a newline after '}'");
    if (!seen_descr) missing("descr");
    if (!seen_order) missing("fortran_order");
    if (!seen_shape) missing("shape");
    return h;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c) {
    skip_space();
    if (peek() != c) syntax(std::string("'") + c + "'");
    ++pos_;
  }

  [[noreturn]] void syntax(const std::string& what) const {
    embplan::detail::fail(npy_field(source_, "header"), std::string(text_),
                          "a Python dict literal like {'descr': '<i8', 'fortran_order': False, "
                          "'shape': (3,), }; at character " +
                              std::to_string(pos_) + " expected " + what);
  }

  [[noreturn]] void duplicate(const std::string& key) const {
    embplan::detail::fail(npy_field(source_, "header"), std::string(text_),
                          "each key once; '" + key + "' appears twice");
  }

  [[noreturn]] void missing(std::string_view key) const {
    embplan::detail::fail_missing(npy_field(source_, key),
                                  "a header with 'descr', 'fortran_order' and 'shape'");
  }

  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') syntax("a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) syntax("a closing quote");
    std::string out(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }

  bool boolean_literal() {
    skip_space();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    syntax("True or False");
  }

  std::int64_t int_literal() {
    skip_space();
    const std::size_t begin = pos_;
    std::int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<std::int64_t>(text_[pos_] - '0');
      if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10) {
        syntax("a dimension below 2^63");
      }
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == begin) syntax("a non-negative integer dimension");
    if (peek() == 'L') ++pos_;  // Python 2 longs, as old numpy wrote them
    return v;
  }

  std::vector<std::int64_t> int_tuple() {
    std::vector<std::int64_t> out;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') {
        ++pos_;
        break;
      }
      out.push_back(int_literal());
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        syntax("',' or ')' in the shape tuple");
      }
    }
    return out;
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

inline npy_header parse_npy_header(std::string_view text, std::string_view source) {
  return npy_header_parser(text, source).parse();
}

// ------------------------------------------------------------ dtypes

// The descr numpy writes for T on a little-endian machine.
template <class T>
constexpr std::string_view npy_descr_of() noexcept {
  if constexpr (std::is_same_v<T, std::int64_t>) return "<i8";
  if constexpr (std::is_same_v<T, std::int32_t>) return "<i4";
  if constexpr (std::is_same_v<T, std::uint16_t>) return "<u2";
  if constexpr (std::is_same_v<T, std::uint8_t>) return "|u1";
  if constexpr (std::is_same_v<T, float>) return "<f4";
  if constexpr (std::is_same_v<T, double>) return "<f8";
  return "";
}

template <class T>
inline constexpr bool npy_supported = !npy_descr_of<T>().empty();

template <class T>
constexpr std::string_view npy_type_name() noexcept {
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  if constexpr (std::is_same_v<T, std::uint16_t>) return "uint16";
  if constexpr (std::is_same_v<T, std::uint8_t>) return "uint8";
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, double>) return "float64";
  return "";
}

// How a file's descr is decoded into T: as is, or int32 widened to int64 (index
// files are often saved as int32 to halve their size; widening is exact).
enum class npy_decode { same, widen_i4 };

template <class T>
npy_decode npy_decode_for(std::string_view descr, std::string_view source) {
  if (descr == npy_descr_of<T>()) return npy_decode::same;
  if constexpr (std::is_same_v<T, std::int64_t>) {
    if (descr == "<i4") return npy_decode::widen_i4;
  }
  std::string expected = "'";
  expected += npy_descr_of<T>();
  expected += "' (";
  expected += npy_type_name<T>();
  expected += ')';
  if constexpr (std::is_same_v<T, std::int64_t>) expected += " or '<i4' (int32, widened to int64)";
  if (!descr.empty() && descr.front() == '>') {
    expected += "; big-endian data is not read, save it as little-endian (arr.astype('<";
    expected += descr.substr(1);
    expected += "'))";
  } else {
    expected += " as requested";
  }
  embplan::detail::fail(npy_field(source, "descr"), descr, expected);
}

template <class T>
void npy_decode_elements(const std::byte* p, std::size_t n, npy_decode how, T* out) {
  if (how == npy_decode::widen_i4) {
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = static_cast<T>(
          static_cast<std::int32_t>(static_cast<std::uint32_t>(npy_load_le(p + 4 * i, 4))));
    }
    return;
  }
  if constexpr (std::endian::native == std::endian::little) {
    if (n > 0) std::memcpy(out, p, n * sizeof(T));
  } else {
    using bits = std::conditional_t<
        sizeof(T) == 8, std::uint64_t,
        std::conditional_t<sizeof(T) == 4, std::uint32_t,
                           std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>>>;
    for (std::size_t i = 0; i < n; ++i)
      out[i] = std::bit_cast<T>(static_cast<bits>(npy_load_le(p + sizeof(T) * i, sizeof(T))));
  }
}

template <class T>
void npy_encode_elements(const T* values, std::size_t n, std::byte* out) {
  if constexpr (std::endian::native == std::endian::little) {
    if (n > 0) std::memcpy(out, values, n * sizeof(T));
  } else {
    using bits = std::conditional_t<
        sizeof(T) == 8, std::uint64_t,
        std::conditional_t<sizeof(T) == 4, std::uint32_t,
                           std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>>>;
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::uint64_t>(std::bit_cast<bits>(values[i]));
      for (std::size_t b = 0; b < sizeof(T); ++b)
        out[sizeof(T) * i + b] = static_cast<std::byte>((v >> (8 * b)) & 0xffu);
    }
  }
}

// The preamble + header numpy's writer produces for (descr, shape): version
// 1.0, keys sorted, padded with spaces to a multiple of 64 bytes, ending in
// '\n'.
inline std::string npy_header_bytes(std::string_view descr, std::span<const std::int64_t> shape) {
  std::string dict = "{'descr': '";
  dict += descr;
  dict += "', 'fortran_order': False, 'shape': ";
  dict += npy_shape_text(shape);
  dict += ", }";
  const std::size_t unpadded = npy_preamble_v1_bytes + dict.size() + 1;
  const std::size_t padding = (npy_align_bytes - unpadded % npy_align_bytes) % npy_align_bytes;
  dict.append(padding, ' ');
  dict += '\n';
  std::string out;
  for (const auto c : npy_magic)
    out += static_cast<char>(c);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xffu);
  out += static_cast<char>((dict.size() >> 8) & 0xffu);
  out += dict;
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::io::detail
