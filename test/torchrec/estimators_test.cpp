// The pieces of the TorchRec v0.3.2 port that the golden plans
// (golden_test.cpp) exercise only together: Python's number semantics, the
// shard layout, the reservation, the partitioner's tie rules, the options'
// refusals.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/torchrec/planner.hpp"

namespace torchrec_estimators_test {

using namespace embplan;
namespace tr = embplan::torchrec;

task small_task(std::size_t tables, std::size_t devices) {
  task t;
  t.cluster = uniform_topology(devices);
  for (std::size_t i = 0; i < tables; ++i) {
    table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 1000 * static_cast<std::int64_t>(i + 1);
    s.dim = 16;
    s.pooling_factor = 2.0;
    s.reuse_hist[0] = 1.0;
    t.tables.push_back(s);
  }
  return t;
}

TEST_CASE("ceil_true_division is math.ceil of Python's rounded true division") {
  using tr::detail::ceil_true_division;
  CHECK(ceil_true_division(10, 3) == 4);
  CHECK(ceil_true_division(9, 3) == 3);
  CHECK(ceil_true_division(1, 7) == 1);
  // 2^50 + 2^-10 rounds to 2^50 as a double: Python's ceil is 2^50, not 2^50 + 1.
  const std::uint64_t two50 = std::uint64_t{1} << 50;
  CHECK(ceil_true_division((tr::detail::uint128{1} << 60) + 1, 1024) ==
        static_cast<std::int64_t>(two50));
  // 2^52 + 1.5: a tie between 2^52 + 1 and 2^52 + 2 goes to the even one.
  const std::uint64_t two53 = std::uint64_t{1} << 53;
  CHECK(ceil_true_division(two53 + 3, 2) == static_cast<std::int64_t>((two53 >> 1) + 2));
  CHECK_THROWS_WITH_AS(ceil_true_division(tr::detail::uint128{1} << 60, 1),
                       doctest::Contains("below 2^53"), embplan::error);
}

TEST_CASE("py_round rounds half to even, as Python's round()") {
  CHECK(tr::detail::py_round(2.5) == 2);
  CHECK(tr::detail::py_round(3.5) == 4);
  CHECK(tr::detail::py_round(0.2 * 1234567) == 246913);
}

TEST_CASE("shard_layout: row blocks of ceil(rows / n), then the rest, then empty shards") {
  tr::cluster_inputs c;
  c.world_size = 4;
  c.local_world_size = 4;
  tr::table_inputs t;
  t.rows = 10;
  t.cols = 8;
  auto rw = tr::shard_layout(tr::sharding_type::row_wise, t, c);
  REQUIRE(rw.size() == 4);
  CHECK(rw[0] == tr::shard_block{3, 8, 0, 0});
  CHECK(rw[1] == tr::shard_block{3, 8, 3, 0});
  CHECK(rw[2] == tr::shard_block{3, 8, 6, 0});
  CHECK(rw[3] == tr::shard_block{1, 8, 9, 0});
  t.rows = 5;
  rw = tr::shard_layout(tr::sharding_type::row_wise, t, c);
  CHECK(rw[2] == tr::shard_block{1, 8, 4, 0});
  CHECK(rw[3] == tr::shard_block{0, 8, 5, 0});
}

TEST_CASE(
    "shard_layout: column blocks of min_partition (128 by default), the last takes the rest") {
  tr::cluster_inputs c;
  tr::table_inputs t;
  t.rows = 10;
  t.cols = 100;
  CHECK(tr::shard_layout(tr::sharding_type::column_wise, t, c).size() == 1);  // 100 < 128
  t.min_partition = 32;
  const auto cw = tr::shard_layout(tr::sharding_type::column_wise, t, c);
  REQUIRE(cw.size() == 3);
  CHECK(cw[0] == tr::shard_block{10, 32, 0, 0});
  CHECK(cw[1] == tr::shard_block{10, 32, 0, 32});
  CHECK(cw[2] == tr::shard_block{10, 36, 0, 64});
}

TEST_CASE("the storage of a shard counts inputs, outputs, its tensor share and optimizer state") {
  tr::cluster_inputs c;
  c.world_size = 2;
  c.local_world_size = 2;
  c.batch_size = 100;
  tr::table_inputs t;
  t.rows = 1000;
  t.cols = 16;
  t.pooling_factor = 3.0;
  const std::vector<tr::shard_block> whole{{1000, 16, 0, 0}};
  // Table-wise, fused: inputs 3 x 100 x 2 x 8 B, outputs 100 x 2 x 16 x 4 B, tensor 64,000 B.
  auto s =
      tr::shard_storages(tr::sharding_type::table_wise, tr::compute_kernel::fused, whole, t, c);
  CHECK(s[0] == tr::storage{4800 + 12800 + 64000, 0});
  // Adam keeps two states per weight.
  t.optimizer_state = optimizer::adam;
  s = tr::shard_storages(tr::sharding_type::table_wise, tr::compute_kernel::fused, whole, t, c);
  CHECK(s[0] == tr::storage{4800 + 12800 + 3 * 64000, 0});
  // uvm caching: the tensor in ddr, round(0.2 x it) of cache in hbm.
  t.optimizer_state = optimizer::none;
  s = tr::shard_storages(tr::sharding_type::table_wise, tr::compute_kernel::fused_uvm_caching,
                         whole, t, c);
  CHECK(s[0] == tr::storage{4800 + 12800 + 12800, 64000});
}

TEST_CASE("the reservation keeps 85 % of hbm, less 20 x the KJT input") {
  auto t = small_task(3, 2);
  const auto in = tr::inputs_of(t);
  CHECK(in.cluster.batch_size == t.batch_size / 2);
  const auto r = tr::reserve(in, 0.15);
  const auto hbm = static_cast<std::int64_t>(t.cluster.devices[0].memory_bytes);
  const std::int64_t kjt = (in.cluster.batch_size * 6 * 8) * 20;  // sum of pooling factors: 6
  CHECK(r[0].hbm == static_cast<std::int64_t>(0.85 * static_cast<double>(hbm)) - kjt);
  CHECK(r[0].ddr == tr::constants::ddr_cap);
}

TEST_CASE("kernels follow each table's tier unless all kernels are offered") {
  auto t = small_task(2, 2);
  t.tables[1].placement = {memory_tier::uvm_caching, 0.5};
  const auto in = tr::inputs_of(t);
  const auto options = tr::enumerate_options(in);
  for (const auto& o : options[0]) {
    CHECK((o.kernel == (o.type == tr::sharding_type::data_parallel ? tr::compute_kernel::dense
                                                                   : tr::compute_kernel::fused)));
  }
  for (const auto& o : options[1])
    CHECK(o.kernel == tr::compute_kernel::fused_uvm_caching);
  CHECK(in.tables[1].caching_ratio == 0.5);
  tr::planner_options all;
  all.all_kernels = true;
  CHECK(tr::enumerate_options(tr::inputs_of(t, all))[0].size() == 16);  // 1 + 5 types x 3
}

TEST_CASE("a plan's rating is the largest per-rank sum of its shards' perfs") {
  const auto t = small_task(6, 3);
  const auto r = tr::plan(t);
  REQUIRE(r.ok);
  std::vector<double> per(3, 0.0);
  for (const auto& table : r.tables)
    for (const auto& s : table.shards)
      per[static_cast<std::size_t>(s.rank)] += s.perf;
  CHECK(r.rating == *std::max_element(per.begin(), per.end()));
  CHECK(r.proposals >= r.plans);
  CHECK(r.plans > 0);
}

TEST_CASE("no plan: insufficient storage where no proposal fits all devices together") {
  auto t = small_task(4, 2);
  for (auto& d : t.cluster.devices)
    d.memory_bytes = 1 << 20;  // less than the reservation's KJT share
  const auto r = tr::plan(t);
  CHECK_FALSE(r.ok);
  CHECK(r.failure == tr::failure_kind::insufficient_storage);
  CHECK(r.message.find("insufficient storage") != std::string::npos);
}

TEST_CASE("bad options name the field and the value") {
  const auto t = small_task(2, 2);
  tr::planner_options o;
  o.reservation_percentage = 1.5;
  CHECK_THROWS_WITH_AS(tr::plan(t, o), doctest::Contains("'torchrec.reservation_percentage' = 1.5"),
                       embplan::error);
  o = {};
  o.min_partition = -4;
  CHECK_THROWS_WITH_AS(tr::plan(t, o), doctest::Contains("'torchrec.min_partition' = -4"),
                       embplan::error);
  o = {};
  o.sharding_types = {tr::sharding_type::row_wise};
  o.kernels = {tr::compute_kernel::dense};  // row-wise has no dense kernel
  CHECK_THROWS_WITH_AS(tr::plan(t, o), doctest::Contains("'tables[0]'"), embplan::error);
  auto int8 = t;
  int8.tables[1].weight_dtype = dtype::int8;
  CHECK_THROWS_WITH_AS(tr::plan(int8), doctest::Contains("'tables[1].dtype' = \"int8\""),
                       embplan::error);
}

}  // namespace torchrec_estimators_test

namespace torchrec_estimators_test {

// Four equal tables, table-wise only (column-wise: two 128-column blocks
// each), on 2 hosts x 2 devices: every placement is a tie in perf between
// the devices still empty.
std::vector<std::vector<std::int64_t>> tie_ranks(tr::sharding_type type, bool local_rank_ties) {
  task t;
  t.cluster = uniform_topology(4, {}, 2);
  for (int i = 0; i < 4; ++i) {
    table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 1000;
    s.dim = type == tr::sharding_type::column_wise ? 256 : 16;
    s.pooling_factor = 1.0;
    t.tables.push_back(s);
  }
  tr::planner_options o;
  o.sharding_types = {type};
  o.main_branch.local_rank_ties = local_rank_ties;
  const auto r = tr::plan(t, o);
  REQUIRE(r.ok);
  std::vector<std::vector<std::int64_t>> out;
  for (const auto& table : r.tables) {
    out.emplace_back();
    for (const auto& s : table.shards)
      out.back().push_back(s.rank);
  }
  return out;
}

TEST_CASE("a tie in perf goes to the lower rank (v0.3.2), or the lower local rank first (main)") {
  using ranks = std::vector<std::vector<std::int64_t>>;
  // v0.3.2's stable sort by perf: ranks 0, 1, 2, 3 in turn.
  CHECK(tie_ranks(tr::sharding_type::table_wise, false) == ranks{{0}, {1}, {2}, {3}});
  // main's (perf, rank % 2, rank): rank 0, then rank 2 (local rank 0 of the
  // second host) before rank 1.
  CHECK(tie_ranks(tr::sharding_type::table_wise, true) == ranks{{0}, {2}, {1}, {3}});
  // The same through the min-heap (more than one shard per option): each
  // table's two blocks on the two least loaded devices, ties as above.
  CHECK(tie_ranks(tr::sharding_type::column_wise, false) == ranks{{0, 1}, {2, 3}, {0, 1}, {2, 3}});
  CHECK(tie_ranks(tr::sharding_type::column_wise, true) == ranks{{0, 2}, {1, 3}, {0, 2}, {1, 3}});
}

}  // namespace torchrec_estimators_test
