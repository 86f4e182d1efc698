// TorchRec main's differences (commit a48cef79) as named options of the
// v0.3.2 port (types.hpp, main_branch_changes): each off by default, where
// the figure is v0.3.2's, and on with its switch, where it is main's. The
// expected figures are worked by hand from main's formulas (the arithmetic
// is in the comments); doubles are Python's repr of the same expression, so
// the checks are to the last bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/torchrec/estimators.hpp"
#include "embplan/torchrec/planner.hpp"

namespace torchrec_main_branch_test {

using namespace embplan;
namespace tr = embplan::torchrec;

tr::cluster_inputs cluster(std::int64_t world, std::int64_t local, tr::main_branch_changes m) {
  tr::cluster_inputs c;
  c.world_size = world;
  c.local_world_size = local;
  c.batch_size = 100;
  c.main_branch = m;
  return c;
}

tr::main_branch_changes only(bool tr::main_branch_changes::*field) {
  tr::main_branch_changes m;
  m.*field = true;
  return m;
}

std::vector<std::int64_t> widths(const std::vector<tr::shard_block>& blocks) {
  std::vector<std::int64_t> out;
  for (const auto& b : blocks)
    out.push_back(b.cols);
  return out;
}

std::vector<std::int64_t> col_offsets(const std::vector<tr::shard_block>& blocks) {
  std::vector<std::int64_t> out;
  for (const auto& b : blocks)
    out.push_back(b.col_offset);
  return out;
}

using widths_t = std::vector<std::int64_t>;

TEST_CASE(
    "main_branch_changes: all off by default, all() turns every one on, cluster_of carries "
    "them") {
  const tr::planner_options o;
  CHECK(o.main_branch == tr::main_branch_changes{});
  const auto all = tr::main_branch_changes::all();
  CHECK(all.even_column_blocks);
  CHECK(all.uvm_bandwidth);
  CHECK(all.uvm_cache_state);
  CHECK(all.twrw_inter_host);
  CHECK(all.local_rank_ties);
  task t;
  t.cluster = uniform_topology(2);
  table_spec s;
  s.name = "t";
  s.rows = 10;
  s.dim = 8;
  t.tables.push_back(s);
  tr::planner_options on;
  on.main_branch = all;
  CHECK(tr::cluster_of(t, o).main_branch == tr::main_branch_changes{});
  CHECK(tr::cluster_of(t, on).main_branch == all);
}

TEST_CASE(
    "even_column_blocks: equal column blocks, the first multiple of 4 from min_partition "
    "up that divides the dim") {
  const auto v032 = cluster(4, 4, {});
  const auto main = cluster(4, 4, only(&tr::main_branch_changes::even_column_blocks));
  tr::table_inputs t;
  t.rows = 10;
  t.cols = 448;
  for (const auto type : {tr::sharding_type::column_wise, tr::sharding_type::table_column_wise}) {
    // v0.3.2: 448 = 3 x 128 + 64, the last block takes the 64: 128, 128, 192.
    CHECK(widths(tr::shard_layout(type, t, v032)) == widths_t{128, 128, 192});
    CHECK(col_offsets(tr::shard_layout(type, t, v032)) == widths_t{0, 128, 256});
    // Main: 128 .. 447, multiples of 4 dividing 448 = 2^6 x 7: 224 first; 2 x 224.
    const auto blocks = tr::shard_layout(type, t, main);
    CHECK(widths(blocks) == widths_t{224, 224});
    CHECK(col_offsets(blocks) == widths_t{0, 224});
    CHECK(blocks[1] == tr::shard_block{10, 224, 0, 224});
  }
  // min_partition 100: v0.3.2 100, 100, 100, 148; main 100 .. 447: 112 (448 / 4), 4 x 112.
  t.min_partition = 100;
  CHECK(widths(tr::shard_layout(tr::sharding_type::column_wise, t, v032)) ==
        widths_t{100, 100, 100, 148});
  CHECK(widths(tr::shard_layout(tr::sharding_type::column_wise, t, main)) ==
        widths_t{112, 112, 112, 112});
  // min_partition 30 on dim 60: v0.3.2 30, 30; main wants a multiple of 4 in 30 .. 59 that
  // divides 60 (32, 36, ..., 56: none), so the whole dim.
  t.cols = 60;
  t.min_partition = 30;
  CHECK(widths(tr::shard_layout(tr::sharding_type::column_wise, t, v032)) == widths_t{30, 30});
  CHECK(widths(tr::shard_layout(tr::sharding_type::column_wise, t, main)) == widths_t{60});
  // 512 = 4 x 128 is the same under both rules.
  t.cols = 512;
  t.min_partition = 0;
  CHECK(tr::shard_layout(tr::sharding_type::column_wise, t, main) ==
        tr::shard_layout(tr::sharding_type::column_wise, t, v032));
  // Other sharding types do not move.
  CHECK(tr::shard_layout(tr::sharding_type::row_wise, t, main) ==
        tr::shard_layout(tr::sharding_type::row_wise, t, v032));
}

TEST_CASE("uvm_bandwidth: the uvm kernels' host side at HBM_TO_DDR_MEM_BW, still / 10") {
  const tr::main_branch_changes v032{};
  const auto main = only(&tr::main_branch_changes::uvm_bandwidth);
  // DDR_MEM_BW = 51 x 2^30 / 1000 = 54,760,833.024 B/ms; HBM_TO_DDR_MEM_BW = 32 x 2^30 / 1000
  // = 34,359,738.368; HBM_MEM_BW = 897 x 2^30 / 1000 = 963,146,416.128.
  // fused_uvm: v0.3.2 54,760,833.024 / 10; main 34,359,738.368 / 10.
  CHECK(tr::kernel_bandwidth(tr::compute_kernel::fused_uvm, 0.2) == 5476083.302399999);
  CHECK(tr::kernel_bandwidth(tr::compute_kernel::fused_uvm, 0.2, v032) == 5476083.302399999);
  CHECK(tr::kernel_bandwidth(tr::compute_kernel::fused_uvm, 0.2, main) == 3435973.8368);
  // fused_uvm_caching at 0.2: (0.2 x 963,146,416.128 + 0.8 x host) / 10;
  // v0.3.2 (192,629,283.2256 + 43,808,666.4192) / 10, main (... + 27,487,790.6944) / 10.
  CHECK(tr::kernel_bandwidth(tr::compute_kernel::fused_uvm_caching, 0.2, v032) == 23643794.96448);
  CHECK(tr::kernel_bandwidth(tr::compute_kernel::fused_uvm_caching, 0.2, main) == 22011707.392);
  // The hbm kernels do not move.
  CHECK(tr::kernel_bandwidth(tr::compute_kernel::fused, 0.2, main) == 963146416.128);
  CHECK(tr::kernel_bandwidth(tr::compute_kernel::dense, 0.2, main) == 963146416.128 / 2);

  // Through the perf estimator: table-wise fused_uvm, 2 ranks on one host, batch 100, pooling 1,
  // 16 fp32 columns. Inputs 100 x 2 x 8 = 1,600 B; lookup 100 x 2 x max(16, 32) x 4 = 25,600;
  // output 100 x 2 x 16 x 4 = 12,800; dim 16 < 64: penalty 1.75, so fwd_compute = 70,000 / bw;
  // comms 12,800 / (600 x 2^30 / 1000) each way; perf = 2 x comms + 3 x fwd_compute.
  tr::table_inputs t;
  t.rows = 1000;
  t.cols = 16;
  const std::vector<tr::shard_block> whole{{1000, 16, 0, 0}};
  const auto perf = [&](tr::main_branch_changes m) {
    return tr::shard_perfs(tr::sharding_type::table_wise, tr::compute_kernel::fused_uvm, whole, t,
                           cluster(2, 2, m))[0];
  };
  CHECK(perf(v032) == 0.03838831303166409);  // 3 x 70,000 / 5,476,083.3024 + 2 x 1.98682e-5
  CHECK(perf(main) == 0.06115778038899104);  // 3 x 70,000 / 3,435,973.8368 + 2 x 1.98682e-5
}

TEST_CASE(
    "uvm_cache_state: ceil(shard rows x (4 + 16 x cache share)) more hbm per "
    "fused_uvm_caching shard") {
  const auto v032 = cluster(2, 2, {});
  const auto main = cluster(2, 2, only(&tr::main_branch_changes::uvm_cache_state));
  tr::table_inputs t;
  t.rows = 1000;
  t.cols = 16;
  t.pooling_factor = 3.0;
  const std::vector<tr::shard_block> whole{{1000, 16, 0, 0}};
  // Table-wise at 0.2: inputs 3 x 100 x 2 x 8 = 4,800 B, outputs 100 x 2 x 16 x 4 = 12,800,
  // cache round(64,000 x 0.2) = 12,800; the tensor, 64,000 B, in ddr. Main adds
  // ceil(1,000 x (4 + 0.2 x 16)) = 7,200.
  const auto tw = [&](tr::compute_kernel k, const tr::cluster_inputs& c) {
    return tr::shard_storages(tr::sharding_type::table_wise, k, whole, t, c)[0];
  };
  CHECK(tw(tr::compute_kernel::fused_uvm_caching, v032) ==
        tr::storage{4800 + 12800 + 12800, 64000});
  CHECK(tw(tr::compute_kernel::fused_uvm_caching, main) ==
        tr::storage{4800 + 12800 + 12800 + 7200, 64000});
  // fused_uvm and fused have no cache.
  CHECK(tw(tr::compute_kernel::fused_uvm, main) == tw(tr::compute_kernel::fused_uvm, v032));
  CHECK(tw(tr::compute_kernel::fused, main) == tw(tr::compute_kernel::fused, v032));

  // Per shard's rows, in Python floats: row-wise 200,000 x 16 at 0.3 gives two shards of
  // 100,000 rows, and 100,000 x (4 + 0.3 x 16) is 880,000.0000000001 in doubles: 880,001 each.
  t.rows = 200000;
  t.caching_ratio = 0.3;
  const auto rw = tr::shard_layout(tr::sharding_type::row_wise, t, v032);
  const auto off = tr::shard_storages(tr::sharding_type::row_wise,
                                      tr::compute_kernel::fused_uvm_caching, rw, t, v032);
  const auto on = tr::shard_storages(tr::sharding_type::row_wise,
                                     tr::compute_kernel::fused_uvm_caching, rw, t, main);
  REQUIRE(on.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(on[i].hbm - off[i].hbm == 880001);
    CHECK(on[i].ddr == off[i].ddr);
  }
}

TEST_CASE(
    "twrw_inter_host: table-row-wise inter-host traffic batch x (world / local) x dim x "
    "bytes, forward and backward") {
  // 16 ranks on 2 hosts of 8, batch 100, pooling 1, 16 fp32 columns, fused (897 x 2^30 / 1000
  // B/ms). Inputs 100 / 8 = 12.5: read ceil(12.5 x 16 x 8) = 1,600 B, lookup 12.5 x 16 x 16 x 4
  // = 12,800; output 100 x 16 x 16 x 4 = 102,400. Intra-host 102,400 / (600 x 2^30 / 1000).
  // Inter-host over 12.5 x 2^30 / 1000 = 13,421,772.8 B/ms:
  //   v0.3.2: 102,400 x (8 / 16) = 51,200 B; main: 100 x (16 / 8) x 16 x 4 = 12,800 B.
  // perf = 2 x comms + 102,400 x 2.455 / hbm + 3 x 116,800 / hbm, so main is
  // 2 x 38,400 / 13,421,772.8 = 0.0057220459 ms below v0.3.2.
  tr::table_inputs t;
  t.rows = 1000;
  t.cols = 16;
  const auto perfs = [&](tr::main_branch_changes m) {
    const auto c = cluster(16, 8, m);
    const auto blocks = tr::shard_layout(tr::sharding_type::table_row_wise, t, c);
    return tr::shard_perfs(tr::sharding_type::table_row_wise, tr::compute_kernel::fused, blocks, t,
                           c);
  };
  const auto v032 = perfs({});
  const auto main = perfs(only(&tr::main_branch_changes::twrw_inter_host));
  REQUIRE(v032.size() == 8);
  REQUIRE(main.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(v032[i] == 0.008572104782563787);
    CHECK(main[i] == 0.002850058884126287);
  }
  // One host: no inter-host term, nothing to change.
  const auto one_host = [&](tr::main_branch_changes m) {
    const auto c = cluster(8, 8, m);
    return tr::shard_perfs(tr::sharding_type::table_row_wise, tr::compute_kernel::fused,
                           tr::shard_layout(tr::sharding_type::table_row_wise, t, c), t, c);
  };
  CHECK(one_host(only(&tr::main_branch_changes::twrw_inter_host)) == one_host({}));
}

// End to end: torchrec::plan under each switch.

table_spec table(std::string name, std::int64_t rows, std::int32_t dim, double pooling) {
  table_spec s;
  s.name = std::move(name);
  s.rows = rows;
  s.dim = dim;
  s.pooling_factor = pooling;
  return s;
}

TEST_CASE(
    "plan: even_column_blocks splits a dim-448 table column-wise in 2 x 224, not "
    "128 + 128 + 192") {
  task t;
  t.cluster = uniform_topology(4);
  t.batch_size = 4096;
  t.tables.push_back(table("t", 10000, 448, 1.0));
  tr::planner_options o;
  o.sharding_types = {tr::sharding_type::column_wise};
  const auto v032 = tr::plan(t, o);
  o.main_branch.even_column_blocks = true;
  const auto main = tr::plan(t, o);
  REQUIRE(v032.ok);
  REQUIRE(main.ok);
  const auto cols = [](const tr::planner_result& r) {
    widths_t out;
    for (const auto& s : r.tables[0].shards)
      out.push_back(s.block.cols);
    return out;
  };
  CHECK(cols(v032) == widths_t{128, 128, 192});
  CHECK(cols(main) == widths_t{224, 224});
}

TEST_CASE(
    "plan: uvm_cache_state's extra hbm moves a memory-tight table from the uvm cache to "
    "uvm") {
  // One device of 12,000,000 B, batch 512, a 1,000,000 x 8 fp32 table with every kernel offered.
  // Reserved: 0.85 x 12,000,000 - 20 x 512 x 8 = 10,118,080 B of hbm. fused needs 32,000,000;
  // fused_uvm_caching needs inputs 4,096 + outputs 16,384 + cache 6,400,000 = 6,420,480, and
  // with main's cache state ceil(1,000,000 x 7.2) = 7,200,000 more, 13,620,480: too much, so
  // fused_uvm (20,480 B of hbm), the slower kernel.
  task t;
  device_spec d;
  d.memory_bytes = 12000000;
  t.cluster = uniform_topology(1, d);
  t.batch_size = 512;
  t.tables.push_back(table("t", 1000000, 8, 1.0));
  tr::planner_options o;
  o.all_kernels = true;
  const auto v032 = tr::plan(t, o);
  o.main_branch.uvm_cache_state = true;
  const auto main = tr::plan(t, o);
  REQUIRE(v032.ok);
  REQUIRE(main.ok);
  CHECK(v032.tables[0].kernel == tr::compute_kernel::fused_uvm_caching);
  CHECK(v032.tables[0].shards[0].bytes == tr::storage{6420480, 32000000});
  CHECK(main.tables[0].kernel == tr::compute_kernel::fused_uvm);
  CHECK(main.tables[0].shards[0].bytes == tr::storage{20480, 32000000});
  CHECK(main.rating > v032.rating);
}

TEST_CASE("plan: twrw_inter_host makes table-row-wise cheaper on 2 hosts of 8") {
  // Per rank the inter-host bytes of a table-row-wise shard are batch x 8 x dim x 4 in v0.3.2
  // (output x 8 / 16) and batch x 2 x dim x 4 on main (16 / 8): v0.3.2 keeps 3 of 4 tables
  // table-wise, main puts all 4 table-row-wise.
  task t;
  t.cluster = uniform_topology(16, {}, 8);
  t.batch_size = 16 * 512;
  for (int i = 0; i < 4; ++i)
    t.tables.push_back(table("t" + std::to_string(i), 100000, 64, 4.0));
  tr::planner_options o;
  o.sharding_types = {tr::sharding_type::table_wise, tr::sharding_type::table_row_wise};
  const auto v032 = tr::plan(t, o);
  o.main_branch.twrw_inter_host = true;
  const auto main = tr::plan(t, o);
  REQUIRE(v032.ok);
  REQUIRE(main.ok);
  const auto count = [](const tr::planner_result& r, tr::sharding_type type) {
    int n = 0;
    for (const auto& x : r.tables)
      n += x.type == type ? 1 : 0;
    return n;
  };
  CHECK(count(v032, tr::sharding_type::table_wise) == 3);
  CHECK(count(main, tr::sharding_type::table_row_wise) == 4);
  CHECK(main.rating < v032.rating);
}

// Main's DynamicProgrammingProposer (planner_options::dynamic_programming).

tr::sharding_option option(std::int64_t hbm, double perf) {
  tr::sharding_option o;
  o.perf = {perf};
  o.storages = {{hbm, 0}};
  o.summarize();
  return o;
}

TEST_CASE("dynamic_programming_proposals: one proposal of least perf per reachable HBM bin") {
  // Table 0 ("B"): 20 or 50 bytes, perf 4 or 1; table 1 ("A"): 30 or 10
  // bytes, perf 2 or 5. One device of 100 reserved bytes, 10 bins of 10.
  // The tables by least HBM: A (10) first, then B; A's options 10, 30.
  // A alone: bin 1 (perf 5), bin 3 (perf 2). With B's 20 (2 bins, perf 4):
  // bin 3 (5 + 4 = 9), bin 5 (2 + 4 = 6); with B's 50 (5 bins, perf 1): bin
  // 6 (5 + 1 = 6), bin 8 (2 + 1 = 3). The proposals from bin 9 down:
  // bin 8 {B 50, A 30}, bin 6 {B 50, A 10}, bin 5 {B 20, A 30}, bin 3 {B 20, A 10}.
  const std::vector<std::vector<tr::sharding_option>> options{{option(20, 4.0), option(50, 1.0)},
                                                              {option(30, 2.0), option(10, 5.0)}};
  std::vector<std::uint32_t> first;
  const auto proposals = tr::detail::dynamic_programming_proposals(options, {{100, 0}}, 10, first);
  // Its first proposal: each table's least-HBM option.
  CHECK(first == std::vector<std::uint32_t>{0, 1});
  using proposal = std::vector<std::uint32_t>;
  CHECK(proposals == std::vector<proposal>{{1, 0}, {1, 1}, {0, 0}, {0, 1}});
  // Bins too small to hold anything past the first table's: none of B's
  // options fits beside A's in 40 bytes but 20 + 10 (bins of 40 / 4 = 10:
  // 1 + 2 = 3 < 4).
  CHECK(tr::detail::dynamic_programming_proposals(options, {{40, 0}}, 4, first) ==
        std::vector<proposal>{{0, 1}});
}

TEST_CASE("plan: the dynamic-programming proposer alone, in place of the default proposers") {
  task t;
  t.cluster = uniform_topology(4);
  for (int i = 0; i < 6; ++i)
    t.tables.push_back(table("t" + std::to_string(i), 100000 * (i + 1), 32, 4.0));
  tr::planner_options o;
  const auto defaults = tr::plan(t, o);
  o.dynamic_programming = true;
  const auto dp = tr::plan(t, o);
  REQUIRE(defaults.ok);
  REQUIRE(dp.ok);
  // Its proposals: the first (least HBM per table) and one per reachable bin,
  // fewer than the defaults' grid and greedy walks; none of them repeated.
  const auto in = tr::inputs_of(t, {});
  const auto options = tr::enumerate_options(in);
  std::vector<std::uint32_t> first;
  const auto proposals = tr::detail::dynamic_programming_proposals(
      options, tr::reserve(in, tr::constants::reservation_percentage), 100, first);
  std::set<std::vector<std::uint32_t>> distinct(proposals.begin(), proposals.end());
  distinct.insert(first);
  CHECK(dp.proposals == distinct.size());
  CHECK(dp.proposals != defaults.proposals);
  CHECK(dp.rating > 0.0);

  o.hbm_bins_per_device = 0;
  CHECK_THROWS_WITH_AS(
      tr::plan(t, o), doctest::Contains("'torchrec.hbm_bins_per_device' = 0: expected a bin count"),
      embplan::error);
  // 6 tables x 1,000,000 bins x 16 devices: past the backtrack table's limit.
  t.cluster = uniform_topology(16);
  o.hbm_bins_per_device = 1'000'000;
  CHECK_THROWS_WITH_AS(
      tr::plan(t, o),
      doctest::Contains("'torchrec.dynamic_programming' = \"6 tables x 16000000 bins\""),
      embplan::error);
}

}  // namespace torchrec_main_branch_test
