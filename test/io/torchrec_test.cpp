#include "embplan/io/torchrec.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

using nlohmann::json;

// Four tables on two hosts of two devices (ranks 0..3, cuda:0..1 on each host).
embplan::task four_tables() {
  embplan::task t;
  t.name = "tr";
  for (int i = 0; i < 4; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 1000 * (i + 1);
    s.dim = 16;
    s.pooling_factor = 1.0;
    t.tables.push_back(s);
  }
  t.tables[3].name.clear();  // unnamed: keyed "t3"
  t.cluster = embplan::uniform_topology(4, {}, 2);
  return t;
}

json shard_json(std::int64_t row_off, std::int64_t col_off, std::int64_t rows, std::int64_t cols,
                const std::string& placement) {
  return json{{"shard_offsets", {row_off, col_off}},
              {"shard_sizes", {rows, cols}},
              {"placement", placement}};
}

}  // namespace

TEST_CASE("torchrec_sharding classifies table-, column-, row-wise and grid plans") {
  const auto t = four_tables();
  embplan::plan p;
  // t0 table-wise on rank 3 (host 1, local cuda:1).
  p.shards.push_back(embplan::whole_table(t, 0, 3));
  // t1 column-wise: [0,4) on rank 0, [4,16) on rank 2.
  p.shards.push_back({1, 0, 0, 4, 0, 2000, false});
  p.shards.push_back({1, 2, 4, 16, 0, 2000, false});
  // t2 row-wise: [0,1000) on rank 1, [1000,3000) on rank 2, plus a hot-row replica on 0.
  p.shards.push_back({2, 1, 0, 16, 0, 1000, false});
  p.shards.push_back({2, 2, 0, 16, 1000, 3000, false});
  p.shards.push_back({2, 0, 0, 16, 0, 100, true});
  // t3 (unnamed) on a 2 x 2 grid.
  p.shards.push_back({3, 0, 0, 8, 0, 2000, false});
  p.shards.push_back({3, 1, 8, 16, 0, 2000, false});
  p.shards.push_back({3, 2, 0, 8, 2000, 4000, false});
  p.shards.push_back({3, 3, 8, 16, 2000, 4000, false});

  const auto j = embplan::io::torchrec_sharding(t, p);
  REQUIRE(j.size() == 4);

  const auto& t0 = j.at("t0");
  CHECK(t0["sharding_type"] == "table_wise");
  CHECK(t0["compute_kernel"] == "fused");
  CHECK(t0["ranks"] == json::array({3}));
  CHECK(t0["sharding_spec"]["shards"] ==
        json::array({shard_json(0, 0, 1000, 16, "rank:3/cuda:1")}));
  CHECK(!t0.contains("replicas"));

  const auto& t1 = j.at("t1");
  CHECK(t1["sharding_type"] == "column_wise");
  CHECK(t1["ranks"] == json::array({0, 2}));
  CHECK(t1["sharding_spec"]["shards"] ==
        json::array({shard_json(0, 0, 2000, 4, "rank:0/cuda:0"),
                     shard_json(0, 4, 2000, 12, "rank:2/cuda:0")}));

  const auto& t2 = j.at("t2");
  CHECK(t2["sharding_type"] == "row_wise");
  CHECK(t2["ranks"] == json::array({1, 2}));
  CHECK(t2["sharding_spec"]["shards"] ==
        json::array({shard_json(0, 0, 1000, 16, "rank:1/cuda:1"),
                     shard_json(1000, 0, 2000, 16, "rank:2/cuda:0")}));
  CHECK(t2["replicas"] == json::array({shard_json(0, 0, 100, 16, "rank:0/cuda:0")}));

  const auto& t3 = j.at("t3");
  CHECK(t3["sharding_type"] == "grid_shard");
  CHECK(t3["ranks"] == json::array({0, 1, 2, 3}));
  CHECK(t3["sharding_spec"]["shards"][3] == shard_json(2000, 8, 2000, 8, "rank:3/cuda:1"));
}

TEST_CASE("torchrec_sharding rejects invalid plans and ambiguous names") {
  auto t = four_tables();
  auto p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3});
  p.shards.pop_back();
  CHECK_THROWS_WITH_AS(embplan::io::torchrec_sharding(t, p),
                       doctest::Contains("field 'tables[3]' = \"\": expected a table covered"),
                       embplan::error);

  p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3});
  p.shards[1].device = 7;
  CHECK_THROWS_WITH_AS(embplan::io::torchrec_sharding(t, p),
                       doctest::Contains("field 'shards[1].device' = 7"), embplan::error);

  p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3});
  t.tables[1].name = "t0";
  CHECK_THROWS_WITH_AS(
      embplan::io::torchrec_sharding(t, p),
      doctest::Contains("field 'tables[1].name' = \"t0\": expected a name no other"),
      embplan::error);
}

TEST_CASE("torchrec_sharding: a table's tier picks its compute kernel and cache load factor") {
  auto t = four_tables();
  t.tables[1].placement = {embplan::memory_tier::uvm_caching, 0.25};
  t.tables[2].placement = {embplan::memory_tier::host, 0.0};
  const auto p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1, 2, 3});
  const auto j = embplan::io::torchrec_sharding(t, p);
  CHECK(j["t0"]["compute_kernel"] == "fused");
  CHECK(!j["t0"].contains("cache_params"));
  CHECK(j["t1"]["compute_kernel"] == "fused_uvm_caching");
  CHECK(j["t1"]["cache_params"]["load_factor"] == 0.25);
  CHECK(j["t2"]["compute_kernel"] == "fused_uvm");
  CHECK(!j["t2"].contains("cache_params"));
}
