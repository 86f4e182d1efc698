#include "embplan/core/task.hpp"

#include <doctest/doctest.h>

#include <string>

namespace {

embplan::task one_table_task() {
  embplan::task t;
  t.cluster = embplan::uniform_topology(4);
  embplan::table_spec s;
  s.name = "t";
  s.rows = 10;
  s.dim = 4;
  t.tables.push_back(s);
  return t;
}

std::string message_of(const embplan::task& t) {
  try {
    embplan::validate(t);
  } catch (const embplan::error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("uniform topology names devices and groups hosts") {
  const auto topo = embplan::uniform_topology(10, {}, 4);
  CHECK(topo.size() == 10);
  CHECK(topo.devices[3].name == "cuda:3");
  CHECK(topo.host_of(3) == 0);
  CHECK(topo.host_of(4) == 1);
  CHECK(topo.host_of(9) == 2);
  CHECK(topo.devices[0].memory_bytes == 4 * embplan::gib);
}

TEST_CASE("a valid task passes; bad tasks name the field and the value") {
  CHECK(message_of(one_table_task()).empty());

  auto t = one_table_task();
  t.cluster.devices.clear();
  CHECK(message_of(t).find("task.cluster.devices' = 0") != std::string::npos);

  t = one_table_task();
  t.cluster.devices[2].memory_bytes = 0;
  CHECK(message_of(t).find("task.cluster.devices[2].memory_bytes' = 0") != std::string::npos);

  t = one_table_task();
  t.cluster.devices[1].memory_bandwidth_gbps = -3.0;
  CHECK(message_of(t).find("devices[1].memory_bandwidth_gbps' = -3") != std::string::npos);

  t = one_table_task();
  t.cluster.devices_per_host = 0;
  CHECK(message_of(t).find("devices_per_host' = 0") != std::string::npos);

  t = one_table_task();
  t.batch_size = -1;
  CHECK(message_of(t).find("task.batch_size' = -1") != std::string::npos);

  t = one_table_task();
  t.tables.clear();
  CHECK(message_of(t).find("task.tables' = 0") != std::string::npos);

  t = one_table_task();
  t.tables[0].rows = 0;
  CHECK(message_of(t).find("task.tables[0].rows' = 0") != std::string::npos);
}

TEST_CASE("a uvm_caching table needs a load factor in (0, 1]") {
  auto t = one_table_task();
  t.tables[0].placement = {embplan::memory_tier::uvm_caching, 0.0};
  CHECK(message_of(t).find("task.tables[0].load_factor' = 0") != std::string::npos);
  t.tables[0].placement.load_factor = 1.0;
  CHECK(message_of(t).empty());
  t.tables[0].placement = {embplan::memory_tier::host, 0.0};
  CHECK(message_of(t).empty());
}
