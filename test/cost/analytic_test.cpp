#include "embplan/cost/analytic.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/evaluate.hpp"

#include "support/message_of.hpp"

namespace {

// One device with round bandwidths: 100 GB/s = 1e8 bytes/ms DRAM, 1e9 cache.
embplan::task small_task(int tables = 1) {
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bandwidth_gbps = 100.0;
  dev.cache_bandwidth_gbps = 1000.0;
  t.cluster = embplan::uniform_topology(1, dev);
  t.batch_size = 1000;
  for (int i = 0; i < tables; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 1000;
    s.dim = 16;
    s.pooling_factor = 2.0;
    s.reuse_hist[0] = 1.0;  // every index seen once: all reads go to DRAM
    t.tables.push_back(s);
  }
  return t;
}

}  // namespace

TEST_CASE("roofline of a single table, by hand") {
  const auto t = small_task();
  const embplan::analytic_cost model;
  // lookups = 1000 x 2 = 2000; row = 16 x 4 = 64 bytes (two sectors);
  // read = 2000 x 64 / 1e8 = 0.00128 ms; write = 1000 x 16 x 4 / 1e8 = 0.00064 ms;
  // issue = 2000 x 0.6 ns = 0.0012 ms.
  const auto s = embplan::whole_table(t, 0, 0);
  CHECK(model.piece_forward_ms(t, s, 0) == doctest::Approx(0.00312).epsilon(1e-12));
  CHECK(model.shard_cost(t, s) == doctest::Approx(3 * 0.00312).epsilon(1e-12));
  const std::vector<embplan::shard> group{s};
  const auto c = model.compute(t, group, 0);
  CHECK(c.fwd_ms == doctest::Approx(0.02 + 0.00312).epsilon(1e-12));
  CHECK(c.bwd_ms == doctest::Approx(2 * (0.02 + 0.00312)).epsilon(1e-12));
  CHECK(model.name() == "analytic");
}

TEST_CASE("repeated indices are read from the cache") {
  auto t = small_task();
  // Half the unique indices seen once, half twice: mean reuse 1.5, so of the
  // 2000 lookups 1333.3 touch distinct rows and the 666.7 repeats hit the
  // cache, which holds all 666.7 twice-seen rows (42.7 KB of 5.5 MiB).
  t.tables[0].reuse_hist = {};
  t.tables[0].reuse_hist[0] = 0.5;
  t.tables[0].reuse_hist[1] = 0.5;
  REQUIRE(embplan::mean_reuse(t.tables[0].reuse_hist) == 1.5);
  const double hits = 2000.0 / 3.0;
  const double read = 64.0 * ((2000.0 - hits) / 1e8 + hits / 1e9);
  const embplan::analytic_cost model{{.output_write_factor = 0.0, .lookup_overhead_ns = 0.0}};
  CHECK(model.piece_forward_ms(t, embplan::whole_table(t, 0, 0), 0) ==
        doctest::Approx(read).epsilon(1e-12));
  CHECK(read < 0.00128);

  // A cache of 100 rows keeps only 100 of the twice-seen rows: 100 hits.
  t.cluster.devices[0].cache_bytes = 100 * 64;
  const double small_read = 64.0 * ((2000.0 - 100.0) / 1e8 + 100.0 / 1e9);
  CHECK(model.piece_forward_ms(t, embplan::whole_table(t, 0, 0), 0) ==
        doctest::Approx(small_read).epsilon(1e-12));
  // No cache: every lookup reads DRAM.
  t.cluster.devices[0].cache_bytes = 0;
  CHECK(model.piece_forward_ms(t, embplan::whole_table(t, 0, 0), 0) ==
        doctest::Approx(2000.0 * 64.0 / 1e8).epsilon(1e-12));
}

TEST_CASE("rows are read in whole 32-byte sectors") {
  auto t = small_task(4);
  t.tables[0].dim = 4;   // 16 bytes -> one sector
  t.tables[1].dim = 8;   // 32 bytes -> one sector
  t.tables[2].dim = 12;  // 48 bytes -> two sectors
  t.tables[3].dim = 16;  // 64 bytes -> two sectors
  const embplan::analytic_cost reads_only{{.output_write_factor = 0.0, .lookup_overhead_ns = 0.0}};
  const auto cost = [&](std::size_t i) {
    return reads_only.piece_forward_ms(t, embplan::whole_table(t, i, 0), 0);
  };
  CHECK(cost(0) == cost(1));
  CHECK(cost(2) == cost(3));
  CHECK(cost(2) == doctest::Approx(2 * cost(0)).epsilon(1e-12));
  // So halving a 16-wide table costs more than half (NeuroShard Observation 1).
  const embplan::analytic_cost model;
  CHECK(model.shard_cost(t, embplan::whole_table(t, 0, 0)) >
        0.5 * model.shard_cost(t, embplan::whole_table(t, 1, 0)));
  // fp16 rows of 8 columns are 16 bytes: still one sector.
  t.tables[1].weight_dtype = embplan::dtype::fp16;
  CHECK(cost(1) == cost(0));
}

TEST_CASE("a fused group costs less than its tables alone; backward is a multiple of forward") {
  const auto t = small_task(3);
  const embplan::analytic_cost model;
  std::vector<embplan::shard> group;
  double singles = 0.0;
  for (std::size_t i = 0; i < 3; ++i) {
    group.push_back(embplan::whole_table(t, i, 0));
    const std::vector<embplan::shard> one{group.back()};
    singles += model.compute(t, one, 0).fwd_ms;
  }
  const auto fused = model.compute(t, group, 0);
  CHECK(fused.fwd_ms < singles);
  CHECK(singles - fused.fwd_ms == doctest::Approx(2 * 0.02).epsilon(1e-9));  // two launches saved
  CHECK(fused.bwd_ms == doctest::Approx(2.0 * fused.fwd_ms).epsilon(1e-12));
  const embplan::analytic_cost slower{{.backward_factor = 3.0, .kernel_launch_ms = 0.0}};
  const auto c = slower.compute(t, group, 0);
  CHECK(c.bwd_ms == doctest::Approx(3.0 * c.fwd_ms).epsilon(1e-12));
  CHECK(c.fwd_ms == doctest::Approx(3 * 0.00312).epsilon(1e-12));
  const auto empty = model.compute(t, {}, 0);
  CHECK(empty.fwd_ms == 0.0);
  CHECK(empty.bwd_ms == 0.0);
}

TEST_CASE("all-to-all of balanced dims is symmetric, by hand") {
  embplan::task t = small_task();
  t.cluster = embplan::uniform_topology(4);  // one host, 12 GB/s links, 0.05 ms latency
  t.batch_size = 65536;
  const std::vector<std::int64_t> dims(4, 64);
  const std::vector<double> start(4, 0.0);
  std::vector<embplan::comm_cost> out(4);
  embplan::analytic_cost{}.communication(t, dims, start, out);
  // Each device sends 64 columns x 16384 samples x 4 bytes to 3 peers and
  // receives as much: 12,582,912 bytes / 12e6 bytes per ms.
  const double expected = 0.05 + 3.0 * 64 * 16384 * 4 / 12e6;
  for (const auto& c : out) {
    CHECK(c.fwd_ms == doctest::Approx(expected).epsilon(1e-12));
    CHECK(c.bwd_ms == doctest::Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("two hosts: the slower link class decides, by hand") {
  embplan::task t = small_task();
  t.cluster = embplan::uniform_topology(4, {}, 2);  // hosts {0, 1} and {2, 3}
  t.batch_size = 4096;                              // 1024 samples per device: 4096 bytes a column
  const std::vector<std::int64_t> dims{64, 32, 16, 0};
  const std::vector<double> start(4, 0.0);
  std::vector<embplan::comm_cost> out(4);
  embplan::analytic_cost{}.communication(t, dims, start, out);
  // Device 0: intra sends 64 x 4096 to one peer, receives 32 x 4096;
  // inter sends 64 x 4096 to two peers, receives (16 + 0) x 4096.
  const double d0 = 0.05 + std::max(64.0 * 4096 / 12e6, 2 * 64.0 * 4096 / 12.5e6);
  // Device 3 sends nothing; receives 16 x 4096 intra and 96 x 4096 inter.
  const double d3 = 0.05 + std::max(16.0 * 4096 / 12e6, 96.0 * 4096 / 12.5e6);
  CHECK(out[0].bwd_ms == doctest::Approx(d0).epsilon(1e-12));
  CHECK(out[3].bwd_ms == doctest::Approx(d3).epsilon(1e-12));
  CHECK(out[0].fwd_ms == out[0].bwd_ms);
}

TEST_CASE("hosts of 3 devices and a partial last host: each device sees its own host") {
  embplan::task t = small_task();
  t.cluster = embplan::uniform_topology(7, {}, 3);  // hosts {0, 1, 2}, {3, 4, 5}, {6}
  t.batch_size = 7 * 1024;
  const std::vector<std::int64_t> dims{64, 32, 16, 8, 128, 4, 40};
  const std::vector<double> start(7, 0.0);
  std::vector<embplan::comm_cost> out(7);
  embplan::analytic_cost{}.communication(t, dims, start, out);
  // By hand, from host_of: the devices on d's host and their column sum.
  const double column = 1024.0 * 4;  // bytes per column to one peer
  double total = 0.0;
  for (const auto v : dims)
    total += static_cast<double>(v);
  for (std::size_t d = 0; d < 7; ++d) {
    CAPTURE(d);
    double host_dim = 0.0;
    double host_devices = 0.0;
    for (std::size_t e = 0; e < 7; ++e) {
      if (t.cluster.host_of(e) != t.cluster.host_of(d)) continue;
      host_dim += static_cast<double>(dims[e]);
      host_devices += 1.0;
    }
    const double own = static_cast<double>(dims[d]);
    const double intra = std::max((host_devices - 1.0) * own, host_dim - own) * column / 12e6;
    const double inter = std::max((7.0 - host_devices) * own, total - host_dim) * column / 12.5e6;
    CHECK(out[d].bwd_ms == doctest::Approx(0.05 + std::max(intra, inter)).epsilon(1e-12));
  }
}

TEST_CASE("start skew adds exactly the wait for the last starter") {
  embplan::task t = small_task();
  t.cluster = embplan::uniform_topology(4);
  const std::vector<std::int64_t> dims{64, 16, 32, 128};
  const std::vector<double> zero(4, 0.0);
  const std::vector<double> start{0.0, 1.5, 0.25, 0.0};
  std::vector<embplan::comm_cost> base(4);
  std::vector<embplan::comm_cost> skewed(4);
  const embplan::analytic_cost model;
  model.communication(t, dims, zero, base);
  model.communication(t, dims, start, skewed);
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(skewed[d].bwd_ms == base[d].bwd_ms);
    CHECK(skewed[d].fwd_ms == doctest::Approx(base[d].fwd_ms + (1.5 - start[d])).epsilon(1e-12));
  }
  CHECK(skewed[1].fwd_ms == base[1].fwd_ms);  // the last starter waits for no one
}

// What forward_is_skew_plus_backward() promises the pricers
// (concepts/cost_model.hpp), bit for bit: random dims and starts, one host,
// several, a partial last one, and one device.
TEST_CASE("the forward all-to-all is the start skew plus the backward one, bit for bit") {
  const embplan::analytic_cost model;
  embplan::task t = small_task();
  CHECK(model.forward_is_skew_plus_backward(t));
  embplan::rng gen(5);
  for (const auto& [devices, per_host] : std::vector<std::pair<std::size_t, std::int32_t>>{
           {1, 1}, {4, 4}, {8, 8}, {8, 2}, {7, 3}, {16, 4}}) {
    CAPTURE(devices);
    CAPTURE(per_host);
    t.cluster = embplan::uniform_topology(devices, {}, per_host);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<std::int64_t> dims(devices);
      std::vector<double> start(devices);
      for (std::size_t d = 0; d < devices; ++d) {
        dims[d] = 4 * gen.between(0, 100);
        start[d] = gen.uniform(0.0, 3.0);
      }
      if (trial % 5 == 0) start.assign(devices, 0.0);
      std::vector<embplan::comm_cost> zero_start(devices), out(devices);
      model.communication(t, dims, std::vector<double>(devices, 0.0), zero_start);
      model.communication(t, dims, start, out);
      const double last = *std::max_element(start.begin(), start.end());
      for (std::size_t d = 0; d < devices; ++d) {
        CHECK(out[d].bwd_ms == zero_start[d].bwd_ms);
        CHECK(out[d].fwd_ms == (last - start[d]) + zero_start[d].bwd_ms);
        CHECK(!std::signbit(out[d].fwd_ms));
      }
    }
  }
}

TEST_CASE("transfer_ms of a device's own, host and total sums is communication()'s, bit for bit") {
  const embplan::analytic_cost model;
  embplan::task t = small_task();
  CHECK(model.all_to_all_is_analytic(t));
  embplan::rng gen(11);
  for (const auto& [devices, per_host] : std::vector<std::pair<std::size_t, std::int32_t>>{
           {2, 2}, {4, 4}, {8, 8}, {8, 1}, {8, 2}, {7, 3}, {16, 4}}) {
    CAPTURE(devices);
    CAPTURE(per_host);
    t.cluster = embplan::uniform_topology(devices, {}, per_host);
    t.cluster.collective_latency_ms = 0.05;
    t.cluster.inter_host_bandwidth_gbps = 12.5;
    const auto terms = embplan::analytic_cost::all_to_all_of(t);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<std::int64_t> dims(devices);
      for (auto& d : dims)
        d = 4 * gen.between(0, 300);
      std::vector<embplan::comm_cost> out(devices);
      model.communication(t, dims, std::vector<double>(devices, 0.0), out);
      std::int64_t total = 0;
      for (const auto d : dims)
        total += d;
      const auto per = static_cast<std::size_t>(per_host);
      for (std::size_t d = 0; d < devices; ++d) {
        const std::size_t first = d / per * per;
        const std::size_t last = std::min(devices, first + per);
        std::int64_t host = 0;
        for (std::size_t k = first; k < last; ++k)
          host += dims[k];
        const double got = embplan::analytic_cost::transfer_ms(
            terms, static_cast<double>(dims[d]), static_cast<double>(host),
            static_cast<double>(last - first), static_cast<double>(total));
        CHECK(got == out[d].bwd_ms);
      }
    }
  }
}

TEST_CASE("one device has no communication") {
  const auto t = small_task();
  const std::vector<std::int64_t> dims{512};
  const std::vector<double> start{4.0};
  std::vector<embplan::comm_cost> out(1, embplan::comm_cost{.fwd_ms = 9.0, .bwd_ms = 9.0});
  embplan::analytic_cost{}.communication(t, dims, start, out);
  CHECK(out[0].fwd_ms == 0.0);
  CHECK(out[0].bwd_ms == 0.0);
}

TEST_CASE("bad options and spans name the field and the value") {
  const auto t = small_task();
  const auto s = embplan::whole_table(t, 0, 0);
  const auto sector = embplan::test::message_of(
      [&] { (void)embplan::analytic_cost{{.sector_bytes = 0}}.shard_cost(t, s); });
  CHECK(sector.find("analytic_cost.sector_bytes' = 0") != std::string::npos);
  const auto backward = embplan::test::message_of([&] {
    const std::vector<embplan::shard> g{s};
    (void)embplan::analytic_cost{{.backward_factor = -1.5}}.compute(t, g, 0);
  });
  CHECK(backward.find("analytic_cost.backward_factor' = -1.5") != std::string::npos);
  const auto launch = embplan::test::message_of(
      [&] { (void)embplan::analytic_cost{{.kernel_launch_ms = NAN}}.shard_cost(t, s); });
  CHECK(launch.find("analytic_cost.kernel_launch_ms' = nan") != std::string::npos);
  const auto device =
      embplan::test::message_of([&] { (void)embplan::analytic_cost{}.compute(t, {}, 3); });
  CHECK(device.find("field 'device' = 3") != std::string::npos);
  const auto length = embplan::test::message_of([&] {
    const std::vector<std::int64_t> dims{1, 2};
    const std::vector<double> start{0.0};
    std::vector<embplan::comm_cost> out(1);
    embplan::analytic_cost{}.communication(t, dims, start, out);
  });
  CHECK(length.find("field 'dim_sum.size' = 2: expected one entry per device (1)") !=
        std::string::npos);
}

TEST_CASE("MetaSyn-like tasks cost tens of milliseconds (NeuroShard Table 1: 17-48 ms)") {
  // 4 GPUs of the default kind; rows ~4M, pooling ~15, dims 16..128, B = 65536;
  // a round-robin placement of 10 and of 60 tables.
  for (const int tables : {10, 60}) {
    embplan::task t;
    t.cluster = embplan::uniform_topology(4);
    embplan::rng gen(7);
    for (int i = 0; i < tables; ++i) {
      embplan::table_spec s;
      s.name = "t" + std::to_string(i);
      s.rows = gen.between(1'000'000, 8'000'000);
      s.dim = static_cast<std::int32_t>(16 << gen.between(0, 3));
      s.pooling_factor = gen.uniform(5.0, 25.0);
      s.reuse_hist[0] = 0.6;
      s.reuse_hist[2] = 0.3;
      s.reuse_hist[5] = 0.1;
      t.tables.push_back(s);
    }
    embplan::plan p;
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      p.shards.push_back(embplan::whole_table(t, i, i % 4));
    const double ms = embplan::evaluate(t, p, embplan::analytic_cost{}).max_ms();
    CHECK(ms > 2.0);
    CHECK(ms < 100.0);
  }
}

TEST_CASE("the cache keeps the hottest rows first") {
  // 2000 unique rows: 1990 seen once, 10 seen 12.5 times on average (bin 4).
  embplan::reuse_histogram h{};
  h[0] = 0.995;
  h[4] = 0.005;
  const double lookups = 2000.0 * embplan::mean_reuse(h);
  // Room for 10 rows: exactly the hot ones, each re-read 11.5 times.
  CHECK(embplan::cost::detail::cache_hits(h, lookups, 10.0) == doctest::Approx(10.0 * 11.5));
  // Room for 5: half of them.
  CHECK(embplan::cost::detail::cache_hits(h, lookups, 5.0) == doctest::Approx(5.0 * 11.5));
  // Rows seen once never hit, however large the cache.
  CHECK(embplan::cost::detail::cache_hits(h, lookups, 1e9) == doctest::Approx(10.0 * 11.5));
  // An unused table's all-zero histogram: no hits.
  CHECK(embplan::cost::detail::cache_hits(embplan::reuse_histogram{}, 100.0, 1e9) == 0.0);
}

TEST_CASE("the per-lookup overhead must be a finite time >= 0") {
  const auto t = small_task();
  const embplan::analytic_cost bad{{.lookup_overhead_ns = -1.0}};
  const auto msg =
      embplan::test::message_of([&] { (void)bad.shard_cost(t, embplan::whole_table(t, 0, 0)); });
  CHECK(msg.find("analytic_cost.lookup_overhead_ns") != std::string::npos);
  CHECK(msg.find("-1") != std::string::npos);
}

TEST_CASE(
    "memory tiers: hbm is piece_forward_ms, host and uvm_caching read misses at host bandwidth") {
  auto t = small_task();
  const embplan::analytic_cost model;
  const auto s = embplan::whole_table(t, 0, 0);
  using embplan::memory_tier;
  const embplan::tier_placement hbm{};
  const embplan::tier_placement host{.tier = memory_tier::host};
  const embplan::tier_placement half{.tier = memory_tier::uvm_caching, .load_factor = 0.5};
  CHECK(model.tiered_piece_forward_ms(t, s, 0, hbm) == model.piece_forward_ms(t, s, 0));
  CHECK(model.tiered_shard_cost(t, s, hbm) == model.shard_cost(t, s));
  // host: 2000 lookups x 64 bytes / 25e6 bytes/ms = 0.00512 ms, plus the
  // write (0.00064) and issue (0.0012) terms as in hbm.
  CHECK(model.tiered_piece_forward_ms(t, s, 0, host) == doctest::Approx(0.00696).epsilon(1e-12));
  CHECK(model.tiered_shard_cost(t, s, host) == doctest::Approx(3 * 0.00696).epsilon(1e-12));
  // Rows read once: a cache saves nothing.
  CHECK(model.tiered_piece_forward_ms(t, s, 0, half) == doctest::Approx(0.00696).epsilon(1e-12));

  // Half the unique rows read twice: 1333.3 unique rows, 666.7 of them twice.
  // 500 slots hold 500 twice-read rows: 500 hits, 1500 misses; the L2 holds
  // the same 500 rows, so the hits come from it.
  t.tables[0].reuse_hist = {};
  t.tables[0].reuse_hist[0] = 0.5;
  t.tables[0].reuse_hist[1] = 0.5;
  const embplan::analytic_cost reads_only{{.output_write_factor = 0.0, .lookup_overhead_ns = 0.0}};
  CHECK(reads_only.tiered_piece_forward_ms(t, s, 0, half) ==
        doctest::Approx(64.0 * (500.0 / 1e9 + 1500.0 / 25e6)).epsilon(1e-12));
  // No L2: the hits read HBM.
  t.cluster.devices[0].cache_bytes = 0;
  CHECK(reads_only.tiered_piece_forward_ms(t, s, 0, half) ==
        doctest::Approx(64.0 * (500.0 / 1e8 + 1500.0 / 25e6)).epsilon(1e-12));
  // A faster host link makes misses cheaper.
  const embplan::analytic_cost fast{
      {.output_write_factor = 0.0, .lookup_overhead_ns = 0.0, .host_bandwidth_gbps = 50.0}};
  CHECK(fast.tiered_piece_forward_ms(t, s, 0, half) ==
        doctest::Approx(64.0 * (500.0 / 1e8 + 1500.0 / 50e6)).epsilon(1e-12));
}

TEST_CASE("memory tiers: cost falls as the cache grows, from host to hbm") {
  auto t = small_task();
  t.tables[0].rows = 100'000;
  t.tables[0].pooling_factor = 50.0;
  t.tables[0].reuse_hist = {};
  for (std::size_t k = 0; k < 10; ++k)
    t.tables[0].reuse_hist[k] = 0.1;
  const embplan::analytic_cost model;
  const auto s = embplan::whole_table(t, 0, 0);
  using embplan::memory_tier;
  double last = model.tiered_piece_forward_ms(t, s, 0, {.tier = memory_tier::host});
  for (double lf = 0.001; lf <= 1.0; lf *= 1.5) {
    const double c = model.tiered_piece_forward_ms(
        t, s, 0, {.tier = memory_tier::uvm_caching, .load_factor = lf});
    CAPTURE(lf);
    CHECK(c <= last);
    last = c;
  }
  const double full = model.tiered_piece_forward_ms(
      t, s, 0, {.tier = memory_tier::uvm_caching, .load_factor = 1.0});
  // Every row cached still pays its first touch over the host link.
  CHECK(model.piece_forward_ms(t, s, 0) < full);
  // A row shard caches its own rows: half the rows, half the lookups.
  embplan::shard half_rows = s;
  half_rows.row_end = half_rows.row_begin + 50'000;
  CHECK(model.tiered_piece_forward_ms(t, half_rows, 0, {.tier = memory_tier::host}) <
        model.tiered_piece_forward_ms(t, s, 0, {.tier = memory_tier::host}));
}

TEST_CASE("memory tiers: a bad host bandwidth or load factor is named") {
  const auto t = small_task();
  const auto s = embplan::whole_table(t, 0, 0);
  for (double bad : {0.0, -3.0}) {
    const embplan::analytic_cost model{{.host_bandwidth_gbps = bad}};
    const auto msg = embplan::test::message_of(
        [&] { (void)model.tiered_shard_cost(t, s, {.tier = embplan::memory_tier::host}); });
    CHECK(msg.find("analytic_cost.host_bandwidth_gbps") != std::string::npos);
    CHECK(msg.find("a finite bandwidth > 0") != std::string::npos);
  }
  const embplan::analytic_cost model;
  CHECK_THROWS_WITH_AS(
      (void)model.tiered_piece_forward_ms(
          t, s, 0, {.tier = embplan::memory_tier::uvm_caching, .load_factor = 0.0}),
      doctest::Contains("field 'placement.load_factor' = 0"), embplan::error);
  CHECK_THROWS_WITH_AS((void)model.tiered_piece_forward_ms(t, s, 3, {}),
                       doctest::Contains("field 'device' = 3"), embplan::error);
}

TEST_CASE("memory tiers: a table's own tier prices its pieces; hbm's figures are unchanged") {
  auto t = small_task();
  const embplan::analytic_cost model;
  const auto s = embplan::whole_table(t, 0, 0);
  const double hbm_ms = model.piece_forward_ms(t, s, 0);
  const auto hbm_compute = model.compute(t, std::span<const embplan::shard>(&s, 1), 0);
  const embplan::tier_placement host{.tier = embplan::memory_tier::host};
  const embplan::tier_placement half{.tier = embplan::memory_tier::uvm_caching, .load_factor = 0.5};
  for (const auto& where : {host, half}) {
    auto u = t;
    u.tables[0].placement = where;
    CHECK(model.piece_forward_ms(u, s, 0) == model.tiered_piece_forward_ms(t, s, 0, where));
    CHECK(model.shard_cost(u, s) == model.tiered_shard_cost(t, s, where));
    // An explicit placement overrides the table's: hbm is hbm's figure.
    CHECK(model.tiered_piece_forward_ms(u, s, 0, {}) == hbm_ms);
    const auto c = model.compute(u, std::span<const embplan::shard>(&s, 1), 0);
    CHECK(c.fwd_ms ==
          model.options.kernel_launch_ms + model.tiered_piece_forward_ms(t, s, 0, where));
    CHECK(c.fwd_ms > hbm_compute.fwd_ms);
  }
}
