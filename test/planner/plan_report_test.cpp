// plan_report: per device memory and cost, the critical path, imbalance, the
// pieces that drive the bottleneck, per table its sharding; checked on a task
// whose analytic costs are worked out by hand.

#include "embplan/plan_report.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "embplan/cost/analytic.hpp"

#include "support/message_of.hpp"

namespace {

using doctest::Approx;

// Analytic costs by hand: no launch, no per-lookup overhead, no output write,
// no cache; 1,200 bags and 38.4 MB/s of memory, so a 32-byte row (dim 8 fp32)
// read once per bag costs 1 ms forward per unit of pooling factor, a 64-byte
// row (dim 16) 2 ms; backward = 2 x forward. Three devices in one host at
// 16 MB/s: a column exchanged with one peer (1,200 / 3 bags x 4 bytes) takes
// 0.1 ms; no collective latency.
embplan::analytic_cost by_hand() {
  return embplan::analytic_cost{{.backward_factor = 2.0,
                                 .kernel_launch_ms = 0.0,
                                 .sector_bytes = 32,
                                 .output_write_factor = 0.0,
                                 .lookup_overhead_ns = 0.0}};
}

embplan::task hand_task() {
  embplan::task t;
  t.name = "report";
  t.batch_size = 1200;
  const auto table = [](std::string name, std::int32_t dim, double pooling) {
    embplan::table_spec s;
    s.name = std::move(name);
    s.rows = 1000;
    s.dim = dim;
    s.pooling_factor = pooling;
    return s;
  };
  t.tables = {table("t0", 8, 4.0),  table("t1", 8, 2.0), table("t2", 16, 1.0), table("t3", 8, 1.0),
              table("t4", 16, 1.0), table("t5", 8, 2.0), table("t6", 8, 0.5)};
  t.cluster = embplan::uniform_topology(3, embplan::device_spec{.memory_bytes = 200'000,
                                                                .memory_bandwidth_gbps = 0.0384,
                                                                .cache_bandwidth_gbps = 1.0,
                                                                .cache_bytes = 0});
  t.cluster.intra_host_bandwidth_gbps = 0.016;
  t.cluster.collective_latency_ms = 0.0;
  return t;
}

// cuda:0: t0, t1, t3, t4 columns [0, 8), t5 rows [0, 500), t6 (forward
// 4 + 2 + 1 + 1 + 1 + 0.5 ms, 48 columns, 176,000 bytes);
// cuda:1: t2, t4 columns [8, 16), t5 rows [500, 1000) (2 + 1 + 1 ms, 32
// columns, 112,000 bytes); cuda:2 holds nothing.
embplan::plan hand_plan(const embplan::task& t) {
  embplan::plan p;
  const auto whole = [&](std::uint32_t table, std::uint32_t device) {
    p.shards.push_back(embplan::whole_table(t, table, device));
  };
  whole(0, 0);
  whole(1, 0);
  whole(2, 1);
  whole(3, 0);
  p.shards.push_back({.table = 4, .device = 0, .col_begin = 0, .col_end = 8, .row_end = 1000});
  p.shards.push_back({.table = 4, .device = 1, .col_begin = 8, .col_end = 16, .row_end = 1000});
  p.shards.push_back({.table = 5, .device = 0, .col_end = 8, .row_begin = 0, .row_end = 500});
  p.shards.push_back({.table = 5, .device = 1, .col_end = 8, .row_begin = 500, .row_end = 1000});
  whole(6, 0);
  return p;
}

}  // namespace

TEST_CASE("plan_report: per device memory used and free, and the cost parts, by hand") {
  const auto t = hand_task();
  const auto p = hand_plan(t);
  const auto r = embplan::plan_report_of(t, p, by_hand());
  REQUIRE(r.devices.size() == 3);

  // Memory: rows x dim x 4 bytes per piece.
  CHECK(r.devices[0].hbm_used_bytes == 176'000);
  CHECK(r.devices[1].hbm_used_bytes == 112'000);
  CHECK(r.devices[0].hbm_free_bytes == 24'000);
  CHECK(r.devices[1].hbm_free_bytes == 88'000);
  for (const auto& d : r.devices) {
    CHECK(d.hbm_capacity_bytes == 200'000);
    CHECK(d.dram_used_bytes == 0);
  }
  CHECK(r.devices[0].shards == 6);
  CHECK(r.devices[1].shards == 3);
  CHECK(r.devices[0].dim_sum == 48);
  CHECK(r.devices[1].dim_sum == 32);

  // Compute: forward 9.5 and 4 ms, backward twice that.
  CHECK(r.devices[0].cost.fwd_compute_ms == Approx(9.5));
  CHECK(r.devices[0].cost.bwd_compute_ms == Approx(19.0));
  CHECK(r.devices[1].cost.fwd_compute_ms == Approx(4.0));
  CHECK(r.devices[1].cost.bwd_compute_ms == Approx(8.0));
  // Backward all-to-all: max(2 peers x own columns, the others' columns) x 0.1 ms.
  CHECK(r.devices[0].cost.bwd_comm_ms == Approx(9.6));  // max(96, 32)
  CHECK(r.devices[1].cost.bwd_comm_ms == Approx(6.4));  // max(64, 48)
  // Forward all-to-all: the same transfer plus the wait for the last starter,
  // each starting at compute + backward comm (38.1, 18.4, 8 ms).
  CHECK(r.devices[0].cost.fwd_comm_ms == Approx(9.6));
  CHECK(r.devices[1].cost.fwd_comm_ms == Approx(38.1 - 18.4 + 6.4));
  CHECK(r.devices[0].cost.total_ms() == Approx(47.7));
  CHECK(r.devices[1].cost.total_ms() == Approx(44.5));

  // The same report from the plan_cost the caller already has.
  CHECK(embplan::plan_report_of(t, p, embplan::evaluate(t, p, by_hand()), by_hand()) == r);
}

TEST_CASE("plan_report: an empty device has all its memory free and only communication") {
  const auto t = hand_task();
  const auto r = embplan::plan_report_of(t, hand_plan(t), by_hand());
  const auto& empty = r.devices[2];
  CHECK(empty.shards == 0);
  CHECK(empty.dim_sum == 0);
  CHECK(empty.hbm_used_bytes == 0);
  CHECK(empty.hbm_free_bytes == 200'000);
  CHECK(empty.compute_ms() == 0.0);
  CHECK(empty.cost.bwd_comm_ms == Approx(8.0));  // it receives the other 80 columns
  CHECK(empty.cost.fwd_comm_ms == Approx(38.1 - 8.0 + 8.0));
  CHECK(empty.cost.total_ms() == Approx(46.1));
}

TEST_CASE("plan_report: the critical path and the five pieces that drive it, largest first") {
  const auto t = hand_task();
  const auto p = hand_plan(t);
  const auto r = embplan::plan_report_of(t, p, by_hand());
  // cuda:0 starts the forward all-to-all last (28.5 + 9.6 ms) and, with the
  // largest transfer, finishes last.
  CHECK(r.bottleneck == 0);
  CHECK(r.bottleneck_start_ms == Approx(38.1));
  CHECK(r.last_to_finish == 0);
  CHECK(r.cost_ms == Approx(47.7));
  CHECK(r.cost_ms == Approx(embplan::evaluate(t, p, by_hand()).max_ms()));

  // t0 (12 ms), t1 (6), then t3, t4's and t5's pieces on cuda:0 (3 each) in
  // plan order; t6 (1.5) is the sixth and left out.
  REQUIRE(r.bottleneck_pieces.size() == 5);
  const std::vector<std::size_t> shards{0, 1, 3, 4, 6};
  const std::vector<double> ms{12.0, 6.0, 3.0, 3.0, 3.0};
  for (std::size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(r.bottleneck_pieces[i].shard == shards[i]);
    CHECK(r.bottleneck_pieces[i].device == 0);
    CHECK(r.bottleneck_pieces[i].cost_ms == Approx(ms[i]));
    CHECK(r.bottleneck_pieces[i].share_of_compute == Approx(ms[i] / 28.5));
  }
  CHECK(r.bottleneck_pieces[0].table == 0);
  CHECK(r.bottleneck_pieces[0].hbm_bytes == 32'000);
  CHECK(r.pieces.at(8).cost_ms == Approx(1.5));  // t6

  // Fewer asked for: the largest ones.
  const auto two = embplan::plan_report_of(t, p, by_hand(), {.top_pieces = 2});
  REQUIRE(two.bottleneck_pieces.size() == 2);
  CHECK(two.bottleneck_pieces[1].shard == 1);
  CHECK(embplan::plan_report_of(t, p, by_hand(), {.top_pieces = 0}).bottleneck_pieces.empty());
}

TEST_CASE("plan_report: the bottleneck starts last, another device may finish last") {
  const auto t = hand_task();
  // cuda:0: t0, t1, t6 (forward 6.5 ms, 24 columns); cuda:1: t2, t3, t4
  // (5 ms, 40 columns); cuda:2: t5 (2 ms, 8 columns). Transfers: max(2 x 24,
  // 72 - 24) = 48, max(80, 32) = 80 and max(16, 64) = 64 columns x 0.1 ms.
  const auto p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 0, 1, 1, 1, 2, 0});
  const auto r = embplan::plan_report_of(t, p, by_hand());
  CHECK(r.bottleneck == 0);
  CHECK(r.bottleneck_start_ms == Approx(19.5 + 4.8));
  CHECK(r.last_to_finish == 1);
  CHECK(r.cost_ms == Approx(19.5 + 4.8 + 8.0));  // the bottleneck's start + cuda:1's transfer
  CHECK(r.devices[1].cost.fwd_comm_ms == Approx(19.5 + 4.8 - (15.0 + 8.0) + 8.0));
  // What drives the step is on the bottleneck: t0, t1, t6.
  REQUIRE(r.bottleneck_pieces.size() == 3);
  CHECK(r.bottleneck_pieces[0].table == 0);
  CHECK(r.bottleneck_pieces[1].table == 1);
  CHECK(r.bottleneck_pieces[2].table == 6);
  CHECK(r.bottleneck_pieces[2].share_of_compute == Approx(1.5 / 19.5));
}

TEST_CASE("plan_report: imbalance of cost, compute and memory: max/mean and the CV") {
  const auto t = hand_task();
  const auto r = embplan::plan_report_of(t, hand_plan(t), by_hand());
  // Totals 47.7, 44.5, 46.1: mean 46.1, deviations 1.6, -1.6, 0.
  CHECK(r.total.max == Approx(47.7));
  CHECK(r.total.mean == Approx(46.1));
  CHECK(r.total.max_over_mean == Approx(47.7 / 46.1));
  CHECK(r.total.cv == Approx(std::sqrt(2 * 1.6 * 1.6 / 3) / 46.1));
  // Compute 28.5, 12, 0: mean 13.5, deviations 15, -1.5, -13.5.
  CHECK(r.compute.max_over_mean == Approx(28.5 / 13.5));
  CHECK(r.compute.cv == Approx(std::sqrt((225.0 + 2.25 + 182.25) / 3) / 13.5));
  // HBM 176,000, 112,000, 0 bytes.
  CHECK(r.hbm.max == Approx(176'000.0));
  CHECK(r.hbm.max_over_mean == Approx(176'000.0 / (288'000.0 / 3)));

  // The ends of the scales.
  const std::vector<double> even{2.0, 2.0, 2.0, 2.0};
  CHECK(embplan::imbalance_of(even) ==
        embplan::imbalance{.max = 2.0, .mean = 2.0, .max_over_mean = 1.0, .cv = 0.0});
  const std::vector<double> one{8.0, 0.0, 0.0, 0.0};
  CHECK(embplan::imbalance_of(one).max_over_mean == Approx(4.0));
  CHECK(embplan::imbalance_of(one).cv == Approx(std::sqrt(3.0)));
  const std::vector<double> zero{0.0, 0.0};
  CHECK(embplan::imbalance_of(zero) == embplan::imbalance{});
  CHECK(embplan::imbalance_of({}) == embplan::imbalance{});
}

TEST_CASE("plan_report: per table its sharding, devices and cost") {
  const auto t = hand_task();
  const auto r = embplan::plan_report_of(t, hand_plan(t), by_hand());
  REQUIRE(r.tables.size() == 7);
  CHECK(r.tables[0].sharding == "table_wise");
  CHECK(r.tables[0].devices == std::vector<std::uint32_t>{0});
  CHECK(r.tables[0].pieces == 1);
  CHECK(r.tables[0].cost_ms == Approx(12.0));
  CHECK(r.tables[0].hbm_bytes == 32'000);
  CHECK(r.tables[2].devices == std::vector<std::uint32_t>{1});
  CHECK(r.tables[4].sharding == "column_wise");
  CHECK(r.tables[4].devices == std::vector<std::uint32_t>{0, 1});
  CHECK(r.tables[4].pieces == 2);
  CHECK(r.tables[4].cost_ms == Approx(6.0));
  CHECK(r.tables[4].hbm_bytes == 64'000);
  CHECK(r.tables[5].sharding == "row_wise");
  CHECK(r.tables[5].cost_ms == Approx(6.0));  // each half: half the lookups
  CHECK(r.tables[5].hbm_bytes == 32'000);
  for (const auto& table : r.tables) {
    CHECK(table.replicas == 0);
    CHECK(table.dram_bytes == 0);
  }
}

TEST_CASE("plan_report: a device over its memory shows none free; bad input is named") {
  using embplan::test::message_of;
  auto t = hand_task();
  const auto p = hand_plan(t);
  t.cluster.devices[0].memory_bytes = 100'000;
  const auto over = embplan::plan_report_of(t, p, by_hand());
  CHECK(over.devices[0].hbm_used_bytes == 176'000);
  CHECK(over.devices[0].hbm_free_bytes == 0);

  t = hand_task();
  auto bad = p;
  bad.shards[2].device = 5;
  CHECK(message_of([&] { (void)embplan::plan_report_of(t, bad, by_hand()); }) ==
        "field 'shards[2].device' = 5: expected a device index below 3");
  bad = p;
  bad.shards.pop_back();  // t6 lost
  CHECK(message_of([&] { (void)embplan::plan_report_of(t, bad, by_hand()); }) ==
        "field 'tables[6]' = \"t6\": expected a table covered by at least one shard");

  auto cost = embplan::evaluate(t, p, by_hand());
  cost.devices.pop_back();
  CHECK(message_of([&] { (void)embplan::plan_report_of(t, p, cost, by_hand()); }) ==
        "field 'cost.devices.size' = 2: expected one entry per device of the task (3)");
  cost = embplan::evaluate(t, p, by_hand());
  cost.devices[1].fwd_comm_ms = std::numeric_limits<double>::quiet_NaN();
  CHECK(message_of([&] {
          (void)embplan::plan_report_of(t, p, cost, by_hand());
        }).starts_with("field 'cost.devices[1].total_ms' = "));
}

TEST_CASE("plan_report: tables off hbm count their cache in HBM and their rows in DRAM") {
  auto t = hand_task();
  // t2 (cuda:1, 1,000 x 16 fp32) in host; t5 (split over cuda:0 and cuda:1) in
  // uvm_caching with 10% of its rows cached.
  t.tables[2].placement = {embplan::memory_tier::host, 0.0};
  t.tables[5].placement = {embplan::memory_tier::uvm_caching, 0.1};
  const auto p = hand_plan(t);
  const auto r = embplan::plan_report_of(t, p, by_hand());
  // t5's halves: 50 slots x (32 + 16) bytes + 500 rows x 4 bytes = 4,400 bytes
  // of HBM each instead of 16,000; 16,000 bytes of DRAM each.
  CHECK(r.devices[0].hbm_used_bytes == 176'000 - 16'000 + 4'400);
  CHECK(r.devices[1].hbm_used_bytes == 112'000 - 64'000 - 16'000 + 4'400);
  CHECK(r.devices[0].dram_used_bytes == 16'000);
  CHECK(r.devices[1].dram_used_bytes == 64'000 + 16'000);
  CHECK(r.devices[2].dram_used_bytes == 0);
  CHECK(r.tables[2].hbm_bytes == 0);
  CHECK(r.tables[2].dram_bytes == 64'000);
  CHECK(r.tables[5].hbm_bytes == 8'800);
  CHECK(r.tables[5].dram_bytes == 32'000);
  CHECK(r.tables[0].dram_bytes == 0);
  // Their pieces are priced in their tier.
  CHECK(r.tables[2].cost_ms == by_hand().tiered_shard_cost(hand_task(),
                                                           embplan::whole_table(t, 2, 1),
                                                           t.tables[2].placement));
}

TEST_CASE("plan_report: host DRAM capacity and free where it is limited, not elsewhere") {
  auto t = hand_task();
  t.tables[2].placement = {embplan::memory_tier::host, 0.0};         // 64,000 on cuda:1
  t.tables[5].placement = {embplan::memory_tier::uvm_caching, 0.1};  // 16,000 on each
  t.cluster.devices[0].dram_bytes = 10'000;                          // over: none free
  t.cluster.devices[1].dram_bytes = 100'000;
  const auto r = embplan::plan_report_of(t, hand_plan(t), by_hand());  // over DRAM: reported
  CHECK(r.devices[0].dram_limited());
  CHECK(r.devices[0].dram_capacity_bytes == 10'000);
  CHECK(r.devices[0].dram_used_bytes == 16'000);
  CHECK(r.devices[0].dram_free_bytes == 0);
  CHECK(r.devices[1].dram_capacity_bytes == 100'000);
  CHECK(r.devices[1].dram_free_bytes == 100'000 - 80'000);
  CHECK_FALSE(r.devices[2].dram_limited());
  CHECK(r.devices[2].dram_capacity_bytes == 0);
  CHECK(r.devices[2].dram_free_bytes == 0);
}

TEST_CASE("plan_report: a range cut by rows inside one host sends a share of its columns") {
  // 4 devices in hosts of 2: table 0 (16 columns) cut by rows on devices 0
  // and 1 (table_row_wise), reduced in host 0, each sending 8 columns; table
  // 1 (8 columns) whole on device 2. Held columns stay the pieces' widths.
  embplan::task t;
  t.name = "hosts";
  t.batch_size = 1024;
  t.cluster = embplan::uniform_topology(4, {}, 2);
  for (const std::int32_t dim : {16, 8}) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(dim);
    s.rows = 1000;
    s.dim = dim;
    s.pooling_factor = 8;
    t.tables.push_back(s);
  }
  embplan::plan p;
  p.shards = {
      {0, 0, 0, 16, 0, 400, false}, {0, 1, 0, 16, 400, 1000, false}, embplan::whole_table(t, 1, 2)};
  const embplan::analytic_cost model;
  const auto r = embplan::plan_report_of(t, p, model);
  CHECK(r.devices[0].dim_sum == 16);
  CHECK(r.devices[1].dim_sum == 16);
  CHECK(r.devices[0].sent_dim == 8);
  CHECK(r.devices[1].sent_dim == 8);
  CHECK(r.devices[2].sent_dim == 8);
  CHECK(r.devices[3].sent_dim == 0);
  // What evaluate() prices the all-to-all with.
  const auto cost = embplan::evaluate(t, p, model);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(r.devices[d].sent_dim == cost.dim_sum[d]);
  // Spread over both hosts (row_wise), nothing is reduced: all 16 each.
  p.shards[1].device = 2;
  p.shards[2].device = 3;
  const auto spread = embplan::plan_report_of(t, p, model);
  CHECK(spread.devices[0].sent_dim == 16);
  CHECK(spread.devices[2].sent_dim == 16);
  CHECK(spread.devices[2].dim_sum == 16);
}
