#pragma once
// JSON text in and out: parsing with messages that name the source and the
// byte where the parser gave up, and whole-file read / write.

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/atomic_file.hpp"
#include "embplan/io/detail/input_guard.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

// A key that appears twice in one object, as strict_json_builder found it.
struct json_duplicate_key {
  std::string key;
  std::string path;       // "tables[3].rows"
  std::string outer_key;  // the top-level object's key the duplicate sits under, if any
};

// Builds the parsed value, as nlohmann's own DOM builder does, and throws
// json_duplicate_key for a key that appears twice in one object: JSON does
// not say which copy wins (nlohmann keeps the last, others the first), so
// {"rows": 10, "rows": 1e9} would be read as whichever the reader happened to
// keep. A SAX handler of our own rather than a parser callback: nlohmann's
// callback parser rescans a container's elements at the end of each one
// (quadratic: 100000 tables took 22 s instead of 0.7 s; a safetensors header
// of 40000 tensors, 79 s).
class strict_json_builder {
 public:
  using json = nlohmann::json;

  explicit strict_json_builder(json& root) : root_(root) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }

  bool start_object(std::size_t /*elements*/) {
    open_.push_back({.value = slot(json::object())});
    return true;
  }
  bool key(json::string_t& k) {
    // One lookup: the key's slot is made here, and a key already there is
    // the duplicate (try_emplace leaves `k` as it was then).
    auto& level = open_.back();
    auto [at, added] = level.value->get_ref<json::object_t&>().try_emplace(std::move(k));
    if (!added) fail_duplicate(k);
    level.key = &at->first;
    level.next = &at->second;
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {
    open_.push_back({.value = slot(json::array())});
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const Exception& e) {
    throw e;  // the caller turns it into an embplan::error
  }

 private:
  struct open_value {
    json* value;                       // the object or array being read
    const std::string* key = nullptr;  // an object's key being read
    json* next = nullptr;              // and the slot its value goes to
  };

  // Where the next value goes: the root, the end of the open array, or the
  // slot key() made in the open object. Containers are held by pointer: a
  // parent gets no new element while a child is open, so none moves.
  json* slot(json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    auto& level = open_.back();
    if (level.value->is_array()) {
      level.value->push_back(std::move(v));
      return &level.value->back();
    }
    *level.next = std::move(v);
    return level.next;
  }

  template <class V>
  bool put(V&& v) {
    slot(json(std::forward<V>(v)));
    return true;
  }

  [[noreturn]] void fail_duplicate(const std::string& key) const {
    json_duplicate_key found{.key = key, .path = {}, .outer_key = {}};
    for (std::size_t i = 0; i + 1 < open_.size(); ++i) {
      const auto& open = open_[i];
      found.path = open.value->is_array()
                       ? embplan::detail::path(found.path, open.value->size() - 1)
                       : embplan::detail::path(found.path, *open.key);
    }
    found.path = embplan::detail::path(found.path, key);
    if (open_.size() > 1 && open_.front().key != nullptr) found.outer_key = *open_.front().key;
    throw found;
  }

  json& root_;
  std::vector<open_value> open_;
};

// `text` parsed (nlohmann's strict mode: nothing but whitespace after the
// document); throws nlohmann::json::parse_error or json_duplicate_key.
inline nlohmann::json parse_json_unique_keys(std::string_view text) {
  nlohmann::json value;
  strict_json_builder builder(value);
  nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
  return value;
}

}  // namespace detail

// Parses `text`; malformed or truncated input throws embplan::error naming
// `source` (a file path, or "<input>"), the byte offset and what the parser
// expected there; so does nesting deeper than detail::json_max_depth, a key
// that appears twice in one object (naming the key and its path) and anything
// after the document but whitespace, a NUL byte included.
inline nlohmann::json parse_json(std::string_view text, std::string_view source = "<input>") {
  detail::check_json_depth(text, source);
  detail::check_json_no_nul(text, source);
  try {
    return detail::parse_json_unique_keys(text);
  } catch (const detail::json_duplicate_key& e) {
    std::string msg(source);
    msg += ": duplicate key ";
    msg += embplan::detail::quoted_prefix(e.key);
    msg += " at ";
    msg += embplan::detail::quoted_prefix(e.path);
    msg += ": expected each key at most once in an object (JSON does not say which copy wins)";
    throw error(msg);
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

// Writes `value` indented by 2, with a trailing newline, atomically: a write
// that fails part-way leaves the previous file as it was
// (detail::write_file_atomically). Invalid UTF-8 in strings is replaced
// rather than thrown on.
inline void write_json_file(const std::filesystem::path& file, const nlohmann::json& value) {
  detail::write_file_atomically(
      file, value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace embplan::inline EMBPLAN_ABI::io
