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

template <class T>
std::string to_display(const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    std::string out = "\"";
    out += std::string_view(value);
    out += '"';
    return out;
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
