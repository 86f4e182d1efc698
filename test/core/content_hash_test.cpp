#include "embplan/core/content_hash.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

// The task of the golden value: change nothing here without a new format.
embplan::task golden_task() {
  embplan::task t;
  t.name = "golden";
  const auto table = [](std::string name, std::int64_t rows, std::int32_t dim, double pooling) {
    embplan::table_spec s;
    s.name = std::move(name);
    s.rows = rows;
    s.dim = dim;
    s.pooling_factor = pooling;
    return s;
  };
  auto a = table("t0", 1000, 16, 2.5);
  a.reuse_hist[0] = 1.0;
  auto b = table("t1", 50000, 64, 10.0);
  b.reuse_hist[0] = 0.5;
  b.reuse_hist[3] = 0.5;
  b.weight_dtype = embplan::dtype::fp16;
  t.tables = {a, b};
  t.cluster = embplan::uniform_topology(2, {}, 2);
  t.batch_size = 4096;
  t.optimizer_state = embplan::optimizer::sgd;
  return t;
}

// The plan of the golden value: t0 whole on device 1, t1's columns split
// [0, 32) on device 0 and [32, 64) on device 1.
embplan::plan golden_plan() {
  embplan::plan p;
  p.shards = {{0, 1, 0, 16, 0, 1000}, {1, 0, 0, 32, 0, 50000}, {1, 1, 32, 64, 0, 50000}};
  return p;
}

}  // namespace

TEST_CASE("content hash: a golden value for a fixed task and plan (the canonical bytes, v2)") {
  // Computed by an independent implementation of the format in the header
  // comment (Python struct.pack '<' + FNV-1a 64), not by this code; the same
  // implementation gives v1's e95aeef76cfa0a88 for the task, planner and seed
  // alone.
  CHECK(embplan::hash_hex(embplan::content_hash(golden_task(), golden_plan(), "lookup_greedy",
                                                7)) == "b986ebf52b58ca3f");
  CHECK(embplan::hash_hex(embplan::content_hash(golden_task(), embplan::plan{}, "lookup_greedy",
                                                7)) == "0a5d668b609f2891");
}

TEST_CASE("content hash: covers the shards, so a plan edited by hand hashes otherwise") {
  const auto t = golden_task();
  const auto p = golden_plan();
  const auto h = embplan::content_hash(t, p, "lookup_greedy", 7);
  // The same plan, copied or rebuilt: the same hash.
  const auto copy = p;
  CHECK(embplan::content_hash(t, copy, "lookup_greedy", 7) == h);
  CHECK(embplan::content_hash(t, golden_plan(), "lookup_greedy", 7) == h);
  using edit = std::function<void(embplan::plan&)>;
  const std::vector<std::pair<const char*, edit>> edits{
      {"a table moved to another device", [](auto& x) { x.shards[0].device = 0; }},
      {"a shard's table", [](auto& x) { x.shards[0].table = 1; }},
      {"a column cut moved",
       [](auto& x) {
         x.shards[1].col_end = 48;
         x.shards[2].col_begin = 48;
       }},
      {"a row range", [](auto& x) { x.shards[0].row_end = 999; }},
      {"row begin", [](auto& x) { x.shards[0].row_begin = 1; }},
      {"replica flag", [](auto& x) { x.shards[0].replica = true; }},
      {"data-parallel flag", [](auto& x) { x.shards[0].data_parallel = true; }},
      {"shard order", [](auto& x) { std::swap(x.shards[1], x.shards[2]); }},
      {"a shard more", [](auto& x) { x.shards.push_back(x.shards[0]); }},
      {"a shard less", [](auto& x) { x.shards.pop_back(); }},
  };
  for (const auto& [what, change] : edits) {
    CAPTURE(what);
    auto changed = p;
    change(changed);
    CHECK(embplan::content_hash(t, changed, "lookup_greedy", 7) != h);
  }
}

TEST_CASE("content hash: the same for a copy and a second call, 16 hex digits round-trip") {
  const auto t = golden_task();
  const auto p = golden_plan();
  const auto copy = t;
  const auto h = embplan::content_hash(t, p, "neuroshard", 3);
  CHECK(embplan::content_hash(copy, p, "neuroshard", 3) == h);
  CHECK(embplan::content_hash(t, p, "neuroshard", 3) == h);
  CHECK(embplan::hash_hex(h).size() == 16);
  CHECK(embplan::parse_hash_hex(embplan::hash_hex(h)) == h);
  CHECK(embplan::hash_hex(0x0123456789abcdefULL) == "0123456789abcdef");
  CHECK(embplan::parse_hash_hex("0123456789ABCDEF") == 0x0123456789abcdefULL);
  CHECK_FALSE(embplan::parse_hash_hex("0123456789abcde").has_value());
  CHECK_FALSE(embplan::parse_hash_hex("0123456789abcdeg").has_value());
  // The task's name is a label, not hashed.
  auto renamed = t;
  renamed.name = "another";
  CHECK(embplan::content_hash(renamed, p, "neuroshard", 3) == h);
  // -0.0 == 0.0, so they hash alike.
  auto negative_zero = t;
  negative_zero.tables[0].reuse_hist[5] = -0.0;
  CHECK(embplan::content_hash(negative_zero, p, "neuroshard", 3) == h);
}

TEST_CASE("content hash: changes when any field of the task, the planner or the seed changes") {
  const auto t = golden_task();
  const auto p = golden_plan();
  const auto h = embplan::content_hash(t, p, "lookup_greedy", 7);
  using edit = std::function<void(embplan::task&)>;
  const std::vector<std::pair<const char*, edit>> edits{
      {"table name", [](auto& x) { x.tables[1].name = "t2"; }},
      {"rows", [](auto& x) { x.tables[0].rows += 1; }},
      {"dim", [](auto& x) { x.tables[0].dim = 20; }},
      {"pooling_factor", [](auto& x) { x.tables[1].pooling_factor = 10.000001; }},
      {"reuse bin", [](auto& x) { x.tables[1].reuse_hist[16] = 1e-9; }},
      {"weight dtype", [](auto& x) { x.tables[0].weight_dtype = embplan::dtype::int8; }},
      {"table order", [](auto& x) { std::swap(x.tables[0], x.tables[1]); }},
      {"a table more", [](auto& x) { x.tables.push_back(x.tables[0]); }},
      {"device name", [](auto& x) { x.cluster.devices[1].name = "gpu1"; }},
      {"device memory", [](auto& x) { x.cluster.devices[0].memory_bytes -= 1; }},
      {"memory bandwidth", [](auto& x) { x.cluster.devices[1].memory_bandwidth_gbps = 900.0; }},
      {"cache bandwidth", [](auto& x) { x.cluster.devices[1].cache_bandwidth_gbps = 1.0; }},
      {"cache bytes", [](auto& x) { x.cluster.devices[0].cache_bytes = 0; }},
      {"host DRAM", [](auto& x) { x.cluster.devices[1].dram_bytes = 1; }},
      {"a device more", [](auto& x) { x.cluster.devices.push_back(x.cluster.devices[0]); }},
      {"devices_per_host", [](auto& x) { x.cluster.devices_per_host = 1; }},
      {"intra-host bandwidth", [](auto& x) { x.cluster.intra_host_bandwidth_gbps = 300.0; }},
      {"inter-host bandwidth", [](auto& x) { x.cluster.inter_host_bandwidth_gbps = 25.0; }},
      {"collective latency", [](auto& x) { x.cluster.collective_latency_ms = 0.0; }},
      {"batch size", [](auto& x) { x.batch_size = 4097; }},
      {"optimizer", [](auto& x) { x.optimizer_state = embplan::optimizer::adam; }},
  };
  for (const auto& [what, change] : edits) {
    CAPTURE(what);
    auto changed = t;
    change(changed);
    CHECK(embplan::content_hash(changed, p, "lookup_greedy", 7) != h);
  }
  CHECK(embplan::content_hash(t, p, "size_greedy", 7) != h);
  CHECK(embplan::content_hash(t, p, "lookup_greedy", 8) != h);
  // Strings are length-prefixed: moving a character between two names shows.
  auto a = t;
  a.tables[0].name = "t0x";
  a.tables[1].name = "t1";
  auto b = t;
  b.tables[0].name = "t0";
  b.tables[1].name = "xt1";
  CHECK(embplan::content_hash(a, p, "p", 0) != embplan::content_hash(b, p, "p", 0));
}

TEST_CASE("provenance_of: planner, seed, hash and this library's version") {
  const auto t = golden_task();
  const auto made = embplan::provenance_of(t, golden_plan(), "lookup_greedy", 7);
  CHECK(made.planner == "lookup_greedy");
  CHECK(made.seed == 7);
  CHECK(made.content_hash == embplan::content_hash(t, golden_plan(), "lookup_greedy", 7));
  CHECK(made.version == std::string(EMBPLAN_VERSION_STRING));
  CHECK(made.version == std::to_string(EMBPLAN_VERSION_MAJOR) + "." +
                            std::to_string(EMBPLAN_VERSION_MINOR) + "." +
                            std::to_string(EMBPLAN_VERSION_PATCH));
}

TEST_CASE("content hash: a table's tier counts only off hbm") {
  const auto t = golden_task();
  const auto p = golden_plan();
  const auto base = embplan::content_hash(t, p, "p", 1);
  auto u = t;
  u.tables[0].placement = {embplan::memory_tier::uvm_caching, 0.5};
  const auto uvm = embplan::content_hash(u, p, "p", 1);
  CHECK(uvm != base);
  u.tables[0].placement.load_factor = 0.25;
  CHECK(embplan::content_hash(u, p, "p", 1) != uvm);
  u.tables[0].placement = {embplan::memory_tier::host, 0.0};
  CHECK(embplan::content_hash(u, p, "p", 1) != base);
  CHECK(embplan::content_hash(u, p, "p", 1) != uvm);
}

TEST_CASE("content hash: a device's host DRAM counts only where it is limited") {
  auto t = golden_task();
  const auto p = golden_plan();
  for (auto& d : t.cluster.devices)
    d.dram_bytes = 0;  // not limited: the hash of a task from before dram_bytes
  CHECK(embplan::hash_hex(embplan::content_hash(t, p, "lookup_greedy", 7)) == "b986ebf52b58ca3f");
  t.cluster.devices[0].dram_bytes = 64 * embplan::gib;
  const auto one = embplan::content_hash(t, p, "lookup_greedy", 7);
  // By the independent implementation of the golden value, u64(dram_bytes)
  // after device 0's cache_bytes.
  CHECK(embplan::hash_hex(one) == "78e3bc256c1a7c0f");
  t.cluster.devices[0].dram_bytes = 32 * embplan::gib;
  CHECK(embplan::content_hash(t, p, "lookup_greedy", 7) != one);
  t.cluster.devices[0].dram_bytes = 0;
  t.cluster.devices[1].dram_bytes = 64 * embplan::gib;  // the same capacity on the other device
  CHECK(embplan::content_hash(t, p, "lookup_greedy", 7) != one);
}
