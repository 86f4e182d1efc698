#include "embplan/constraint/memory_capacity.hpp"

#include <doctest/doctest.h>

namespace {

// One 10 x 4 fp32 table (160 bytes) and two devices of 1000 bytes.
embplan::task tiny() {
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 1000;
  t.cluster = embplan::uniform_topology(2, dev);
  embplan::table_spec s;
  s.name = "t0";
  s.rows = 10;
  s.dim = 4;
  s.pooling_factor = 1.0;
  t.tables.push_back(s);
  return t;
}

}  // namespace

TEST_CASE("memory_capacity admits while the device holds the shard") {
  auto t = tiny();
  const embplan::memory_capacity rule;
  embplan::placement_state st(2);
  const auto s = embplan::whole_table(t, 0, 1);
  st.memory_bytes[1] = 800;
  CHECK(rule.admits(t, st, s));  // 960 <= 1000
  st.memory_bytes[1] = 840;
  CHECK(rule.admits(t, st, s));  // exactly full
  st.memory_bytes[1] = 841;
  CHECK_FALSE(rule.admits(t, st, s));
  st.memory_bytes[1] = 5000;  // already over: refuses, no unsigned wrap-around
  CHECK_FALSE(rule.admits(t, st, s));
  CHECK(rule.admits(t, st, embplan::whole_table(t, 0, 0)));  // device 0 is empty
  CHECK(rule.describe() == "memory capacity");
}

TEST_CASE("memory_capacity counts the optimizer state") {
  auto t = tiny();
  t.optimizer_state = embplan::optimizer::adam;  // + 8 bytes per weight: 480 bytes
  embplan::placement_state st(2);
  st.memory_bytes[0] = 520;
  CHECK(embplan::memory_capacity{}.admits(t, st, embplan::whole_table(t, 0, 0)));
  st.memory_bytes[0] = 521;
  CHECK_FALSE(embplan::memory_capacity{}.admits(t, st, embplan::whole_table(t, 0, 0)));
}

TEST_CASE("memory_capacity uses each device's own capacity") {
  auto t = tiny();
  t.cluster.devices[1].memory_bytes = 100;
  const embplan::placement_state st(2);
  CHECK(embplan::memory_capacity{}.admits(t, st, embplan::whole_table(t, 0, 0)));
  CHECK_FALSE(embplan::memory_capacity{}.admits(t, st, embplan::whole_table(t, 0, 1)));
}

TEST_CASE("memory_capacity with the bytes given answers as with the bytes computed") {
  auto t = tiny();
  const embplan::memory_capacity rule;
  embplan::placement_state st(2);
  const auto s = embplan::whole_table(t, 0, 1);
  const std::uint64_t bytes = embplan::shard_bytes(t, s);
  for (const std::uint64_t used : {0u, 800u, 840u, 841u, 5000u}) {
    CAPTURE(used);
    st.memory_bytes[1] = used;
    CHECK(rule.admits(t, st, s, bytes) == rule.admits(t, st, s));
  }
  // The given figure is the one used: 1001 bytes fit on no 1000-byte device.
  st.memory_bytes[1] = 0;
  CHECK_FALSE(rule.admits(t, st, s, 1001));
  CHECK(rule.admits(t, st, s, 1000));
}

TEST_CASE("memory_capacity's room is the device's free memory, and no larger shard is admitted") {
  auto t = tiny();
  t.cluster.devices[1].memory_bytes = 700;
  const embplan::memory_capacity rule;
  embplan::placement_state st(2);
  static_assert(embplan::room_bounding_constraint<embplan::memory_capacity>);
  CHECK(rule.room(t, st, 0) == 1000);
  CHECK(rule.room(t, st, 1) == 700);
  st.memory_bytes[0] = 840;
  CHECK(rule.room(t, st, 0) == 160);
  CHECK(embplan::room_of(rule, t, st, 0) == 160);
  st.memory_bytes[1] = 5000;  // already over: 0, no unsigned wrap-around
  CHECK(rule.room(t, st, 1) == 0);
  // The bound holds: bytes above the room are refused, up to it admitted (hbm).
  const auto s = embplan::whole_table(t, 0, 0);
  for (const std::uint64_t used : {0u, 100u, 839u, 840u, 841u, 1000u, 1200u}) {
    CAPTURE(used);
    st.memory_bytes[0] = used;
    const std::uint64_t room = rule.room(t, st, 0);
    CHECK_FALSE(rule.admits(t, st, s, room + 1));
    CHECK(rule.admits(t, st, s, room) == (used <= 1000));
  }
}

TEST_CASE("memory_capacity refuses a shard off hbm where its device's host DRAM is full") {
  auto t = tiny();  // t0: 160 bytes of weights
  t.tables[0].placement = {embplan::memory_tier::host, 0.0};
  const embplan::memory_capacity rule;
  embplan::placement_state st(2);
  const auto s = embplan::whole_table(t, 0, 1);
  st.dram_bytes[1] = 1'000'000;
  CHECK(rule.admits(t, st, s));  // dram_bytes 0: not limited
  t.cluster.devices[1].dram_bytes = 1000;
  st.dram_bytes[1] = 840;
  CHECK(rule.admits(t, st, s));  // exactly full
  CHECK(rule.admits(t, st, s, embplan::shard_bytes(t, s)));
  st.dram_bytes[1] = 841;
  CHECK_FALSE(rule.admits(t, st, s));
  CHECK_FALSE(rule.admits(t, st, s, embplan::shard_bytes(t, s)));  // both overloads
  st.dram_bytes[1] = 5000;  // already over: refuses, no unsigned wrap-around
  CHECK_FALSE(rule.admits(t, st, s));
  CHECK(rule.admits(t, st, embplan::whole_table(t, 0, 0)));  // device 0: not limited
  // uvm_caching keeps its weights in host DRAM too; its cache needs HBM as well.
  t.tables[0].placement = {embplan::memory_tier::uvm_caching, 0.5};
  CHECK_FALSE(rule.admits(t, st, s));
  st.dram_bytes[1] = 0;
  CHECK(rule.admits(t, st, s));
  st.memory_bytes[1] = 1000;  // HBM full: the cache does not fit
  CHECK_FALSE(rule.admits(t, st, s));
  // An hbm table never looks at host DRAM.
  t.tables[0].placement = {};
  st.memory_bytes[1] = 0;
  st.dram_bytes[1] = 5000;
  CHECK(rule.admits(t, st, s));
}

TEST_CASE("memory_capacity explains a table that no device's host DRAM can take") {
  auto t = tiny();
  t.tables[0].rows = std::int64_t{1} << 27;  // x 4 fp32 columns: 2 GiB of weights
  t.cluster.devices[0].dram_bytes = embplan::gib;
  t.cluster.devices[1].dram_bytes = 3 * embplan::gib / 2;
  embplan::placement_state st(2);
  st.dram_bytes[1] = embplan::gib / 4;
  const embplan::memory_capacity rule;
  CHECK(rule.explain(t, st, 0).empty());  // hbm: the HBM listing says it
  t.tables[0].placement = {embplan::memory_tier::host, 0.0};
  CHECK(rule.explain(t, st, 0) ==
        "its tier host keeps it in host DRAM, but device 1 (the roomiest) has 1342177280 bytes "
        "of host DRAM free, needs 2147483648 bytes");
  // Where a device has room, host DRAM does not bind.
  t.cluster.devices[1].dram_bytes = 3 * embplan::gib;
  CHECK(rule.explain(t, st, 0).empty());
  t.cluster.devices[1].dram_bytes = 0;
  CHECK(rule.explain(t, st, 0).empty());
}
