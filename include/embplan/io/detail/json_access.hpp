#pragma once
// Typed, path-aware reads from a parsed nlohmann::json value. Every check is
// done before nlohmann is asked for a value, so no nlohmann exception escapes;
// a wrong type becomes an embplan::error naming the field path, the value
// seen and the type expected (docs/design.md, "Errors and exit codes").

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io::detail {

using embplan::detail::path;
using nlohmann::json;

// The value as compact JSON text, cut to about 80 characters so a large value
// does not flood a message. Written iteratively and only as far as shown:
// json::dump() recurses once per level and writes the whole value first, so a
// deeply nested or huge value would overflow the stack or take all memory.
inline std::string display(const json& value) {
  constexpr std::size_t max_chars = 80;
  constexpr std::size_t max_levels = 16;  // deeper containers show as [...] / {...}
  std::string text;
  const auto scalar = [&](const json& v) {
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      text += json(s.substr(0, max_chars)).dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      text += v.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  };
  struct level {
    const json* container;
    json::const_iterator next;
  };
  std::vector<level> open;
  // Writes `v` if it is a scalar or too deep to open; opens it otherwise.
  const auto start = [&](const json& v) {
    if (!v.is_structured()) {
      scalar(v);
    } else if (open.size() >= max_levels && !v.empty()) {
      text += v.is_array() ? "[...]" : "{...}";
    } else {
      text += v.is_array() ? '[' : '{';
      open.push_back({&v, v.cbegin()});
    }
  };
  start(value);
  while (!open.empty() && text.size() <= max_chars) {
    auto& top = open.back();
    if (top.next == top.container->cend()) {
      text += top.container->is_array() ? ']' : '}';
      open.pop_back();
      continue;
    }
    if (top.next != top.container->cbegin()) text += ',';
    const auto it = top.next++;
    if (top.container->is_object()) {
      text +=
          json(it.key().substr(0, max_chars)).dump(-1, ' ', false, json::error_handler_t::replace);
      text += ':';
    }
    start(*it);  // may invalidate `top`
  }
  if (text.size() > max_chars) {
    text.resize(std::min(text.size(), max_chars - 3));
    text += "...";
  }
  return text;
}

// "field 'tables[3].rows' = \"abc\": expected an integer" — the same shape as
// embplan::detail::fail, with the value written as the JSON it was.
[[noreturn]] inline void fail_value(std::string_view field, const json& value,
                                    std::string_view expected) {
  std::string msg = "field '";
  msg += field;
  msg += "' = ";
  msg += display(value);
  msg += ": expected ";
  msg += expected;
  throw error(msg);
}

inline void require_object(const json& j, std::string_view field) {
  if (!j.is_object()) fail_value(field, j, "an object");
}

inline void require_array(const json& j, std::string_view field) {
  if (!j.is_array()) fail_value(field, j, "an array");
}

// The member `key` of `obj`, or nullptr when absent (or `obj` is no object).
inline const json* find(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

inline const json& require(const json& obj, std::string_view key, std::string_view where,
                           std::string_view expected) {
  const json* v = find(obj, key);
  if (v == nullptr) embplan::detail::fail_missing(path(where, key), expected);
  return *v;
}

// ------------------------------------------------------------ unknown keys

// A key compared loosely: lower case, without '_', '-', '.' and spaces, so
// "poolingFactor", "Pooling-Factor" and "pooling_factor" fold alike.
inline std::string fold_key(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (const char c : key) {
    if (c == '_' || c == '-' || c == '.' || c == ' ') continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

// The words of a key, folded: "weight_dtype" and "weightDtype" give
// {"weight", "dtype"}.
inline std::vector<std::string> key_words(std::string_view key) {
  std::vector<std::string> words(1);
  for (std::size_t i = 0; i < key.size(); ++i) {
    const char c = key[i];
    const bool upper = c >= 'A' && c <= 'Z';
    const bool lower_before = i > 0 && key[i - 1] >= 'a' && key[i - 1] <= 'z';
    if (c == '_' || c == '-' || c == '.' || c == ' ' || (upper && lower_before)) {
      if (!words.back().empty()) words.emplace_back();
      if (!upper) continue;
    }
    words.back() += upper ? static_cast<char>(c - 'A' + 'a') : c;
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// Damerau-Levenshtein distance (optimal string alignment: insertions,
// deletions, substitutions and swaps of neighbours each cost 1).
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = b.size();
  std::vector<std::size_t> before(n + 1), previous(n + 1), current(n + 1);
  for (std::size_t j = 0; j <= n; ++j)
    previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= n; ++j) {
      const std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[n];
}

// The known key `key` most likely meant, or "" when none is close. Close is:
// the same key in another case or separator style; at most 1 edit (2 for keys
// longer than 4 letters) after folding; or one key's words all among the
// other's ("weight_dtype" -> "dtype", "optimizer_state" -> "optimizer",
// "memory_bandwidth" -> "memory_bandwidth_gbps"). Ties go to the first known key.
inline std::string_view closest_key(std::string_view key, std::span<const std::string_view> known) {
  const std::string folded = fold_key(key);
  const auto words = key_words(key);
  const auto all_in = [](const std::vector<std::string>& some,
                         const std::vector<std::string>& others) {
    std::size_t letters = 0;
    for (const auto& w : some) {
      if (std::find(others.begin(), others.end(), w) == others.end()) return false;
      letters += w.size();
    }
    return !some.empty() && letters >= 3;  // "id" alone says too little
  };
  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::size_t best_score = none;
  std::string_view best;
  for (const auto k : known) {
    const std::string k_folded = fold_key(k);
    const std::size_t limit = k_folded.size() <= 4 ? 1 : 2;
    std::size_t score = edit_distance(folded, k_folded);
    if (score > limit) {
      const auto k_words = key_words(k);
      score = all_in(k_words, words) || all_in(words, k_words) ? limit + 1 : none;
    }
    if (score < best_score) {
      best_score = score;
      best = k;
    }
  }
  return best;
}

// The known keys as a list for a message; runs "bin_0", "bin_1", ..., "bin_16"
// are written "bin_0".."bin_16".
inline std::string known_keys_text(std::span<const std::string_view> known) {
  // "bin_7" -> ("bin_", 7); a key without a trailing number -> (key, none).
  const auto split_number = [](std::string_view k) {
    std::size_t digits = k.size();
    while (digits > 0 && k[digits - 1] >= '0' && k[digits - 1] <= '9')
      --digits;
    long number = -1;
    if (digits < k.size() && k.size() - digits < 9)
      number = std::stol(std::string(k.substr(digits)));
    return std::pair{k.substr(0, digits), number};
  };
  std::string out;
  for (std::size_t i = 0; i < known.size();) {
    const auto [prefix, number] = split_number(known[i]);
    std::size_t last = i;
    while (number >= 0 && last + 1 < known.size()) {
      const auto [p, v] = split_number(known[last + 1]);
      if (p != prefix || v != number + static_cast<long>(last + 1 - i)) break;
      ++last;
    }
    if (!out.empty()) out += ", ";
    out += '"';
    out += known[i];
    out += '"';
    if (last > i + 1) {
      out += "..\"";
      out += known[last];
      out += '"';
    } else {
      last = i;
    }
    i = last + 1;
  }
  return out;
}

// Rejects a key of `obj` outside `known`, naming its path ("tables[3].size"),
// its value, a near known key when there is one, and every known key.
// Nothing is silently dropped (docs/design.md, "Principles"): a misspelt
// "dtyp" would otherwise leave the table at its default fp32. No allocation
// unless a key is unknown.
inline void check_keys(const json& obj, std::span<const std::string_view> known,
                       std::string_view where) {
  if (!obj.is_object()) return;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(known.begin(), known.end(), std::string_view(key)) != known.end()) continue;
    std::string expected = "a known key";
    if (const auto near = closest_key(key, known); !near.empty()) {
      expected += " (did you mean \"";
      expected += near;
      expected += "\"?)";
    }
    expected += ", one of ";
    expected += known_keys_text(known);
    fail_value(path(where, key), it.value(), expected);
  }
}

inline std::int64_t as_int64(const json& j, std::string_view field) {
  if (j.is_number_integer() && !j.is_number_unsigned()) return j.get<std::int64_t>();
  if (j.is_number_unsigned()) {
    const auto v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail_value(field, j, "an integer below 2^63");
    }
    return static_cast<std::int64_t>(v);
  }
  if (j.is_number_float()) {
    // 1e6 or 4000000.0 are integers written by tools that print every number as
    // a float; 1.5 is not.
    const double v = j.get<double>();
    constexpr double limit = 9223372036854775808.0;  // 2^63
    if (!std::isfinite(v) || std::trunc(v) != v) fail_value(field, j, "an integer");
    if (v < -limit || v >= limit) fail_value(field, j, "an integer below 2^63");
    return static_cast<std::int64_t>(v);
  }
  fail_value(field, j, "an integer");
}

inline std::int32_t as_int32(const json& j, std::string_view field) {
  const std::int64_t v = as_int64(j, field);
  if (v < std::numeric_limits<std::int32_t>::min() ||
      v > std::numeric_limits<std::int32_t>::max()) {
    fail_value(field, j, "a 32-bit integer");
  }
  return static_cast<std::int32_t>(v);
}

// A byte count: a non-negative integer up to 2^64 - 1.
inline std::uint64_t as_uint64(const json& j, std::string_view field) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (v < 0) fail_value(field, j, "a non-negative integer");
    return static_cast<std::uint64_t>(v);
  }
  if (j.is_number_float()) {
    const double v = j.get<double>();
    constexpr double limit = 18446744073709551616.0;  // 2^64
    if (!std::isfinite(v) || std::trunc(v) != v) fail_value(field, j, "a non-negative integer");
    if (v < 0.0) fail_value(field, j, "a non-negative integer");
    if (v >= limit) fail_value(field, j, "an integer below 2^64");
    return static_cast<std::uint64_t>(v);
  }
  fail_value(field, j, "a non-negative integer");
}

// JSON has no NaN literal: null where a number belongs is a type error here.
inline double as_double(const json& j, std::string_view field) {
  if (!j.is_number()) fail_value(field, j, "a number");
  return j.get<double>();
}

inline std::string as_string(const json& j, std::string_view field) {
  if (!j.is_string()) fail_value(field, j, "a string");
  return j.get<std::string>();
}

inline bool as_bool(const json& j, std::string_view field) {
  if (!j.is_boolean()) fail_value(field, j, "true or false");
  return j.get<bool>();
}

// Runs `body`, turning any nlohmann exception that slipped past the checks
// above into an embplan::error that names `where`.
template <class Body>
decltype(auto) guarded(std::string_view where, Body&& body) {
  try {
    return body();
  } catch (const nlohmann::json::exception& e) {
    std::string msg = "field '";
    msg += where;
    msg += "': JSON error: ";
    msg += e.what();
    throw error(msg);
  }
}

}  // namespace embplan::inline EMBPLAN_ABI::io::detail
