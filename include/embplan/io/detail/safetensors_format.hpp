#pragma once
// The pieces of the safetensors format a user never names: the dtype table,
// explicit little-endian element coding, field paths for messages, and the
// header parser that refuses duplicate keys (nlohmann keeps the last one
// silently, so a file naming a tensor twice would load whichever came last).
// Format: https://github.com/huggingface/safetensors (README, "Format").

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/half_float.hpp"
#include "embplan/io/detail/input_guard.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io::detail {

// The reference implementation refuses headers above 100 MB; so do we, before
// allocating anything for one.
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

// The largest file read_safetensors loads (16 GiB): far above any cost model,
// and refused before anything is allocated.
inline constexpr std::uint64_t safetensors_max_file_bytes = std::uint64_t{1} << 34;

// Integers read into float32 must come back exactly: |v| <= 2^24.
inline constexpr std::int64_t safetensors_max_exact_int = 16777216;

enum class st_dtype { f64, i64, f32, i32, f16, bf16 };

struct st_dtype_info {
  st_dtype id;
  std::string_view name;
  std::size_t size_bytes;
};

// Widest first: the writer lays tensors out in this order (then by name), as
// the reference implementation does, so every tensor starts aligned to its
// element size once the header is padded to a multiple of 8.
inline constexpr std::array<st_dtype_info, 6> st_dtypes{{{st_dtype::f64, "F64", 8},
                                                         {st_dtype::i64, "I64", 8},
                                                         {st_dtype::f32, "F32", 4},
                                                         {st_dtype::i32, "I32", 4},
                                                         {st_dtype::f16, "F16", 2},
                                                         {st_dtype::bf16, "BF16", 2}}};

inline constexpr std::string_view st_dtype_expected =
    "a dtype embplan reads: one of \"F32\", \"F16\", \"BF16\", \"F64\", \"I64\", \"I32\"";

inline const st_dtype_info* find_st_dtype(std::string_view name) {
  for (const auto& d : st_dtypes)
    if (d.name == name) return &d;
  return nullptr;
}

inline std::size_t st_dtype_rank(const st_dtype_info& d) {
  return static_cast<std::size_t>(&d - st_dtypes.data());
}

// "model.safetensors: header_length"
inline std::string st_field(std::string_view source, std::string_view field) {
  std::string out(source);
  out += ": ";
  out += field;
  return out;
}

// "model.safetensors: tensors[\"t_hidden.0.weight\"].shape"
inline std::string st_tensor_field(std::string_view source, std::string_view name,
                                   std::string_view field = {}) {
  std::string out(source);
  out += ": tensors[\"";
  out += name;
  out += "\"]";
  if (!field.empty()) {
    out += '.';
    out += field;
  }
  return out;
}

// ------------------------------------------------------------ not safetensors

// Refuses a file whose first 8 bytes, where the header length belongs, are all
// text (printable ASCII, tab, CR, LF): every byte non-zero spells a length of
// at least 2^56, so no safetensors file starts that way. Called once the
// length read there is implausible; without it a JSON file given as a model
// reads as "header_length = 7089074978374552187 ... (truncated file?)".
// Binary garbage keeps the messages about the length.
inline void refuse_text_file(std::span<const std::byte> bytes, std::string_view source) {
  if (bytes.size() < 8) return;
  std::string shown;
  for (std::size_t i = 0; i < 8; ++i) {
    const auto c = static_cast<char>(bytes[i]);
    if (c == '\n') {
      shown += "\\n";
    } else if (c == '\r') {
      shown += "\\r";
    } else if (c == '\t') {
      shown += "\\t";
    } else if (c >= 0x20 && c < 0x7f) {
      shown += c;
    } else {
      return;
    }
  }
  char first = '\0';  // the first character that is not white space
  for (std::size_t i = 0; i < 8 && first == '\0'; ++i) {
    const auto c = static_cast<char>(bytes[i]);
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') first = c;
  }
  std::string expected = "an 8-byte little-endian header length: ";
  expected += source;
  expected += " is not a safetensors file: it starts with ";
  expected += first == '\0' ? std::string("white space") : std::string{'\'', first, '\''};
  expected += first == '{' || first == '[' ? " (a JSON file?)" : " (a text file?)";
  embplan::detail::fail(st_field(source, "header_length"), shown, expected);
}

// ------------------------------------------------------------ little endian

inline std::uint64_t load_le(const std::byte* p, std::size_t size_bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < size_bytes; ++i)
    v |= static_cast<std::uint64_t>(std::to_integer<unsigned>(p[i])) << (8 * i);
  return v;
}

inline void store_le(std::byte* p, std::uint64_t v, std::size_t size_bytes) {
  for (std::size_t i = 0; i < size_bytes; ++i)
    p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
}

// Decodes `out.size()` elements of `dtype` at `p` into float32. Integers must
// be exact in float32 and F64 values within float32 range (a silent rounding
// to infinity would be a wrong weight); `field` names the tensor for messages.
inline void decode_elements(const st_dtype_info& dtype, const std::byte* p, std::span<float> out,
                            std::string_view field) {
  const std::size_t n = out.size();
  switch (dtype.id) {
    case st_dtype::f32:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(load_le(p + 4 * i, 4)));
      return;
    case st_dtype::f16:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = half_bits_to_float(static_cast<std::uint16_t>(load_le(p + 2 * i, 2)));
      return;
    case st_dtype::bf16:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = bfloat16_bits_to_float(static_cast<std::uint16_t>(load_le(p + 2 * i, 2)));
      return;
    case st_dtype::f64:
      for (std::size_t i = 0; i < n; ++i) {
        const double v = std::bit_cast<double>(load_le(p + 8 * i, 8));
        if (std::isfinite(v) &&
            std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
          embplan::detail::fail(embplan::detail::path(std::string(field) + ".values", i), v,
                                "a value within float32 range");
        }
        out[i] = static_cast<float>(v);
      }
      return;
    case st_dtype::i64:
    case st_dtype::i32:
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t v = dtype.id == st_dtype::i64
                                   ? static_cast<std::int64_t>(load_le(p + 8 * i, 8))
                                   : static_cast<std::int64_t>(static_cast<std::int32_t>(
                                         static_cast<std::uint32_t>(load_le(p + 4 * i, 4))));
        if (v > safetensors_max_exact_int || v < -safetensors_max_exact_int) {
          embplan::detail::fail(embplan::detail::path(std::string(field) + ".values", i), v,
                                "an integer of magnitude at most 2^24 (exact in float32)");
        }
        out[i] = static_cast<float>(v);
      }
      return;
  }
}

// Encodes float32 values as `dtype`; integer dtypes take integral values only.
inline void encode_elements(const st_dtype_info& dtype, std::span<const float> values, std::byte* p,
                            std::string_view field) {
  const std::size_t n = values.size();
  switch (dtype.id) {
    case st_dtype::f32:
      for (std::size_t i = 0; i < n; ++i)
        store_le(p + 4 * i, std::bit_cast<std::uint32_t>(values[i]), 4);
      return;
    case st_dtype::f16:
      for (std::size_t i = 0; i < n; ++i)
        store_le(p + 2 * i, float_to_half_bits(values[i]), 2);
      return;
    case st_dtype::bf16:
      for (std::size_t i = 0; i < n; ++i)
        store_le(p + 2 * i, float_to_bfloat16_bits(values[i]), 2);
      return;
    case st_dtype::f64:
      for (std::size_t i = 0; i < n; ++i)
        store_le(p + 8 * i, std::bit_cast<std::uint64_t>(static_cast<double>(values[i])), 8);
      return;
    case st_dtype::i64:
    case st_dtype::i32: {
      // float32 bounds of the integer range: 2^63 and 2^31 are exact floats.
      const double limit = dtype.id == st_dtype::i64 ? 9223372036854775808.0 : 2147483648.0;
      for (std::size_t i = 0; i < n; ++i) {
        const double v = values[i];
        if (!std::isfinite(v) || std::trunc(v) != v || v < -limit || v >= limit) {
          embplan::detail::fail(embplan::detail::path(std::string(field) + ".values", i), v,
                                dtype.id == st_dtype::i64 ? "an integer in the I64 range"
                                                          : "an integer in the I32 range");
        }
        const auto bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
        store_le(p + dtype.size_bytes * i, bits, dtype.size_bytes);
      }
      return;
    }
  }
}

// ------------------------------------------------------------ header JSON

// Parses the header text; malformed JSON and duplicate keys (at any depth)
// become embplan::error naming `source`.
inline nlohmann::json parse_st_header(std::string_view text, std::string_view source) {
  using nlohmann::json;
  check_json_depth(text, st_field(source, "header"), 9);  // byte 9 of the file
  check_json_no_nul(text, st_field(source, "header"), 9);
  json header;
  try {
    header = parse_json_unique_keys(text);
  } catch (const json_duplicate_key& e) {
    std::string msg = "field '";
    msg += e.outer_key.empty() ? st_tensor_field(source, e.key)
                               : st_tensor_field(source, e.outer_key, e.key);
    msg += "' appears twice in the header: expected unique names";
    throw error(msg);
  } catch (const json::parse_error& e) {
    std::string_view what = e.what();
    if (const auto tag_end = what.find("] "); tag_end != std::string_view::npos) {
      what.remove_prefix(tag_end + 2);
    }
    std::string msg = st_field(source, "header");
    msg += ": invalid JSON at byte ";
    msg += std::to_string(e.byte + 8);  // counted from the start of the file (1-based)
    msg += ": ";
    msg += what;
    throw error(msg);
  } catch (const json::exception& e) {
    throw error(st_field(source, "header") + ": invalid JSON: " + e.what());
  }
  return header;
}

}  // namespace embplan::inline EMBPLAN_ABI::io::detail
