#pragma once
// AutoShard's micro-benchmark protocol (KDD'22 §4.1, App. B.1, Algorithms 2-3):
//   warm-up: run the operator W times, results discarded (Alg. 3, lines 2-3);
//   each measured run first flushes the caches with a buffer larger than the
//   last-level cache (Alg. 2, line 2), then times one run (lines 3-5);
//   B runs are measured, the K highest and K lowest dropped, the mean of the
//   rest returned (Alg. 3, lines 6-10).
// The paper leaves W, B and K unnamed; the defaults below are ours, chosen so
// that the CPU meter's figures repeat closely (docs/design/meters.md;
// docs/measuring.md).
//
// A Timer has start() and stop_ms() (stop_ms returns the elapsed milliseconds
// since start). steady_timer is the CPU one; meter/cuda_timer.cuh has
// cuda_event_timer for the GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::meter {

template <class T>
concept timer = requires(T t) {
  t.start();
  { t.stop_ms() } -> std::convertible_to<double>;
};

class steady_timer {
 public:
  void start() noexcept { start_ = std::chrono::steady_clock::now(); }
  double stop_ms() const noexcept {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_{};
};
static_assert(timer<steady_timer>);

// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): what the run cost
// this thread, not counting time it was descheduled. On a machine shared with
// other work the wall clock also counts other processes' time slices; this
// timer does not (it still sees their cache and memory-bandwidth pressure).
// A single-threaded operator only (the CPU meter's kernels are). Falls back to
// the steady clock where POSIX thread CPU clocks are missing.
class thread_cpu_timer {
 public:
  void start() noexcept { start_ms_ = now_ms(); }
  double stop_ms() const noexcept { return now_ms() - start_ms_; }

 private:
  static double now_ms() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
      return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
    }
#endif
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  double start_ms_ = 0.0;
};
static_assert(timer<thread_cpu_timer>);

struct protocol_options {
  int warmup = 2;  // W
  int runs = 10;   // B
  int drop = 2;    // K highest and K lowest dropped
  bool flush = true;

  friend bool operator==(const protocol_options&, const protocol_options&) = default;
};

inline void validate(const protocol_options& o) {
  if (o.warmup < 0) embplan::detail::fail("protocol.warmup", o.warmup, "a count >= 0");
  if (o.runs < 1) embplan::detail::fail("protocol.runs", o.runs, "a count >= 1");
  if (o.drop < 0 || 2 * o.drop >= o.runs) {
    embplan::detail::fail(
        "protocol.drop", o.drop,
        "a count >= 0 leaving at least one of " + std::to_string(o.runs) + " runs");
  }
}

struct measurement {
  double mean_ms = 0.0;             // mean of the kept runs (the protocol's result)
  double stddev_ms = 0.0;           // of the kept runs
  std::vector<double> sorted_ms{};  // every measured run, ascending

  double cv() const noexcept { return mean_ms > 0.0 ? stddev_ms / mean_ms : 0.0; }
};

// Mean and standard deviation of `samples` after dropping the `drop` lowest
// and highest (Alg. 3, lines 9-10).
inline measurement trimmed(std::vector<double> samples, int drop) {
  std::sort(samples.begin(), samples.end());
  measurement m;
  const auto k = static_cast<std::size_t>(drop);
  if (samples.size() > 2 * k) {
    const auto first = samples.begin() + static_cast<std::ptrdiff_t>(k);
    const auto last = samples.end() - static_cast<std::ptrdiff_t>(k);
    const auto n = static_cast<double>(last - first);
    m.mean_ms = std::accumulate(first, last, 0.0) / n;
    double ss = 0.0;
    for (auto it = first; it != last; ++it)
      ss += (*it - m.mean_ms) * (*it - m.mean_ms);
    m.stddev_ms = n > 1.0 ? std::sqrt(ss / (n - 1.0)) : 0.0;
  }
  m.sorted_ms = std::move(samples);
  return m;
}

// Size of the last-level cache from Linux sysfs (the highest cache index of
// cpu0), or 0 when unknown.
inline std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    std::size_t value = 0;
    std::size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      value = value * 10 + static_cast<std::size_t>(text[i] - '0');
      ++i;
    }
    if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) value <<= 10;
    if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) value <<= 20;
    best = std::max(best, value);
  }
  return best;
}

// Evicts the caches by writing a buffer twice the last-level cache (64 MiB
// when the size is unknown) — AutoShard Alg. 2, line 2 ("feed random tensors").
class cache_flusher {
 public:
  explicit cache_flusher(std::size_t bytes = 0)
      : buffer_(bytes != 0 ? bytes
                           : std::max<std::size_t>(2 * last_level_cache_bytes(), 64u << 20)) {}

  void operator()() noexcept {
    // A store to every cache line; the running value keeps it from being elided.
    ++round_;
    for (std::size_t i = 0; i < buffer_.size(); i += 64)
      buffer_[i] = static_cast<unsigned char>(buffer_[i] + round_);
  }
  std::size_t bytes() const noexcept { return buffer_.size(); }

 private:
  std::vector<unsigned char> buffer_;
  unsigned char round_ = 0;
};

namespace detail {
// One run after `before_each`, timed: its milliseconds.
template <class Timer, class Run, class Before>
double timed_run(Timer& t, Run& run, Before& before_each) {
  before_each();
  t.start();
  run();
  return t.stop_ms();
}
}  // namespace detail

// Runs `run` under the protocol. `before_each` runs untimed before every run
// (warm-up included): the cache flush, plus whatever restores the operator's
// inputs (e.g. weights a backward pass updated). `timer` times one run; for
// asynchronous devices its stop_ms must wait for the work (CUDA events do).
template <timer Timer, class Run, class Before>
measurement measure(Timer& t, Run&& run, Before&& before_each, const protocol_options& o) {
  validate(o);
  for (int i = 0; i < o.warmup; ++i) {
    before_each();
    run();
  }
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(o.runs));
  for (int i = 0; i < o.runs; ++i)
    samples.push_back(detail::timed_run(t, run, before_each));
  return trimmed(std::move(samples), o.drop);
}

// measure() with a drift reference: every run of `run` (warm-ups included) is
// paired with a run of `reference`, a fixed operator, right before it, each
// after its own `before_each`. A sample is the run's time scaled by
// reference_ms / the reference's time in its pair, so a machine that turns
// slower or faster for seconds at a time (a shared host's memory bandwidth,
// the clock it grants) moves both times of a pair and cancels in the ratio.
// reference_ms is what the reference takes in the state the results are to be
// expressed in. The K highest and lowest samples are dropped as in measure().
template <timer Timer, class Run, class Reference, class Before>
measurement measure_referenced(Timer& t, Run&& run, Reference&& reference, Before&& before_each,
                               const protocol_options& o, double reference_ms) {
  validate(o);
  if (!(reference_ms > 0.0) || !std::isfinite(reference_ms)) {
    embplan::detail::fail("reference_ms", reference_ms, "a positive, finite time");
  }
  for (int i = 0; i < o.warmup; ++i) {
    before_each();
    reference();
    before_each();
    run();
  }
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(o.runs));
  for (int i = 0; i < o.runs; ++i) {
    const double reference_now = detail::timed_run(t, reference, before_each);
    const double ms = detail::timed_run(t, run, before_each);
    // A clock too coarse to see the reference leaves the sample unscaled.
    samples.push_back(reference_now > 0.0 ? ms * (reference_ms / reference_now) : ms);
  }
  return trimmed(std::move(samples), o.drop);
}

}  // namespace embplan::inline EMBPLAN_ABI::meter
