#include "embplan/meter/cpu_meter.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "embplan/core/topology.hpp"
#include "embplan/cost/evaluate.hpp"
#include "support/message_of.hpp"
#include "support/meter_table.hpp"

namespace eb = embplan::meter;

namespace {
using embplan::test::message_of;

embplan::table_spec table(std::int64_t rows, std::int32_t dim, double pf) {
  return embplan::test::meter_table(rows, dim, pf);
}

// Tiny and quick: the meter's mechanics, not its figures.
const eb::meter_options quick{.batch_size = 64,
                              .seed = 1,
                              .protocol = {.warmup = 1, .runs = 3, .drop = 1, .flush = false},
                              .max_weight_bytes = std::uint64_t{1} << 20};
}  // namespace

TEST_CASE("measure_shard: forward, backward and total measured; rows capped to the budget") {
  const std::vector<embplan::table_spec> tables{table(5000, 16, 4.0), table(100000, 8, 2.0)};
  const auto m = eb::measure_shard(tables, quick);
  CHECK(m.forward.mean_ms > 0.0);
  CHECK(m.backward.mean_ms > 0.0);
  CHECK(m.total.mean_ms > 0.0);
  CHECK(m.total.sorted_ms.size() == 3);
  // 5000x16 + 100000x8 floats = 3.5 MB > 1 MiB: both tables scaled by one factor.
  REQUIRE(m.rows.size() == 2);
  CHECK(m.weight_bytes <= quick.max_weight_bytes);
  CHECK(m.rows[0] < 5000);
  CHECK(static_cast<double>(m.rows[1]) / static_cast<double>(m.rows[0]) ==
        doctest::Approx(20.0).epsilon(0.01));
  // Lookups: B x pooling factor per table.
  CHECK(m.lookups == 64 * 4 + 64 * 2);

  auto only_total = quick;
  only_total.separate = false;
  const auto t = eb::measure_shard(tables, only_total);
  CHECK(t.total.mean_ms > 0.0);
  CHECK(t.forward.sorted_ms.empty());

  auto half_tables = tables;
  for (auto& x : half_tables)
    x.weight_dtype = embplan::dtype::fp16;
  CHECK(eb::measure_shard(half_tables, quick).total.mean_ms > 0.0);
}

TEST_CASE("capped_rows keeps small shards whole") {
  const std::vector<embplan::table_spec> tables{table(100, 4, 1.0), table(10, 4, 1.0)};
  CHECK(eb::detail::capped_rows(tables, 1 << 20) == std::vector<std::int64_t>{100, 10});
}

TEST_CASE("measure_shard: bad input names the field and value") {
  std::vector<embplan::table_spec> tables{table(100, 4, 1.0), table(100, 4, 1.0)};
  tables[1].weight_dtype = embplan::dtype::int8;
  auto msg = message_of([&] { (void)eb::measure_shard(tables, quick); });
  CHECK(msg.find("shard.tables[1].dtype") != std::string::npos);
  CHECK(msg.find("int8") != std::string::npos);
  tables[1].weight_dtype = embplan::dtype::fp16;
  msg = message_of([&] { (void)eb::measure_shard(tables, quick); });
  CHECK(msg.find("shard.tables[1].dtype") != std::string::npos);
  CHECK(msg.find("fp16") != std::string::npos);
  tables[1].weight_dtype = embplan::dtype::fp32;
  tables[0].dim = 0;
  msg = message_of([&] { (void)eb::measure_shard(tables, quick); });
  CHECK(msg.find("shard.tables[0].dim") != std::string::npos);
  auto bad = quick;
  bad.batch_size = 0;
  msg = message_of([&] { (void)eb::measure_shard(tables, bad); });
  CHECK(msg.find("meter.batch_size") != std::string::npos);
  bad = quick;
  bad.max_weight_bytes = 10;
  msg = message_of([&] { (void)eb::measure_shard(tables, bad); });
  CHECK(msg.find("meter.max_weight_bytes") != std::string::npos);
  CHECK(msg.find("10") != std::string::npos);
  bad = quick;
  bad.repeats = 0;
  msg = message_of([&] { (void)eb::measure_shard(tables, bad); });
  CHECK(msg.find("meter.repeats") != std::string::npos);
  CHECK(msg.find("0") != std::string::npos);
  bad = quick;
  bad.flush_bytes = 1000;
  msg = message_of([&] { (void)eb::measure_shard(tables, bad); });
  CHECK(msg.find("meter.flush_bytes") != std::string::npos);
  CHECK(msg.find("1000") != std::string::npos);
}

TEST_CASE("shard_meter: the cache-flush buffer is flush_bytes, else twice the last-level cache") {
  auto o = quick;
  o.protocol.flush = true;
  o.flush_bytes = std::uint64_t{3} << 20;
  eb::shard_meter sized(o);
  CHECK(sized.flush_buffer_bytes() == (std::size_t{3} << 20));
  const std::vector<embplan::table_spec> tables{table(3000, 16, 4.0)};
  CHECK(sized.measure(tables).total.mean_ms > 0.0);  // flushed before every run
  o.flush_bytes = 0;
  const eb::shard_meter automatic(o);
  CHECK(automatic.flush_buffer_bytes() ==
        std::max<std::size_t>(2 * eb::last_level_cache_bytes(), std::size_t{64} << 20));
  o.protocol.flush = false;  // no flush, no buffer
  CHECK(eb::shard_meter(o).flush_buffer_bytes() == 0);
}

TEST_CASE("shard_meter: thread CPU clock, and the median of repeated protocol means") {
  const std::vector<embplan::table_spec> tables{table(3000, 16, 4.0), table(500, 8, 2.0)};
  for (const auto clock : {eb::meter_clock::wall, eb::meter_clock::thread_cpu}) {
    auto o = quick;
    o.clock = clock;
    o.repeats = 3;
    const auto m = eb::measure_shard(tables, o);
    // The kept measurement is one whole protocol run: its own B runs, a
    // trimmed mean among them.
    REQUIRE(m.total.sorted_ms.size() == 3);
    CHECK(m.total.mean_ms > 0.0);
    CHECK(m.total.mean_ms == m.total.sorted_ms[1]);
    CHECK(m.forward.mean_ms > 0.0);
    CHECK(m.backward.mean_ms > 0.0);
  }
}

TEST_CASE("shard_meter: the drift reference, calibrated or given") {
  const std::vector<embplan::table_spec> tables{table(3000, 16, 4.0), table(500, 8, 2.0)};
  auto o = quick;
  o.reference = true;
  eb::shard_meter calibrating(o);
  const double calibrated = calibrating.reference_ms();
  CHECK(calibrated > 0.0);
  CHECK(calibrating.reference_ms() == calibrated);  // measured once, then kept
  const auto m = calibrating.measure(tables);
  CHECK(calibrating.reference_ms() == calibrated);
  REQUIRE(m.total.sorted_ms.size() == 3);
  CHECK(m.total.mean_ms > 0.0);
  CHECK(m.forward.mean_ms > 0.0);
  CHECK(m.backward.mean_ms > 0.0);
  CHECK(eb::calibrate_reference(quick) > 0.0);

  o.reference_ms = 2.5;
  eb::shard_meter given(o);
  CHECK(given.reference_ms() == 2.5);
  CHECK(given.measure(tables).total.mean_ms > 0.0);
  CHECK(given.reference_ms() == 2.5);
  CHECK(eb::shard_meter(quick).reference_ms() == 0.0);  // off
  CHECK(eb::reference_shard().size() == 1);
  CHECK(eb::reference_shard().front().rows == std::int64_t{1} << 20);
}

TEST_CASE("shard_meter: a bad reference time names the field and value") {
  auto o = quick;
  o.reference_ms = -3.0;
  auto msg = message_of([&] { eb::shard_meter meter(o); });
  CHECK(msg.find("meter.reference_ms") != std::string::npos);
  CHECK(msg.find("-3") != std::string::npos);
  o.reference_ms = std::numeric_limits<double>::quiet_NaN();
  msg = message_of([&] { eb::shard_meter meter(o); });
  CHECK(msg.find("meter.reference_ms") != std::string::npos);
  CHECK(msg.find("nan") != std::string::npos);
  // A plan's devices must share one scale: cpu_meter_cost needs the time given.
  embplan::task t;
  t.tables = {table(2000, 16, 4.0)};
  t.cluster = embplan::uniform_topology(1);
  t.batch_size = 64;
  embplan::plan p;
  p.shards = {embplan::whole_table(t, 0, 0)};
  auto referenced = quick;
  referenced.reference = true;
  msg =
      message_of([&] { (void)embplan::evaluate(t, p, eb::cpu_meter_cost{.options = referenced}); });
  CHECK(msg.find("meter.reference_ms") != std::string::npos);
  CHECK(msg.find("calibrate_reference") != std::string::npos);
  referenced.reference_ms = 1.0;
  CHECK(embplan::evaluate(t, p, eb::cpu_meter_cost{.options = referenced}).devices.size() == 1);
}

TEST_CASE("cpu_meter_cost: a plan measured device by device, comm from the analytic model") {
  embplan::task t;
  t.tables = {table(2000, 16, 4.0), table(3000, 8, 8.0), table(1000, 32, 1.0)};
  t.cluster = embplan::uniform_topology(2);
  t.batch_size = 256;
  embplan::plan p;
  p.shards = {embplan::whole_table(t, 0, 0), embplan::whole_table(t, 1, 1)};
  // table 2 split by columns over both devices
  embplan::shard left = embplan::whole_table(t, 2, 0);
  embplan::shard right = left;
  left.col_end = 16;
  right.col_begin = 16;
  right.device = 1;
  p.shards.push_back(left);
  p.shards.push_back(right);
  const eb::cpu_meter_cost meter{.options = quick};
  const auto cost = embplan::evaluate(t, p, meter);
  REQUIRE(cost.devices.size() == 2);
  for (const auto& d : cost.devices) {
    CHECK(d.fwd_compute_ms > 0.0);
    CHECK(d.bwd_compute_ms > 0.0);
    CHECK(d.bwd_comm_ms > 0.0);
  }
  const auto piece = embplan::piece_table(t, right);
  CHECK(piece.dim == 16);
  CHECK(piece.rows == 1000);
  CHECK(meter.name() == "cpu-meter");
  CHECK(meter.shard_cost(t, left) > 0.0);

  // One meter priced every device and was put back; copies share it. A caller
  // that turned the parts off still gets them (the meter prices the parts).
  CHECK(meter.meters->idle() == 1);
  const eb::cpu_meter_cost copy = meter;
  CHECK(embplan::evaluate(t, p, copy).devices.at(1).fwd_compute_ms > 0.0);
  CHECK(meter.meters->idle() == 1);
  eb::meter_options pair_only = quick;
  pair_only.separate = false;
  const eb::cpu_meter_cost parts_off{.options = pair_only};
  const auto c = embplan::evaluate(t, p, parts_off);
  CHECK(c.devices.at(0).fwd_compute_ms > 0.0);
  CHECK(c.devices.at(0).bwd_compute_ms > 0.0);
}

TEST_CASE("measure_shard: together = false times only the parts; without the parts, the pair") {
  const std::vector<embplan::table_spec> tables{table(5000, 16, 4.0)};
  eb::meter_options o = quick;
  o.together = false;
  const auto parts = eb::measure_shard(tables, o);
  CHECK(parts.forward.sorted_ms.size() == 3);
  CHECK(parts.backward.sorted_ms.size() == 3);
  CHECK(parts.total.sorted_ms.empty());
  o.separate = false;  // nothing would be timed: the pair is
  const auto pair = eb::measure_shard(tables, o);
  CHECK(pair.forward.sorted_ms.empty());
  CHECK(pair.total.sorted_ms.size() == 3);
  o = quick;
  const auto all = eb::measure_shard(tables, o);
  CHECK(all.forward.sorted_ms.size() == 3);
  CHECK(all.total.sorted_ms.size() == 3);
}

TEST_CASE("shard_meter: one meter, many shards (buffers reused across sizes and dtypes)") {
  eb::shard_meter meter(quick);
  const std::vector<embplan::table_spec> small{table(300, 4, 1.0)};
  const std::vector<embplan::table_spec> large{table(4000, 32, 3.0), table(2000, 12, 2.0)};
  auto halves = large;
  for (auto& t : halves)
    t.weight_dtype = embplan::dtype::fp16;
  const auto a = meter.measure(large);
  const auto b = meter.measure(small);
  const auto c = meter.measure(halves);
  const auto d = meter.measure(large, 99);
  CHECK(a.lookups == 64 * 3 + 64 * 2);
  CHECK(b.lookups == 64);
  CHECK(c.weight_bytes * 2 == a.weight_bytes);
  CHECK(d.lookups == a.lookups);
  for (const auto* m : {&a, &b, &c, &d})
    CHECK(m->total.mean_ms > 0.0);
}
