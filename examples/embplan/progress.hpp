#pragma once
// The progress line of `embplan`'s long runs (compare, collect, observe,
// train): "compare: 37/1200 tasks, 12 s, ETA 5 min", rewritten in place on
// stderr. Only on a terminal: with stderr redirected (a log, a test) or
// --quiet, it writes nothing, so logs hold results, not carriage returns.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>

namespace embplan_cli {

class progress {
 public:
  using clock = std::chrono::steady_clock;

  // `enabled`: false for --quiet (and for every MPI rank but 0).
  progress(std::string label, std::string unit, std::size_t total, bool enabled,
           std::size_t already_done = 0)
      : label_(std::move(label))
      , unit_(std::move(unit))
      , total_(total)
      , done_(already_done)
      , start_done_(already_done)
      , on_(enabled && ::isatty(::fileno(stderr)) == 1)
      , start_(clock::now()) {}
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;
  ~progress() { clear(); }

  bool shown() const noexcept { return on_; }

  // Text shown after the count (e.g. "last 12.3 ms"), from the next redraw on.
  void note(std::string text) { note_ = std::move(text); }

  void advance(std::size_t n = 1) {
    done_ += n;
    if (!on_) return;
    const auto now = clock::now();
    // A few redraws a second are enough, and the last one always.
    if (drawn_ && done_ < total_ && now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    std::fprintf(stderr, "\r%s\x1b[K", line().c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  // Erases the line, before the program writes something else to the
  // terminal; the next advance() draws it again.
  void clear() {
    if (!drawn_) return;
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }

  // "compare: 37/1200 tasks, 12 s, ETA 5 min", from the rate of this run.
  std::string line() const {
    const double elapsed = std::chrono::duration<double>(clock::now() - start_).count();
    const auto done_here = static_cast<double>(done_ - start_done_);
    std::string out = label_ + ": " + std::to_string(done_) + "/" + std::to_string(total_) + " " +
                      unit_ + (note_.empty() ? "" : ", " + note_) + ", " + duration_text(elapsed);
    if (done_here > 0.0 && done_ < total_) {
      out += ", ETA " + duration_text(elapsed / done_here * static_cast<double>(total_ - done_));
    }
    return out;
  }

  // "12 s", "5 min", "2 h 05 min"
  static std::string duration_text(double seconds) {
    const auto s = static_cast<long>(std::max(0.0, seconds) + 0.5);
    if (s < 100) return std::to_string(s) + " s";
    const long min = (s + 30) / 60;
    if (min < 100) return std::to_string(min) + " min";
    const long rest = min % 60;
    return std::to_string(min / 60) + " h " + (rest < 10 ? "0" : "") + std::to_string(rest) +
           " min";
  }

 private:
  std::string label_;
  std::string unit_;
  std::string note_;
  std::size_t total_;
  std::size_t done_;
  std::size_t start_done_;
  bool on_;
  bool drawn_ = false;
  clock::time_point start_;
  clock::time_point last_{};
};

}  // namespace embplan_cli
