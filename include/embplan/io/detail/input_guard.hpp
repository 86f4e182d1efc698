#pragma once
// Guards shared by every reader of user files (JSON, JSON lines,
// safetensors): only regular files are read, since /dev/zero never ends and a
// FIFO may block; no more than a stated number of bytes is loaded; and JSON
// text nested past a fixed depth is refused before a recursive parser or
// printer sees it, where it would overflow the stack (docs/design.md,
// "Principles": special files and absurd sizes are a clear error before any
// work).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io::detail {

// Real inputs nest a handful of levels (a task: task.tables[i].dtype);
// nlohmann's parser and dump() recurse once per level.
inline constexpr std::size_t json_max_depth = 128;

// Far above any task, pool or plan; refused before anything is allocated.
inline constexpr std::uint64_t json_max_file_bytes = std::uint64_t{1} << 30;

// Refuses JSON text nested deeper than json_max_depth, fed in pieces (a file
// read block by block): names `source` and the byte (1-based) where the limit
// was passed. Brackets inside strings do not count. No recursion, no
// allocation.
class json_depth_check {
 public:
  explicit json_depth_check(std::string_view source) : source_(source) {}

  // The next piece of the text, whose first byte is byte `first_byte`.
  void feed(std::string_view text, std::size_t first_byte) {
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '[' || c == '{') {
        if (++depth_ > json_max_depth) fail(first_byte + i);
      } else if ((c == ']' || c == '}') && depth_ > 0) {
        --depth_;
      }
    }
  }

 private:
  [[noreturn]] void fail(std::size_t byte) const {
    std::string msg(source_);
    msg += ": JSON nested deeper than ";
    msg += std::to_string(json_max_depth);
    msg += " levels at byte ";
    msg += std::to_string(byte);
    msg += ": expected at most ";
    msg += std::to_string(json_max_depth);
    msg += " nested arrays and objects (the depth limit)";
    throw error(msg);
  }

  std::string_view source_;
  std::size_t depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

// Refuses `text` when arrays and objects nest deeper than json_max_depth,
// naming `source` and the byte (1-based, counted from `first_byte`) where the
// limit was passed (json_depth_check on the whole text).
inline void check_json_depth(std::string_view text, std::string_view source,
                             std::size_t first_byte = 1) {
  json_depth_check(source).feed(text, first_byte);
}

// Refuses a NUL byte anywhere in `text`, naming `source` and its byte
// (1-based, counted from `first_byte`). No JSON text holds one: inside a
// string it must be written \u0000, and outside one it is not whitespace.
// nlohmann's lexer takes a NUL for the end of its input, so "{...}\0junk"
// would otherwise read as the object alone.
inline void check_json_no_nul(std::string_view text, std::string_view source,
                              std::size_t first_byte = 1) {
  const auto nul = text.find('\0');
  if (nul == std::string_view::npos) return;
  std::string msg(source);
  msg += ": a NUL byte at byte ";
  msg += std::to_string(first_byte + nul);
  msg += nul == 0 ? ": expected JSON text"
                  : ": expected JSON text and nothing after the document but whitespace";
  throw error(msg);
}

// The size of `file` after checking that it exists, is a regular file (not a
// directory, device, FIFO or socket) and holds at most `max_bytes`. `what`
// names the kind of file in messages ("JSON file").
inline std::uint64_t require_regular_file(const std::filesystem::path& file, std::string_view what,
                                          std::uint64_t max_bytes) {
  const std::string name = file.string();
  const std::string kind(what);
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (!std::filesystem::exists(status)) {
    embplan::detail::fail("file", name, "an existing " + kind);
  }
  if (std::filesystem::is_directory(status)) {
    embplan::detail::fail("file", name, "a " + kind + "; a directory is not a regular file");
  }
  if (!std::filesystem::is_regular_file(status)) {
    embplan::detail::fail("file", name,
                          "a " + kind + "; a device, pipe or socket is not a regular file");
  }
  const std::uint64_t bytes = std::filesystem::file_size(file, ec);
  if (ec) embplan::detail::fail("file", name, "a readable " + kind);
  if (bytes > max_bytes) {
    embplan::detail::fail("file", name,
                          "a " + kind + " of at most " + std::to_string(max_bytes) +
                              " bytes (it has " + std::to_string(bytes) + ")");
  }
  return bytes;
}

// The whole of `file`, after require_regular_file: exactly the bytes its size
// says, so a file that grows while read cannot make the read unbounded.
inline std::string read_regular_file(const std::filesystem::path& file, std::string_view what,
                                     std::uint64_t max_bytes) {
  const std::uint64_t bytes = require_regular_file(file, what, max_bytes);
  std::ifstream in(file, std::ios::binary);
  if (!in) embplan::detail::fail("file", file.string(), "a readable " + std::string(what));
  std::string text(static_cast<std::size_t>(bytes), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (static_cast<std::uint64_t>(in.gcount()) != bytes) {
    embplan::detail::fail("file", file.string(),
                          "a readable " + std::string(what) + " (short read)");
  }
  return text;
}

}  // namespace embplan::inline EMBPLAN_ABI::io::detail
