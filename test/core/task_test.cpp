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

TEST_CASE("hosts divide the devices: one partial host, or hosts of devices_per_host") {
  auto t = one_table_task();  // 4 devices, devices_per_host 8: one partly filled host
  CHECK(message_of(t).empty());
  t.cluster = embplan::uniform_topology(16, {}, 8);
  CHECK(message_of(t).empty());
  t.cluster.devices_per_host = 16;  // one full host
  CHECK(message_of(t).empty());
  t.cluster.devices_per_host = 32;  // one host, half filled
  CHECK(message_of(t).empty());
  t.cluster.devices_per_host = 3;  // hosts {0, 1, 2} ... {15}: the last one partial
  CHECK(message_of(t) ==
        "field 'task.cluster.devices_per_host' = 3: expected a divisor of the 16 devices (hosts "
        "of equal size), or at least their number (one host)");
  t.cluster = embplan::uniform_topology(12, {}, 8);
  CHECK(message_of(t).find("field 'task.cluster.devices_per_host' = 8: expected a divisor of "
                           "the 12 devices") != std::string::npos);
  // validate(topology) alone names the topology.
  try {
    embplan::validate(t.cluster);
    FAIL("12 devices in hosts of 8 validated");
  } catch (const embplan::error& e) {
    CHECK(std::string(e.what()).find("field 'topology.devices_per_host' = 8") != std::string::npos);
  }
}

TEST_CASE("uniform_topology's default hosts: servers of up to 8 that divide the devices") {
  CHECK(embplan::uniform_topology(4).devices_per_host == 8);
  CHECK(embplan::uniform_topology(8).devices_per_host == 8);
  CHECK(embplan::uniform_topology(24).devices_per_host == 8);
  CHECK(embplan::uniform_topology(12).devices_per_host == 6);
  CHECK(embplan::uniform_topology(20).devices_per_host == 5);
  CHECK(embplan::uniform_topology(13).devices_per_host == 1);
  CHECK(embplan::uniform_topology(12, {}, 4).devices_per_host == 4);  // given: kept
  for (std::size_t n = 1; n <= 100; ++n) {
    CAPTURE(n);
    CHECK_NOTHROW(embplan::validate(embplan::uniform_topology(n)));
  }
}

TEST_CASE("each bandwidth and the latency: a bad value names its field and value") {
  auto t = one_table_task();
  t.cluster.devices[3].cache_bandwidth_gbps = 0.0;
  CHECK(message_of(t) ==
        "field 'task.cluster.devices[3].cache_bandwidth_gbps' = 0: expected a positive bandwidth");
  t = one_table_task();
  t.cluster.devices[0].memory_bandwidth_gbps = 0.0;
  CHECK(message_of(t) ==
        "field 'task.cluster.devices[0].memory_bandwidth_gbps' = 0: expected a positive bandwidth");
  t = one_table_task();
  t.cluster.intra_host_bandwidth_gbps = 0.0;
  CHECK(message_of(t) ==
        "field 'task.cluster.intra_host_bandwidth_gbps' = 0: expected a positive bandwidth");
  t = one_table_task();
  t.cluster.inter_host_bandwidth_gbps = -12.5;
  CHECK(message_of(t) ==
        "field 'task.cluster.inter_host_bandwidth_gbps' = -12.5: expected a positive bandwidth");
  t = one_table_task();
  t.cluster.collective_latency_ms = -0.5;
  CHECK(message_of(t) ==
        "field 'task.cluster.collective_latency_ms' = -0.5: expected a latency >= 0");
}
