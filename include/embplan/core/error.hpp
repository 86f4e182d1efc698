#pragma once
// embplan::error — the one exception type of the library. Every message names
// the field, the value that was seen and what was expected, so a user can fix
// the input without reading the source (docs/design.md, "Errors and exit
// codes").

#include <concepts>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

class error : public std::runtime_error {
 public:
  explicit error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {

// A string shown in a message is cut after this many bytes, so that a 20 MB
// value read from a file is not echoed whole onto a terminal or into a log.
inline constexpr std::size_t display_max_bytes = 200;

// `text` in double quotes; past display_max_bytes, its first bytes (cut
// before a UTF-8 continuation byte, never inside a character) and its size:
// "aaaa..." (20971520 bytes).
inline std::string quoted_prefix(std::string_view text) {
  std::string out = "\"";
  if (text.size() <= display_max_bytes) {
    out += text;
    out += '"';
    return out;
  }
  std::size_t cut = display_max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  out += text.substr(0, cut);
  out += "...\" (";
  out += std::to_string(text.size());
  out += " bytes)";
  return out;
}

template <class T>
std::string to_display(const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return quoted_prefix(std::string_view(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else {
    std::ostringstream os;
    os.precision(17);
    os << value;
    return os.str();
  }
}

// "field 'tables[3].rows' = -5: expected a positive integer", `shown` being
// the value as to_display shows it.
inline std::string field_message(std::string_view field, std::string_view shown,
                                 std::string_view expected) {
  std::string msg = "field '";
  msg += field;
  msg += "' = ";
  msg += shown;
  msg += ": expected ";
  msg += expected;
  return msg;
}

template <class T>
[[noreturn]] void fail(std::string_view field, const T& value, std::string_view expected) {
  throw error(field_message(field, to_display(value), expected));
}

[[noreturn]] inline void fail_missing(std::string_view field, std::string_view expected) {
  std::string msg = "field '";
  msg += field;
  msg += "' is missing: expected ";
  msg += expected;
  throw error(msg);
}

// Joins a parent path and a child name: path("tables[3]", "rows") -> "tables[3].rows".
inline std::string path(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  std::string out(parent);
  out += '.';
  out += child;
  return out;
}

inline std::string path(std::string_view parent, std::size_t index) {
  std::string out(parent);
  out += '[';
  out += std::to_string(index);
  out += ']';
  return out;
}

}  // namespace detail
}  // namespace embplan::inline EMBPLAN_ABI
