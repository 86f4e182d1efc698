#pragma once
// What reaches a terminal from the CLI is text: a byte that is a control
// character (other than newline and tab) or not part of valid UTF-8 is shown
// as \xNN. A table or task name with an escape sequence in it cannot move the
// cursor, recolour or retitle the user's terminal, or hide a line. stderr's
// messages go through printable(); stdout through printable_buf, which
// main.cpp installs under std::cout.
#include <cstddef>
#include <cstdio>
#include <streambuf>
#include <string>
#include <string_view>

namespace embplan_cli {

namespace detail {

// The length of the UTF-8 sequence `lead` starts (2-4), or 1 for ASCII and
// for a byte that starts none.
inline std::size_t utf8_length(unsigned char lead) {
  return lead >= 0xF0 && lead <= 0xF4   ? 4
         : lead >= 0xE0 && lead <= 0xEF ? 3
         : lead >= 0xC2 && lead <= 0xDF ? 2
                                        : 1;
}

inline bool shown_as_is(unsigned char c, bool keep_layout) {
  return (c >= 0x20 && c < 0x7F) || (keep_layout && (c == '\n' || c == '\t'));
}

inline void append_escaped(std::string& out, unsigned char c) {
  char hex[5];
  std::snprintf(hex, sizeof hex, "\\x%02X", c);
  out += hex;
}

}  // namespace detail

// `s` with every byte that is not printable ASCII or valid UTF-8 as \xNN;
// `keep_layout`: newlines and tabs stay.
inline std::string printable(std::string_view s, bool keep_layout = false) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = detail::utf8_length(c);
    if (n > 1 && i + n <= s.size()) {
      bool ok = true;
      for (std::size_t k = 1; k < n; ++k)
        ok = ok && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (ok) {
        out.append(s.substr(i, n));
        i += n;
        continue;
      }
    }
    if (detail::shown_as_is(c, keep_layout)) {
      out += static_cast<char>(c);
    } else {
      detail::append_escaped(out, c);
    }
    ++i;
  }
  return out;
}

// A stream buffer that passes what is written to `target` through
// printable(..., keep_layout = true); an incomplete UTF-8 sequence waits for
// its next bytes (or the flush, where it is escaped).
class printable_buf : public std::streambuf {
 public:
  explicit printable_buf(std::streambuf* target) : target_(target) {}

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    put(static_cast<unsigned char>(traits_type::to_char_type(ch)));
    return ch;
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i)
      put(static_cast<unsigned char>(s[i]));
    return n;
  }

  int sync() override {
    drain();
    return target_->pubsync();
  }

 private:
  void put(unsigned char c) {
    if (!pending_.empty()) {
      if ((c & 0xC0) == 0x80) {
        pending_ += static_cast<char>(c);
        if (pending_.size() == detail::utf8_length(static_cast<unsigned char>(pending_[0]))) {
          write(pending_);
          pending_.clear();
        }
        return;
      }
      drain();  // the sequence broke off: its bytes escaped
    }
    if (detail::utf8_length(c) > 1) {
      pending_ += static_cast<char>(c);
      return;
    }
    if (detail::shown_as_is(c, true)) {
      const char ch = static_cast<char>(c);
      target_->sputn(&ch, 1);
    } else {
      std::string escaped;
      detail::append_escaped(escaped, c);
      write(escaped);
    }
  }

  void drain() {
    std::string escaped;
    for (const char c : pending_)
      detail::append_escaped(escaped, static_cast<unsigned char>(c));
    pending_.clear();
    write(escaped);
  }

  void write(const std::string& s) {
    target_->sputn(s.data(), static_cast<std::streamsize>(s.size()));
  }

  std::streambuf* target_;
  std::string pending_;
};

}  // namespace embplan_cli
