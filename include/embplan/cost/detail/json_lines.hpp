#pragma once
// The reading loop of `embplan collect` records (JSON lines, docs/measuring.md
// "Cost data"): one object per line, blank lines skipped, every error naming the
// file and line. A key outside `known` is an error naming it (a record read
// without a field it meant to carry is misread). `parse(json, where)` turns
// one object into a record; an nlohmann exception it throws becomes an error
// naming `what` and the line. Only a regular file is read, and JSON nested
// past io::detail::json_max_depth is refused before it is parsed.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/input_guard.hpp"
#include "embplan/io/detail/json_access.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::cost::detail {

// The largest records file read (4 GiB, some 20 million records).
inline constexpr std::uint64_t records_max_file_bytes = std::uint64_t{1} << 32;

// The first 60 bytes of a line as a message shows them: bytes outside
// printable ASCII as \xNN, so a binary file given as records prints no raw
// bytes to a terminal.
inline std::string shown_prefix(std::string_view line) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const char c : line.substr(0, 60)) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 0xf];
    }
  }
  return out;
}

template <class Record, class Parse>
std::vector<Record> read_json_lines(const std::filesystem::path& path, const std::string& what,
                                    std::span<const std::string_view> known, Parse&& parse) {
  // /dev/zero would otherwise read as one endless line, an empty FIFO as "0 records".
  io::detail::require_regular_file(path, what + "s file", records_max_file_bytes);
  std::ifstream in(path);
  if (!in) embplan::detail::fail(what + "s", path.string(), "a readable file");
  std::vector<Record> out;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    // Strict (io/json_file.hpp): a duplicate key or bytes after the object are refused.
    nlohmann::json j;
    try {
      j = io::parse_json(line, where);
    } catch (const embplan::error& e) {
      embplan::detail::fail(where, shown_prefix(line),
                            std::string("a JSON object, one record per line (") + e.what() + ")");
    }
    if (!j.is_object()) {
      embplan::detail::fail(where, shown_prefix(line), "a JSON object (one record per line)");
    }
    io::detail::check_keys(j, known, where);
    try {
      out.push_back(parse(j, where));
    } catch (const nlohmann::json::exception& e) {
      embplan::detail::fail(where, shown_prefix(line), "a " + what + " (" + e.what() + ")");
    }
  }
  return out;
}

// Checked reads of one record's fields through io/detail/json_access.hpp, as
// every other reader reads numbers: a fraction, a float past the integer
// range or a value outside [min, max] is an error naming the record's
// file:line, the field path ("records.jsonl:3.dims[0]") and the value.
inline std::int64_t record_int(const nlohmann::json& v, const std::string& field, std::int64_t min,
                               std::int64_t max, std::string_view expected) {
  const std::int64_t x = io::detail::as_int64(v, field);
  if (x < min || x > max) io::detail::fail_value(field, v, expected);
  return x;
}

inline std::int64_t record_int(const nlohmann::json& j, std::string_view key,
                               const std::string& where, std::int64_t min, std::int64_t max,
                               std::string_view expected) {
  return record_int(io::detail::require(j, key, where, expected), embplan::detail::path(where, key),
                    min, max, expected);
}

inline std::vector<std::int64_t> record_ints(const nlohmann::json& j, std::string_view key,
                                             const std::string& where, std::int64_t min,
                                             std::int64_t max, std::string_view expected) {
  const std::string field = embplan::detail::path(where, key);
  const auto& array = io::detail::require(j, key, where, "an array");
  io::detail::require_array(array, field);
  std::vector<std::int64_t> out;
  out.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    out.push_back(record_int(array[i], embplan::detail::path(field, i), min, max, expected));
  }
  return out;
}

// A time in ms: finite and >= 0, or > 0 when `positive`.
inline double record_time(const nlohmann::json& v, const std::string& field, bool positive) {
  const char* expected = positive ? "a finite time > 0" : "a finite time >= 0";
  if (!v.is_number()) io::detail::fail_value(field, v, expected);
  const double t = io::detail::as_double(v, field);
  if (!std::isfinite(t) || t < 0.0 || (positive && t == 0.0)) {
    io::detail::fail_value(field, v, expected);
  }
  return t;
}

inline double record_time(const nlohmann::json& j, std::string_view key, const std::string& where,
                          bool positive = false) {
  return record_time(io::detail::require(j, key, where, "a time in ms"),
                     embplan::detail::path(where, key), positive);
}

inline std::vector<double> record_times(const nlohmann::json& j, std::string_view key,
                                        const std::string& where) {
  const std::string field = embplan::detail::path(where, key);
  const auto& array = io::detail::require(j, key, where, "an array of times in ms");
  io::detail::require_array(array, field);
  std::vector<double> out;
  out.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    out.push_back(record_time(array[i], embplan::detail::path(field, i), false));
  }
  return out;
}

inline std::string record_string(const nlohmann::json& j, std::string_view key,
                                 const std::string& where) {
  return io::detail::as_string(io::detail::require(j, key, where, "a string"),
                               embplan::detail::path(where, key));
}

}  // namespace embplan::inline EMBPLAN_ABI::cost::detail
