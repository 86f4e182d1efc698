// The task and table readers' number ranges (docs/formats.md): a number that
// would make later arithmetic non-finite is refused at the reader, naming the
// field, the value and the range; two devices with one name are refused.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/io/json_task.hpp"
#include "support/message_of.hpp"

namespace number_ranges_test {

using embplan::test::message_of;
using nlohmann::json;

json base_task() {
  return json::parse(R"({"name": "ranges",
      "tables": [{"name": "a", "rows": 1000, "dim": 16, "pooling_factor": 2},
                 {"name": "b", "rows": 1000, "dim": 16, "pooling_factor": 2}],
      "cluster": {"devices": [{"name": "g0"}, {"name": "g1"}]}})");
}

std::string refused(const json& j) {
  return message_of([&] { (void)embplan::io::task_from_json(j); });
}

}  // namespace number_ranges_test

using namespace number_ranges_test;

TEST_CASE("number ranges: a table's pooling factor beyond 1e6 is refused, naming the range") {
  auto j = base_task();
  j["tables"][1]["pooling_factor"] = 1e300;
  CHECK(refused(j) ==
        "field 'task.tables[1].pooling_factor' = 1e+300: expected a finite number >= 0 and at "
        "most 1e6 (mean lookups per bag)");
  j["tables"][1]["pooling_factor"] = 1e6;  // the bound itself reads, and prices finite
  const auto t = embplan::io::task_from_json(j);
  const auto p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1});
  CHECK(std::isfinite(embplan::evaluate(t, p, embplan::analytic_cost{}).max_ms()));
  j["tables"][1]["pooling_factor"] = -1;
  CHECK(refused(j).find("'task.tables[1].pooling_factor' = -1: expected a finite number >= 0 and "
                        "at most 1e6") != std::string::npos);
}

TEST_CASE("number ranges: bandwidths from 0.001 to 1e6 GB/s, latency from 0 to 1e6 ms") {
  const std::string range = "expected a bandwidth from 0.001 to 1e6 GB/s";
  auto j = base_task();
  j["cluster"]["devices"][0]["memory_bandwidth_gbps"] = 1e-320;
  CHECK(refused(j) == "field 'task.cluster.devices[0].memory_bandwidth_gbps' = 1e-320: " + range);
  j = base_task();
  j["cluster"]["devices"][1]["cache_bandwidth_gbps"] = 1e7;
  CHECK(refused(j) ==
        "field 'task.cluster.devices[1].cache_bandwidth_gbps' = 10000000.0: " + range);
  j = base_task();
  j["cluster"]["intra_host_bandwidth_gbps"] = 1e-9;
  CHECK(refused(j) == "field 'task.cluster.intra_host_bandwidth_gbps' = 1e-09: " + range);
  j = base_task();
  j["cluster"]["inter_host_bandwidth_gbps"] = 1e300;
  CHECK(refused(j) == "field 'task.cluster.inter_host_bandwidth_gbps' = 1e+300: " + range);
  j = base_task();
  j["cluster"]["collective_latency_ms"] = 1e300;
  CHECK(refused(j) ==
        "field 'task.cluster.collective_latency_ms' = 1e+300: expected a latency "
        "from 0 to 1e6 ms");
  // A uniform cluster's device too.
  j = json::parse(R"({"tables": [{"rows": 10, "dim": 4, "pooling_factor": 1}],
                      "cluster": {"count": 2, "device": {"memory_bandwidth_gbps": 1e-320}}})");
  CHECK(refused(j).find("'task.cluster.device.memory_bandwidth_gbps' = 1e-320: " + range) !=
        std::string::npos);
}

TEST_CASE("number ranges: a cluster holds 1 to 65536 devices") {
  auto j = json::parse(R"({"tables": [{"rows": 10, "dim": 4, "pooling_factor": 1}],
                           "cluster": {"count": 65537}})");
  CHECK(refused(j) ==
        "field 'task.cluster.count' = 65537: expected a positive device count up to 65536");
  j["cluster"]["count"] = 65536;
  CHECK(embplan::io::task_from_json(j).cluster.size() == 65536);
  j["cluster"] = {{"devices", json::array()}};
  for (int i = 0; i < 65537; ++i)
    j["cluster"]["devices"].push_back(json::object());
  CHECK(refused(j) == "field 'task.cluster.devices' = 65537: expected at most 65536 devices");
}

TEST_CASE("number ranges: two devices with one name are refused, naming both") {
  auto j = base_task();
  j["cluster"]["devices"][1]["name"] = "g0";
  CHECK(refused(j) ==
        "field 'task.cluster.devices[1].name' = \"g0\": expected a name no other "
        "device has (device 0 is named so too)");
  // A listed device without a name is cuda:<index>: one named so collides.
  j = base_task();
  j["cluster"]["devices"][0].erase("name");
  j["cluster"]["devices"][1]["name"] = "cuda:0";
  CHECK(refused(j).find("'task.cluster.devices[1].name' = \"cuda:0\"") != std::string::npos);
}
