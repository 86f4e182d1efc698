#include "embplan/core/storage.hpp"

#include <doctest/doctest.h>

#include <cstdint>

#include "embplan/core/error.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/table_spec.hpp"

using embplan::memory_tier;
using embplan::optimizer;

namespace {

// 1,000 rows x 16 fp32 columns, 2 lookups per bag; batches of 100 bags.
embplan::table_spec hand_table() {
  embplan::table_spec t;
  t.name = "hand";
  t.rows = 1'000;
  t.dim = 16;
  t.pooling_factor = 2.0;
  t.reuse_hist[0] = 1.0;
  return t;
}

constexpr embplan::tier_placement hbm{.tier = memory_tier::hbm};
constexpr embplan::tier_placement quarter{.tier = memory_tier::uvm_caching, .load_factor = 0.25};
constexpr embplan::tier_placement host{.tier = memory_tier::host};

}  // namespace

TEST_CASE("storage items by hand, for each optimizer and tier") {
  const auto t = hand_table();
  // weights 1,000 x 16 x 4 = 64,000; optimizer state: SGD 0, row-wise Adagrad
  // 1,000 x 4 = 4,000, Adam 1,000 x 16 x 8 = 128,000.
  struct expected {
    optimizer opt;
    std::uint64_t state;
  };
  for (const auto& [opt, state] :
       {expected{optimizer::sgd, 0}, expected{optimizer::none, 0},
        expected{optimizer::rowwise_adagrad, 4'000}, expected{optimizer::adam, 128'000}}) {
    CAPTURE(embplan::to_string(opt));
    // The batch's buffers, in HBM in every tier: 200 int64 indices, 101 int64
    // offsets, 100 x 16 fp32 outputs and as many gradients.
    auto check_buffers = [](const embplan::storage_items& s) {
      CHECK(s.indices == embplan::memory_split{1'600, 0});
      CHECK(s.offsets == embplan::memory_split{808, 0});
      CHECK(s.pooled_outputs == embplan::memory_split{6'400, 0});
      CHECK(s.output_gradients == embplan::memory_split{6'400, 0});
    };
    const auto in_hbm = embplan::table_storage(t, 100, opt, hbm);
    CHECK(in_hbm.weights == embplan::memory_split{64'000, 0});
    CHECK(in_hbm.optimizer_state == embplan::memory_split{state, 0});
    CHECK(in_hbm.cache_state == embplan::memory_split{});
    check_buffers(in_hbm);
    CHECK(in_hbm.total() == embplan::memory_split{64'000 + state + 15'208, 0});

    // 250 cache slots: copies 250 x 64 = 16,000; state 250 x (8 + 8) + 1,000 x 4.
    const auto cached = embplan::table_storage(t, 100, opt, quarter);
    CHECK(cached.weights == embplan::memory_split{16'000, 64'000});
    CHECK(cached.optimizer_state == embplan::memory_split{0, state});
    CHECK(cached.cache_state == embplan::memory_split{8'000, 0});
    check_buffers(cached);
    CHECK(cached.total() == embplan::memory_split{16'000 + 8'000 + 15'208, 64'000 + state});

    const auto on_host = embplan::table_storage(t, 100, opt, host);
    CHECK(on_host.weights == embplan::memory_split{0, 64'000});
    CHECK(on_host.optimizer_state == embplan::memory_split{0, state});
    CHECK(on_host.cache_state == embplan::memory_split{});
    check_buffers(on_host);
  }
}

TEST_CASE("LFU state, fp16 weights, a shard, int32 indices and a deeper pipeline") {
  auto t = hand_table();
  // LFU: 250 x 8 per slot + 1,000 x (4 + 8) per row.
  const auto lfu = embplan::table_storage(t, 100, optimizer::sgd, quarter,
                                          {.policy = embplan::cache_policy::lfu});
  CHECK(lfu.cache_state.hbm_bytes == 2'000 + 12'000);
  // fp16: the weights and the cache's copies halve; Adam's moments stay fp32.
  t.weight_dtype = embplan::dtype::fp16;
  const auto half = embplan::table_storage(t, 100, optimizer::adam, quarter);
  CHECK(half.weights == embplan::memory_split{8'000, 32'000});
  CHECK(half.optimizer_state == embplan::memory_split{0, 128'000});
  t.weight_dtype = embplan::dtype::fp32;
  // A shard of 500 rows x 8 columns: half the lookups, 8-wide outputs.
  const auto shard = embplan::shard_storage(t, 500, 8, 100, optimizer::rowwise_adagrad, hbm);
  CHECK(shard.weights.hbm_bytes == 16'000);
  CHECK(shard.optimizer_state.hbm_bytes == 2'000);
  CHECK(shard.indices.hbm_bytes == 800);
  CHECK(shard.pooled_outputs.hbm_bytes == 3'200);
  // int32 indices and offsets, three batches in flight.
  const auto piped = embplan::table_storage(t, 100, optimizer::sgd, hbm,
                                            {.index_bytes = 4, .pipeline_batches = 3});
  CHECK(piped.indices.hbm_bytes == 200 * 4 * 3);
  CHECK(piped.offsets.hbm_bytes == 101 * 4 * 3);
  CHECK(piped.pooled_outputs.hbm_bytes == 6'400);
  // Items by name, in order.
  const auto items = piped.items();
  CHECK(items[0].first == "weights");
  CHECK(items[2].first == "cache state");
  CHECK(items[6].first == "output gradients");
  CHECK(items[6].second == piped.output_gradients);
}

TEST_CASE("cache slots of a load factor") {
  using embplan::device_rows;
  CHECK(device_rows(hbm, 1'000) == 1'000);
  CHECK(device_rows(host, 1'000) == 0);
  CHECK(device_rows(quarter, 1'000) == 250);
  CHECK(device_rows({.tier = memory_tier::uvm_caching, .load_factor = 1e-9}, 1'000) == 1);
  CHECK(device_rows({.tier = memory_tier::uvm_caching, .load_factor = 0.2501}, 1'000) == 251);
  CHECK(device_rows({.tier = memory_tier::uvm_caching, .load_factor = 1.0}, 7) == 7);
  // k / rows gives back k slots for every k.
  for (std::int64_t rows : {7, 10, 1'000, 999'983}) {
    for (std::int64_t k = 1; k <= rows; k += (rows > 1'000 ? 9'973 : 1)) {
      const embplan::tier_placement p{
          .tier = memory_tier::uvm_caching,
          .load_factor = static_cast<double>(k) / static_cast<double>(rows)};
      CAPTURE(rows);
      CAPTURE(k);
      CHECK(device_rows(p, rows) == static_cast<std::uint64_t>(k));
    }
  }
  CHECK(embplan::cache_slot_bytes(16, embplan::dtype::fp32, embplan::cache_policy::lru) == 64 + 16);
  CHECK(embplan::cache_slot_bytes(16, embplan::dtype::fp16, embplan::cache_policy::lfu) == 32 + 8);
}

TEST_CASE("bad storage input names the field and the value") {
  const auto t = hand_table();
  CHECK_THROWS_WITH_AS((void)embplan::shard_storage(t, 0, 16, 100, optimizer::sgd, hbm),
                       doctest::Contains("field 'rows' = 0"), embplan::error);
  CHECK_THROWS_WITH_AS((void)embplan::shard_storage(t, 10, 17, 100, optimizer::sgd, hbm),
                       doctest::Contains("field 'cols' = 17: expected a shard's columns in [1, "
                                         "table dim = 16]"),
                       embplan::error);
  CHECK_THROWS_WITH_AS((void)embplan::table_storage(t, -1, optimizer::sgd, hbm),
                       doctest::Contains("field 'batch_size' = -1"), embplan::error);
  CHECK_THROWS_WITH_AS(
      (void)embplan::table_storage(t, 100, optimizer::sgd, {.tier = memory_tier::uvm_caching}),
      doctest::Contains(
          "field 'placement.load_factor' = 0: expected a cache load factor in (0, 1]"),
      embplan::error);
  CHECK_THROWS_WITH_AS(
      (void)embplan::table_storage(t, 100, optimizer::sgd,
                                   {.tier = memory_tier::uvm_caching, .load_factor = 1.5}),
      doctest::Contains("field 'placement.load_factor' = 1.5"), embplan::error);
  CHECK_THROWS_WITH_AS(
      (void)embplan::table_storage(t, 100, optimizer::sgd, hbm, {.index_bytes = 2}),
      doctest::Contains("field 'storage.index_bytes' = 2"), embplan::error);
  CHECK_THROWS_WITH_AS(
      (void)embplan::table_storage(t, 100, optimizer::sgd, hbm, {.pipeline_batches = 0}),
      doctest::Contains("field 'storage.pipeline_batches' = 0"), embplan::error);
  auto bad = t;
  bad.dim = 0;
  CHECK_THROWS_WITH_AS((void)embplan::table_storage(bad, 100, optimizer::sgd, hbm),
                       doctest::Contains("field 'table.dim' = 0"), embplan::error);
}
