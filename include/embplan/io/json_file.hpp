#pragma once
// JSON text in and out: parsing with messages that name the source and the
// byte where the parser gave up, and whole-file read / write.

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/input_guard.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

// Parses `text`; malformed or truncated input throws embplan::error naming
// `source` (a file path, or "<input>"), the byte offset and what the parser
// expected there; so does nesting deeper than detail::json_max_depth.
inline nlohmann::json parse_json(std::string_view text, std::string_view source = "<input>") {
  detail::check_json_depth(text, source);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 9:
    // syntax error while parsing value - unexpected end of input; expected ...";
    // the bracketed tag means nothing to a user.
    std::string_view what = e.what();
    if (const auto tag_end = what.find("] "); tag_end != std::string_view::npos) {
      what.remove_prefix(tag_end + 2);
    }
    std::string msg(source);
    msg += ": invalid JSON at byte ";  // nlohmann counts from 1
    msg += std::to_string(e.byte);
    msg += ": ";
    msg += what;
    throw error(msg);
  } catch (const nlohmann::json::exception& e) {
    std::string msg(source);
    msg += ": invalid JSON: ";
    msg += e.what();
    throw error(msg);
  }
}

// Reads a regular file of at most detail::json_max_file_bytes: a directory,
// a device such as /dev/zero or a FIFO is refused, naming the path.
inline nlohmann::json read_json_file(const std::filesystem::path& file) {
  return parse_json(detail::read_regular_file(file, "JSON file", detail::json_max_file_bytes),
                    file.string());
}

// Writes `value` indented by 2, with a trailing newline. Invalid UTF-8 in
// strings is replaced rather than thrown on.
inline void write_json_file(const std::filesystem::path& file, const nlohmann::json& value) {
  const std::string name = file.string();
  const std::string text =
      value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) embplan::detail::fail("file", name, "a writable path");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) embplan::detail::fail("file", name, "a writable path (the write failed)");
}

}  // namespace embplan::inline EMBPLAN_ABI::io
