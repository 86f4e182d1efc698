#pragma once
// JSON written piece by piece, so that a document of a million tables or
// shards never exists whole in memory (docs/design.md, "Principles": memory
// grows with what is kept, not with what is produced). The text is exactly
// what nlohmann's dump(2) writes for the same value: the caller gives an
// object's keys in nlohmann::json's order (std::map's: sorted by bytes), and
// each value() is a whole nlohmann::json dumped at the writer's depth. Bytes
// go through a buffer to an atomic_file, so the target changes only when the
// document is finished.

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/io/detail/atomic_file.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io::detail {

class json_writer {
 public:
  explicit json_writer(atomic_file& out) : out_(out) { buffer_.reserve(flush_bytes + 4096); }

  json_writer(const json_writer&) = delete;
  json_writer& operator=(const json_writer&) = delete;

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }

  // The next member's key; its value follows (value(), begin_object(), ...).
  void key(std::string_view k) {
    if (open_.empty() || !open_.back().object || open_.back().keyed) {
      throw error("json_writer: a key outside an object, or two keys in a row (a bug)");
    }
    next_item();
    buffer_ += nlohmann::json(k).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    buffer_ += ": ";
    open_.back().keyed = true;
  }

  // A whole value: indented as nlohmann's dump(2) indents it at this depth.
  void value(const nlohmann::json& v) {
    start_value();
    const std::string text = v.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    // A dumped string holds no raw newline (JSON escapes it), so every
    // newline is the pretty printer's and takes this depth's indent.
    const std::string newline = "\n" + std::string(2 * open_.size(), ' ');
    std::size_t from = 0;
    for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', from)) {
      buffer_.append(text, from, at - from);
      buffer_ += newline;
      from = at + 1;
    }
    buffer_.append(text, from, std::string::npos);
    maybe_flush();
  }

  // Writes, inside an open object, the members of `object` and the streamed
  // ones merged in nlohmann::json's key order: a streamed member is its key
  // followed by what its function writes (one value, or a container written
  // piece by piece). A streamed key must not also be one of `object`'s.
  using member_writer = std::function<void(json_writer&)>;
  void members(const nlohmann::json& object,
               std::vector<std::pair<std::string, member_writer>> streamed) {
    std::sort(streamed.begin(), streamed.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    auto next = streamed.begin();
    const auto flush_streamed_before = [&](const std::string* key) {
      for (; next != streamed.end() && (key == nullptr || next->first < *key); ++next) {
        this->key(next->first);
        next->second(*this);
      }
    };
    for (auto it = object.begin(); it != object.end(); ++it) {
      const std::string& k = it.key();
      flush_streamed_before(&k);
      if (next != streamed.end() && next->first == k) {
        throw error("json_writer: member " + k + " given twice (a bug)");
      }
      key(k);
      value(*it);
    }
    flush_streamed_before(nullptr);
  }

  // Ends the document with a newline, as write_json_file does, and writes
  // what is buffered; the caller then commits the file.
  void finish() {
    if (!open_.empty()) throw error("json_writer: finished with a container open (a bug)");
    buffer_ += '\n';
    out_.write(buffer_);
    buffer_.clear();
  }

 private:
  static constexpr std::size_t flush_bytes = std::size_t{1} << 20;

  struct level {
    bool object = false;
    bool keyed = false;     // an object's key written, its value not yet
    std::size_t items = 0;  // members or elements so far
  };

  void indent(std::size_t depth) {
    buffer_ += '\n';
    buffer_.append(2 * depth, ' ');
  }
  // Before an array element or an object key: the separator and indent.
  void next_item() {
    auto& l = open_.back();
    if (l.items++ > 0) buffer_ += ',';
    indent(open_.size());
  }
  // Before any value: in an object, after its key; in an array, a new element.
  void start_value() {
    if (open_.empty()) return;
    auto& l = open_.back();
    if (l.object) {
      if (!l.keyed) throw error("json_writer: an object member without a key (a bug)");
      l.keyed = false;
    } else {
      next_item();
    }
  }
  void open(char bracket) {
    start_value();
    buffer_ += bracket;
    open_.push_back({.object = bracket == '{'});
  }
  void close(char bracket) {
    if (open_.empty() || open_.back().object != (bracket == '}') || open_.back().keyed) {
      throw error("json_writer: a close that matches no open container (a bug)");
    }
    const bool any = open_.back().items > 0;
    open_.pop_back();
    if (any) indent(open_.size());
    buffer_ += bracket;
    maybe_flush();
  }
  void maybe_flush() {
    if (buffer_.size() < flush_bytes) return;
    out_.write(buffer_);
    buffer_.clear();
  }

  atomic_file& out_;
  std::string buffer_;
  std::vector<level> open_;
};

}  // namespace embplan::inline EMBPLAN_ABI::io::detail
