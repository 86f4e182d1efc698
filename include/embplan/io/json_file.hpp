#pragma once
// JSON text in and out: parsing with messages that name the source and the
// byte where the parser gave up, and whole-file read / write.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/atomic_file.hpp"
#include "embplan/io/detail/input_guard.hpp"
#include "embplan/io/detail/json_writer.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

// A key that appears twice in one object, as strict_json_builder found it.
struct json_duplicate_key {
  std::string key;
  std::string path;       // "tables[3].rows"
  std::string outer_key;  // the top-level object's key the duplicate sits under, if any
};

// One step of the path from the document's root to an array being opened:
// an object's key, or an array's index.
struct json_step {
  std::string_view key;  // empty for an index
  std::size_t index = 0;
  bool is_index() const { return key.empty(); }
};

// What strict_json_builder keeps by default: every value.
struct keep_every_value {
  static constexpr bool streams_any = false;
};

// Builds the parsed value, as nlohmann's own DOM builder does, and throws
// json_duplicate_key for a key that appears twice in one object: JSON does
// not say which copy wins (nlohmann keeps the last, others the first), so
// {"rows": 10, "rows": 1e9} would be read as whichever the reader happened to
// keep. A SAX handler of our own rather than a parser callback: nlohmann's
// callback parser rescans a container's elements at the end of each one
// (quadratic: 100000 tables took 22 s instead of 0.7 s; a safetensors header
// of 40000 tensors, 79 s).
//
// With a Sink that streams (Sink::streams_any), each array being opened is
// offered to sink.streams(path), which returns an id to stream its elements
// or std::nullopt to keep them; a streamed array's elements are handed to
// sink.take(id, index, element) as each is complete and a null is kept in
// their place, so a million tables are never values at once.
template <class Sink = keep_every_value>
class strict_json_builder {
 public:
  using json = nlohmann::json;

  explicit strict_json_builder(json& root, Sink* sink = nullptr) : root_(root), sink_(sink) {}

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
    auto [at, added] = level.value->template get_ref<json::object_t&>().try_emplace(std::move(k));
    if (!added) fail_duplicate(k);
    level.key = &at->first;
    level.next = &at->second;
    return true;
  }
  bool end_object() {
    close();
    return true;
  }
  bool start_array(std::size_t /*elements*/) {
    json* array = slot(json::array());
    open_.push_back({.value = array});
    if constexpr (Sink::streams_any) {
      if (sink_ != nullptr) open_.back().stream = sink_->streams(path_to_open());
    }
    return true;
  }
  bool end_array() {
    close();
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const Exception& e) {
    throw e;  // the caller turns it into an embplan::error
  }

 private:
  struct open_value {
    json* value;                                       // the object or array being read
    const std::string* key = nullptr;                  // an object's key being read
    json* next = nullptr;                              // and the slot its value goes to
    std::optional<std::size_t> stream = std::nullopt;  // an array whose elements go to the sink
  };

  // The path from the root to the innermost open value.
  std::span<const json_step> path_to_open() {
    steps_.clear();
    for (std::size_t i = 0; i + 1 < open_.size(); ++i) {
      const auto& o = open_[i];
      if (o.value->is_array()) {
        steps_.push_back({.key = {}, .index = o.value->size() - 1});
      } else {
        steps_.push_back({.key = *o.key});
      }
    }
    return steps_;
  }

  // Closes the innermost open value; where it is an element of a streamed
  // array, hands it to the sink.
  void close() {
    json* done = open_.back().value;
    open_.pop_back();
    if constexpr (Sink::streams_any) hand_over(done);
  }

  void hand_over(json* element) {
    if (open_.empty() || !open_.back().stream) return;
    const auto& parent = open_.back();
    sink_->take(*parent.stream, parent.value->size() - 1, std::move(*element));
    *element = nullptr;
  }

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
    json* value = slot(json(std::forward<V>(v)));
    if constexpr (Sink::streams_any) hand_over(value);
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
  Sink* sink_;
  std::vector<open_value> open_;
  std::vector<json_step> steps_;
};

// The bytes [first, last) parsed by strict_json_builder, with `sink` where
// given (nlohmann's strict mode: nothing but whitespace after the document);
// throws nlohmann::json::parse_error or json_duplicate_key.
template <class Sink = keep_every_value, class Iterator>
nlohmann::json build_json(Iterator first, Iterator last, Sink* sink = nullptr) {
  nlohmann::json value;
  strict_json_builder<Sink> builder(value, sink);
  nlohmann::json::sax_parse(std::move(first), std::move(last), &builder);
  return value;
}

// `text` parsed (build_json without a sink).
inline nlohmann::json parse_json_unique_keys(std::string_view text) {
  return build_json(text.begin(), text.end());
}

// A regular file's bytes for nlohmann's parser, read a block at a time, with
// read_json_file's guards applied to each block as it arrives: no NUL byte,
// no nesting past json_max_depth (each naming the file and the byte).
class json_file_source {
 public:
  explicit json_file_source(const std::filesystem::path& file)
      : name_(file.string())
      , bytes_(require_regular_file(file, "JSON file", json_max_file_bytes))
      , in_(file, std::ios::binary)
      , depth_(name_) {
    if (!in_) embplan::detail::fail("file", name_, "a readable JSON file");
    block_.resize(static_cast<std::size_t>(std::min<std::uint64_t>(bytes_, block_bytes)));
  }

  const std::string& name() const { return name_; }

  // The next byte into `c`; false at the end of the file.
  bool next(char& c) {
    if (pos_ == len_ && !refill()) return false;
    c = block_[pos_++];
    return true;
  }

  // An input iterator over the bytes, for nlohmann::json::sax_parse; every
  // copy reads the one source, and only the end iterator is compared with.
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = const char&;

    iterator() = default;
    explicit iterator(json_file_source& s) : source_(&s) { ++*this; }
    reference operator*() const { return c_; }
    iterator& operator++() {
      at_end_ = !source_->next(c_);
      return *this;
    }
    iterator operator++(int) {
      auto before = *this;
      ++*this;
      return before;
    }
    bool operator==(const iterator& other) const { return at_end_ == other.at_end_; }

   private:
    json_file_source* source_ = nullptr;
    char c_ = 0;
    bool at_end_ = true;
  };

 private:
  static constexpr std::uint64_t block_bytes = std::uint64_t{1} << 20;

  bool refill() {
    if (read_ == bytes_) return false;  // exactly the bytes the size said
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes_ - read_, block_bytes));
    in_.read(block_.data(), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in_.gcount()) != n) {
      embplan::detail::fail("file", name_, "a readable JSON file (short read)");
    }
    const std::string_view piece(block_.data(), n);
    const auto first_byte = static_cast<std::size_t>(read_) + 1;
    check_json_no_nul(piece, name_, first_byte);
    depth_.feed(piece, first_byte);
    read_ += n;
    pos_ = 0;
    len_ = n;
    return true;
  }

  std::string name_;
  std::uint64_t bytes_;
  std::ifstream in_;
  json_depth_check depth_;
  std::vector<char> block_;
  std::uint64_t read_ = 0;
  std::size_t pos_ = 0;
  std::size_t len_ = 0;
};

// Turns what the parser or builder threw into an embplan::error naming
// `source`.
template <class Parse>
decltype(auto) with_parse_messages(std::string_view source, Parse&& parse) {
  try {
    return std::forward<Parse>(parse)();
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

}  // namespace detail

// Parses `text`; malformed or truncated input throws embplan::error naming
// `source` (a file path, or "<input>"), the byte offset and what the parser
// expected there; so does nesting deeper than detail::json_max_depth, a key
// that appears twice in one object (naming the key and its path) and anything
// after the document but whitespace, a NUL byte included.
inline nlohmann::json parse_json(std::string_view text, std::string_view source = "<input>") {
  detail::check_json_depth(text, source);
  detail::check_json_no_nul(text, source);
  return detail::with_parse_messages(source, [&] { return detail::parse_json_unique_keys(text); });
}

// Reads a regular file of at most detail::json_max_file_bytes: a directory,
// a device such as /dev/zero or a FIFO is refused, naming the path.
inline nlohmann::json read_json_file(const std::filesystem::path& file) {
  return parse_json(detail::read_regular_file(file, "JSON file", detail::json_max_file_bytes),
                    file.string());
}

// Reads `file` as read_json_file does, with its guards and messages, but
// block by block, handing the elements of the arrays `sink` streams to it as
// each is complete (detail::strict_json_builder): the value returned holds a
// null in their place. A file of a million tables then costs the memory of
// what the sink keeps of them, not of its text and a JSON value of each.
template <class Sink>
nlohmann::json read_json_file_streamed(const std::filesystem::path& file, Sink& sink) {
  detail::json_file_source source(file);
  return detail::with_parse_messages(source.name(), [&] {
    return detail::build_json(detail::json_file_source::iterator(source),
                              detail::json_file_source::iterator(), &sink);
  });
}

// parse_json of `text`, handing the elements of the arrays `sink` streams to
// it as read_json_file_streamed does (the same reading from memory).
template <class Sink>
nlohmann::json parse_json_streamed(std::string_view text, std::string_view source, Sink& sink) {
  detail::check_json_depth(text, source);
  detail::check_json_no_nul(text, source);
  return detail::with_parse_messages(
      source, [&] { return detail::build_json(text.begin(), text.end(), &sink); });
}

// Writes `value` indented by 2, with a trailing newline, atomically: a write
// that fails part-way leaves the previous file as it was
// (detail::write_file_atomically). Invalid UTF-8 in strings is replaced
// rather than thrown on.
inline void write_json_file(const std::filesystem::path& file, const nlohmann::json& value) {
  detail::write_file_atomically(
      file, value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

// Writes the document `write(json_writer&)` produces, with a trailing
// newline, atomically, as write_json_file does: for documents too large to
// build as a value first (a plan or pool of a million tables).
template <class Write>
void write_json_file_streamed(const std::filesystem::path& file, Write&& write) {
  detail::atomic_file out(file);
  detail::json_writer w(out);
  std::forward<Write>(write)(w);
  w.finish();
  out.commit();
}

}  // namespace embplan::inline EMBPLAN_ABI::io
