#pragma once
// JSON text in and out: parsing with messages that name the source and the
// byte where the parser gave up, and whole-file read / write.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

// Parses `text`; malformed or truncated input throws embplan::error naming
// `source` (a file path, or "<input>"), the byte offset and what the parser
// expected there.
inline nlohmann::json parse_json(std::string_view text, std::string_view source = "<input>") {
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

inline nlohmann::json read_json_file(const std::filesystem::path& file) {
  const std::string name = file.string();
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) {
    embplan::detail::fail("file", name, "an existing JSON file");
  }
  if (std::filesystem::is_directory(file, ec)) {
    embplan::detail::fail("file", name, "a JSON file, not a directory");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) embplan::detail::fail("file", name, "a readable JSON file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) embplan::detail::fail("file", name, "a readable JSON file");
  return parse_json(buffer.str(), name);
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
