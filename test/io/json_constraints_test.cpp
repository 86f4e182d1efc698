#include "embplan/io/json_constraints.hpp"

#include <doctest/doctest.h>

#include <string>

#include "embplan/io/json_file.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace {

using embplan::test::message_of;

// Six tables t0..t5 on four devices, two per host.
embplan::task task_of_six() {
  auto t = embplan_test::random_task(1, {.tables = 6, .devices = 4});
  t.cluster.devices_per_host = 2;
  return t;
}

std::string error_of(const std::string& text) {
  const auto t = task_of_six();
  return message_of(
      [&] { (void)embplan::io::table_rules_from_json(embplan::io::parse_json(text), t); });
}

}  // namespace

TEST_CASE("constraints JSON: every rule kind read, tables by name or #index") {
  const auto t = task_of_six();
  const auto c = embplan::io::user_constraints_from_json(embplan::io::parse_json(R"({
    "tables": {"t2": {"devices": [3]},
               "#4": {"hosts": [1], "sharding": ["table_wise", "row_wise", "data_parallel"],
                      "max_shards": 2}},
    "colocate": [["t0", "t1"]],
    "separate": [["t2", "#5"]]})"),
                                                         t);
  REQUIRE(c.tables.size() == 2);  // in the object's key order: "#4" before "t2"
  CHECK(c.tables[1].table == 2);
  CHECK(c.tables[1].devices == std::vector<std::size_t>{3});
  CHECK(c.tables[1].where == "constraints.tables.t2");
  CHECK(c.tables[0].table == 4);
  CHECK(c.tables[0].hosts == std::vector<std::size_t>{1});
  CHECK(c.tables[0].sharding == std::vector{embplan::sharding_kind::table_wise,
                                            embplan::sharding_kind::row_wise,
                                            embplan::sharding_kind::data_parallel});
  CHECK(c.tables[0].max_shards == 2);
  CHECK(c.colocate == std::vector<std::vector<std::size_t>>{{0, 1}});
  CHECK(c.separate == std::vector<std::vector<std::size_t>>{{2, 5}});
  const embplan::table_rules rules(t, c);
  const embplan::placement_state st(4);
  CHECK(rules.admits(t, st, embplan::whole_table(t, 2, 3)));
  CHECK_FALSE(rules.admits(t, st, embplan::whole_table(t, 2, 0)));
}

TEST_CASE("constraints JSON: bad input names the path, the value and the expectation") {
  CHECK(error_of(R"({"table": {}})")
            .starts_with("field 'constraints.table' = {}: expected a known key (did you mean "
                         "\"tables\"?)"));
  CHECK(error_of(R"({"tables": {"t1": {"device": [0]}}})")
            .starts_with("field 'constraints.tables.t1.device' = [0]:"));
  CHECK(error_of(R"({"tables": {"t9": {"devices": [0]}}})") ==
        "field 'constraints.tables.t9' = \"t9\": expected the name of a table of task "
        "'random-1' or \"#<index>\" (did you mean \"t0\"?)");
  CHECK(error_of(R"({"tables": {"#6": {"devices": [0]}}})") ==
        "field 'constraints.tables.#6' = \"#6\": expected a table index below 6");
  CHECK(error_of(R"({"tables": {"t1": {"devices": [7]}}})") ==
        "field 'constraints.tables.t1.devices[0]' = 7: expected a device index below 4");
  CHECK(error_of(R"({"tables": {"t1": {"devices": [-1]}}})") ==
        "field 'constraints.tables.t1.devices[0]' = -1: expected a non-negative index");
  CHECK(error_of(R"({"tables": {"t1": {"devices": "0"}}})") ==
        "field 'constraints.tables.t1.devices' = \"0\": expected an array");
  CHECK(error_of(R"({"tables": {"t1": {"devices": []}}})") ==
        "field 'constraints.tables.t1.devices' = []: expected at least one device (leave the key "
        "out to allow any)");
  CHECK(error_of(R"({"tables": {"t1": {"sharding": ["grid"]}}})") ==
        "field 'constraints.tables.t1.sharding[0]' = \"grid\": expected one of table_wise, "
        "column_wise, row_wise, data_parallel");
  CHECK(error_of(R"({"tables": {"t1": {"max_shards": 0}}})") ==
        "field 'constraints.tables.t1.max_shards' = 0: expected a positive shard count");
  CHECK(error_of(R"({"colocate": [["t1", 3]]})") ==
        "field 'constraints.colocate[0][1]' = 3: expected a string");
  CHECK(error_of(R"({"colocate": ["t1"]})") ==
        "field 'constraints.colocate[0]' = \"t1\": expected an array");
  // A table named twice (by name and by index) is one table ruled twice.
  CHECK(error_of(R"({"tables": {"t1": {"devices": [0]}, "#1": {"devices": [1]}}})")
            .find("expected each table ruled once") != std::string::npos);
  // Contradictions, named with the JSON's paths.
  CHECK(error_of(R"({"tables": {"t0": {"devices": [0]}, "t1": {"devices": [1]}},
                     "colocate": [["t0", "t1"]]})")
            .starts_with("field 'constraints.colocate[0]' = \"t0, t1\": expected tables that can "
                         "share a device"));
  CHECK(error_of(R"({"colocate": [["t0", "t1"]], "separate": [["t1", "t0"]]})") ==
        "field 'constraints.separate[0]' = \"t1, t0\": expected tables not also co-located (both "
        "are in constraints.colocate[0])");
}

TEST_CASE(
    "constraints JSON: a dtype rewrites the task's table, and rules refuse a task left as it was") {
  auto t = task_of_six();
  REQUIRE(t.tables[2].weight_dtype == embplan::dtype::fp32);
  const auto j = embplan::io::parse_json(R"({"tables": {"t2": {"dtype": "fp16", "devices": [1]},
                                                       "t3": {"dtype": "int8"}}})");
  const auto c = embplan::io::user_constraints_from_json(j, t);
  REQUIRE(c.tables.size() == 2);
  CHECK(c.tables[0].weight_dtype == embplan::dtype::fp16);
  CHECK(c.tables[1].weight_dtype == embplan::dtype::int8);
  // Built on the task as read: the rule names the table, its dtype and the fix.
  CHECK(message_of([&] { (void)embplan::table_rules(t, c); }) ==
        "field 'constraints.tables.t2.dtype' = \"fp16\": expected the task's dtype of table 't2' "
        "(fp32): apply_table_rules(task, constraints) before planning");
  const auto bytes_before = embplan::table_bytes(t.tables[2]);
  embplan::apply_table_rules(t, c);
  CHECK(t.tables[2].weight_dtype == embplan::dtype::fp16);
  CHECK(t.tables[3].weight_dtype == embplan::dtype::int8);
  CHECK(t.tables[0].weight_dtype == embplan::dtype::fp32);  // unruled: unchanged
  CHECK(embplan::table_bytes(t.tables[2]) * 2 == bytes_before);
  const embplan::table_rules rules(t, c);
  const embplan::placement_state st(4);
  CHECK(rules.admits(t, st, embplan::whole_table(t, 2, 1)));
  CHECK_FALSE(rules.admits(t, st, embplan::whole_table(t, 2, 0)));
  CHECK(error_of(R"({"tables": {"t1": {"dtype": "bf16"}}})") ==
        "field 'constraints.tables.t1.dtype' = \"bf16\": expected one of \"fp32\", \"fp16\", "
        "\"int8\"");
  CHECK(error_of(R"({"tables": {"t1": {"dtype": 16}}})") ==
        "field 'constraints.tables.t1.dtype' = 16: expected a string");
}

TEST_CASE("constraints JSON: a name two tables share must be given by index") {
  auto t = task_of_six();
  t.tables[3].name = "t1";
  const auto msg = message_of([&] {
    (void)embplan::io::user_constraints_from_json(
        embplan::io::parse_json(R"({"tables": {"t1": {"devices": [0]}}})"), t);
  });
  CHECK(msg ==
        "field 'constraints.tables.t1' = \"t1\": expected a name of one table, but tables "
        "1 and 3 share it (name the table \"#<index>\")");
}

TEST_CASE("constraints JSON: a tier rewrites the task's table like a dtype; bad tiers named") {
  auto t = task_of_six();
  const auto j = embplan::io::parse_json(R"({"tables": {"t2": {"tier": "uvm_caching",
                                                              "load_factor": 0.2},
                                                       "t3": {"tier": "host"}}})");
  const auto c = embplan::io::user_constraints_from_json(j, t);
  REQUIRE(c.tables.size() == 2);
  CHECK(c.tables[0].placement == embplan::tier_placement{embplan::memory_tier::uvm_caching, 0.2});
  CHECK(message_of([&] { (void)embplan::table_rules(t, c); }) ==
        "field 'constraints.tables.t2.tier' = \"uvm_caching\": expected the task's tier of table "
        "'t2' (hbm): apply_table_rules(task, constraints) before planning");
  embplan::apply_table_rules(t, c);
  CHECK(t.tables[2].placement.tier == embplan::memory_tier::uvm_caching);
  CHECK(t.tables[3].placement.tier == embplan::memory_tier::host);
  CHECK(t.tables[0].placement.tier == embplan::memory_tier::hbm);
  CHECK_NOTHROW(embplan::table_rules(t, c));

  CHECK(error_of(R"({"tables": {"t1": {"tier": "disk"}}})")
            .starts_with("field 'constraints.tables.t1.tier' = \"disk\": expected one of"));
  CHECK(error_of(R"({"tables": {"t1": {"tier": "uvm_caching"}}})")
            .starts_with("field 'constraints.tables.t1.load_factor' = 0:"));
  CHECK(error_of(R"({"tables": {"t1": {"tier": "uvm_caching", "load_factor": 2}}})")
            .starts_with("field 'constraints.tables.t1.load_factor' = 2: expected a cache load "
                         "factor in (0, 1]"));
  CHECK(error_of(R"({"tables": {"t1": {"tier": "host", "load_factor": 0.5}}})")
            .starts_with("field 'constraints.tables.t1.load_factor' = 0.5: expected a load factor "
                         "only with"));
  CHECK(error_of(R"({"tables": {"t1": {"load_factor": 0.5}}})")
            .starts_with("field 'constraints.tables.t1.load_factor' = 0.5:"));
}
