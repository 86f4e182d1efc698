#include "embplan/meter/protocol.hpp"
#include "support/message_of.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace eb = embplan::meter;

namespace {
using embplan::test::message_of;

// A timer that replays given durations, one per stop.
struct scripted_timer {
  std::vector<double> durations;
  std::size_t next = 0;
  int starts = 0;
  void start() { ++starts; }
  double stop_ms() { return durations.at(next++); }
};
static_assert(eb::timer<scripted_timer>);
}  // namespace

TEST_CASE("trimmed: drops the K highest and lowest, then mean and sample stddev") {
  const auto m = eb::trimmed({9.0, 1.0, 5.0, 4.0, 100.0, 6.0, 0.5}, 2);
  // sorted: 0.5 1 4 5 6 9 100 -> kept 4 5 6
  CHECK(m.mean_ms == doctest::Approx(5.0));
  CHECK(m.stddev_ms == doctest::Approx(1.0));
  CHECK(m.cv() == doctest::Approx(0.2));
  CHECK(m.sorted_ms == std::vector<double>{0.5, 1, 4, 5, 6, 9, 100});
  const auto none = eb::trimmed({2.0, 4.0}, 0);
  CHECK(none.mean_ms == doctest::Approx(3.0));
}

TEST_CASE("measure: W warm-ups untimed, B timed runs, each after before_each") {
  scripted_timer t{.durations = {10, 1, 2, 3, 50}};
  int runs = 0;
  int befores = 0;
  const auto m = eb::measure(
      t, [&] { ++runs; }, [&] { ++befores; },
      eb::protocol_options{.warmup = 2, .runs = 5, .drop = 1});
  CHECK(runs == 7);
  CHECK(befores == 7);
  CHECK(t.starts == 5);
  CHECK(m.mean_ms == doctest::Approx(5.0));  // 2, 3, 10
  CHECK(m.sorted_ms.size() == 5);
}

TEST_CASE("measure_referenced: each run paired with the reference run before it, then scaled") {
  // Pairs (reference, run): (2, 10) (4, 30) (1, 3) (2, 100) (8, 8); W = 1 untimed pair first.
  scripted_timer t{.durations = {2, 10, 4, 30, 1, 3, 2, 100, 8, 8}};
  std::string order;
  const auto m = eb::measure_referenced(
      t, [&] { order += 'r'; }, [&] { order += 'R'; }, [&] { order += 'b'; },
      eb::protocol_options{.warmup = 1, .runs = 5, .drop = 1}, 2.0);
  CHECK(order == "bRbrbRbrbRbrbRbrbRbrbRbr");
  CHECK(t.starts == 10);
  // Samples ms * 2 / reference: 10, 15, 6, 100, 2 -> kept 6, 10, 15.
  CHECK(m.sorted_ms == std::vector<double>{2, 6, 10, 15, 100});
  CHECK(m.mean_ms == doctest::Approx(31.0 / 3.0));
  // A reference the clock reads as 0 leaves its run unscaled.
  scripted_timer coarse{.durations = {0, 7}};
  const auto unscaled = eb::measure_referenced(
      coarse, [] {}, [] {}, [] {}, eb::protocol_options{.warmup = 0, .runs = 1, .drop = 0}, 5.0);
  CHECK(unscaled.mean_ms == 7.0);
}

TEST_CASE("measure_referenced: the reference time must be positive and finite") {
  scripted_timer t{.durations = {1, 1}};
  const eb::protocol_options o{.warmup = 0, .runs = 1, .drop = 0};
  for (const double bad : {0.0, -1.5, std::numeric_limits<double>::infinity()}) {
    const auto msg = message_of([&] {
      (void)eb::measure_referenced(
          t, [] {}, [] {}, [] {}, o, bad);
    });
    CHECK(msg.find("reference_ms") != std::string::npos);
    CHECK(msg.find("positive") != std::string::npos);
  }
  const auto msg = message_of([&] {
    (void)eb::measure_referenced(
        t, [] {}, [] {}, [] {}, o, -1.5);
  });
  CHECK(msg.find("-1.5") != std::string::npos);
}

TEST_CASE("protocol options: bad values name the field") {
  auto msg = message_of([] { eb::validate(eb::protocol_options{.runs = 0}); });
  CHECK(msg.find("protocol.runs") != std::string::npos);
  msg = message_of([] { eb::validate(eb::protocol_options{.runs = 4, .drop = 2}); });
  CHECK(msg.find("protocol.drop") != std::string::npos);
  CHECK(msg.find("2") != std::string::npos);
  msg = message_of([] { eb::validate(eb::protocol_options{.warmup = -1}); });
  CHECK(msg.find("protocol.warmup") != std::string::npos);
  CHECK(msg.find("-1") != std::string::npos);
}

TEST_CASE("thread_cpu_timer counts this thread's work, not its sleep") {
  eb::thread_cpu_timer cpu;
  eb::steady_timer wall;
  cpu.start();
  wall.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  volatile double x = 0.0;
  for (int i = 0; i < 2'000'000; ++i)
    x = x + 1.0;
  const double cpu_ms = cpu.stop_ms();
  const double wall_ms = wall.stop_ms();
  CHECK(wall_ms >= 30.0);
  CHECK(cpu_ms > 0.0);
  CHECK(cpu_ms < wall_ms - 20.0);  // the 30 ms asleep are not counted
}

TEST_CASE("steady_timer and cache_flusher") {
  eb::steady_timer t;
  t.start();
  CHECK(t.stop_ms() >= 0.0);
  eb::cache_flusher small(1 << 16);
  CHECK(small.bytes() == (1u << 16));
  small();
  eb::cache_flusher automatic;
  // Larger than the last-level cache (twice it), and at least 64 MiB.
  CHECK(automatic.bytes() >= (64u << 20));
  CHECK(automatic.bytes() >= 2 * eb::last_level_cache_bytes());
}
