#include "embplan/core/plan.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "embplan/core/costs.hpp"

namespace {

embplan::task two_tables_two_devices() {
  embplan::task t;
  t.name = "tiny";
  t.cluster = embplan::uniform_topology(2);
  for (int i = 0; i < 2; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 100;
    s.dim = 16;
    s.pooling_factor = 2.0;
    t.tables.push_back(s);
  }
  return t;
}

std::string message_of(const embplan::plan& p, const embplan::task& t,
                       embplan::plan_check check = {}) {
  try {
    embplan::validate(t, p, check);
  } catch (const embplan::error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("table-wise, column-wise and row-wise plans validate") {
  const auto t = two_tables_two_devices();
  const std::vector<std::size_t> assignment{0, 1};
  const auto tw = embplan::table_wise_plan(t, assignment);
  CHECK(tw.shards.size() == 2);
  CHECK(message_of(tw, t).empty());

  embplan::plan cw;  // table 0 split by columns, table 1 whole
  cw.shards.push_back(
      {.table = 0, .device = 0, .col_begin = 0, .col_end = 8, .row_begin = 0, .row_end = 100});
  cw.shards.push_back(
      {.table = 0, .device = 1, .col_begin = 8, .col_end = 16, .row_begin = 0, .row_end = 100});
  cw.shards.push_back(embplan::whole_table(t, 1, 1));
  CHECK(message_of(cw, t, {.dim_multiple = 4}).empty());

  embplan::plan rw;  // table 0 split by rows, table 1 with a declared replica
  rw.shards.push_back(
      {.table = 0, .device = 0, .col_begin = 0, .col_end = 16, .row_begin = 0, .row_end = 30});
  rw.shards.push_back(
      {.table = 0, .device = 1, .col_begin = 0, .col_end = 16, .row_begin = 30, .row_end = 100});
  rw.shards.push_back(embplan::whole_table(t, 1, 0));
  auto replica = embplan::whole_table(t, 1, 1);
  replica.replica = true;
  rw.shards.push_back(replica);
  CHECK(message_of(rw, t).empty());
}

TEST_CASE("coverage errors name the table") {
  const auto t = two_tables_two_devices();
  embplan::plan missing;
  missing.shards.push_back(embplan::whole_table(t, 0, 0));
  auto msg = message_of(missing, t);
  CHECK(msg.find("tables[1]") != std::string::npos);
  CHECK(msg.find("\"t1\"") != std::string::npos);

  embplan::plan overlap;
  overlap.shards.push_back(embplan::whole_table(t, 0, 0));
  overlap.shards.push_back(
      {.table = 0, .device = 1, .col_begin = 0, .col_end = 4, .row_begin = 0, .row_end = 10});
  overlap.shards.push_back(embplan::whole_table(t, 1, 1));
  msg = message_of(overlap, t);
  CHECK(msg.find("tables[0]") != std::string::npos);
  CHECK(msg.find("overlap") != std::string::npos);

  embplan::plan gap;  // rows 50..100 of table 0 missing
  gap.shards.push_back(
      {.table = 0, .device = 0, .col_begin = 0, .col_end = 16, .row_begin = 0, .row_end = 50});
  gap.shards.push_back(embplan::whole_table(t, 1, 1));
  CHECK(message_of(gap, t).find("missing") != std::string::npos);
}

TEST_CASE("references out of range and bad ranges name shard, field and value") {
  const auto t = two_tables_two_devices();
  embplan::plan p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1});
  p.shards[1].device = 7;
  auto msg = message_of(p, t);
  CHECK(msg.find("shards[1].device' = 7") != std::string::npos);

  p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1});
  p.shards[0].table = 9;
  CHECK(message_of(p, t).find("shards[0].table' = 9") != std::string::npos);

  p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1});
  p.shards[0].col_end = 20;
  msg = message_of(p, t);
  CHECK(msg.find("shards[0].columns") != std::string::npos);
  CHECK(msg.find("[0, 20)") != std::string::npos);

  p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1});
  p.shards[0].row_begin = 100;
  CHECK(message_of(p, t).find("shards[0].rows") != std::string::npos);

  CHECK_THROWS_WITH_AS(embplan::table_wise_plan(t, std::vector<std::size_t>{0}),
                       doctest::Contains("assignment.size' = 1"), embplan::error);
}

TEST_CASE("column pieces must be multiples of the rule's multiple") {
  const auto t = two_tables_two_devices();
  embplan::plan p;
  p.shards.push_back(
      {.table = 0, .device = 0, .col_begin = 0, .col_end = 6, .row_begin = 0, .row_end = 100});
  p.shards.push_back(
      {.table = 0, .device = 1, .col_begin = 6, .col_end = 16, .row_begin = 0, .row_end = 100});
  p.shards.push_back(embplan::whole_table(t, 1, 1));
  CHECK(message_of(p, t).empty());
  const auto msg = message_of(p, t, {.dim_multiple = 4});
  CHECK(msg.find("shards[0].columns' = 6") != std::string::npos);
  CHECK(msg.find("multiple of 4") != std::string::npos);
}

TEST_CASE("memory caps are enforced per device") {
  auto t = two_tables_two_devices();
  t.cluster.devices[0].memory_bytes = 100 * 16 * 4 * 2 - 1;  // one byte short of both tables
  const auto both_on_0 = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 0});
  const auto msg = message_of(both_on_0, t);
  CHECK(msg.find("devices[0].memory_bytes' = 12800") != std::string::npos);
  CHECK(msg.find("12799") != std::string::npos);
  CHECK(message_of(both_on_0, t, {.memory = false}).empty());
  CHECK(message_of(embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1}), t).empty());
}

TEST_CASE("placement state tracks memory, dims and counts") {
  const auto t = two_tables_two_devices();
  embplan::plan p;
  p.shards.push_back(
      {.table = 0, .device = 0, .col_begin = 0, .col_end = 8, .row_begin = 0, .row_end = 100});
  p.shards.push_back(
      {.table = 0, .device = 1, .col_begin = 8, .col_end = 16, .row_begin = 0, .row_end = 100});
  p.shards.push_back(embplan::whole_table(t, 1, 1));
  const auto st = embplan::state_of(t, p);
  CHECK(st.memory_bytes[0] == 100 * 8 * 4);
  CHECK(st.memory_bytes[1] == 100 * 8 * 4 + 100 * 16 * 4);
  CHECK(st.dim_sum[0] == 8);
  CHECK(st.dim_sum[1] == 24);
  CHECK(st.shard_count[1] == 2);
}

TEST_CASE("plan cost: max, min and degree of balance (of compute)") {
  embplan::plan_cost c;
  c.devices.resize(3);
  c.devices[0] = {.fwd_compute_ms = 1, .bwd_compute_ms = 2, .fwd_comm_ms = 3, .bwd_comm_ms = 4};
  c.devices[1] = {.fwd_compute_ms = 5, .bwd_compute_ms = 0, .fwd_comm_ms = 0, .bwd_comm_ms = 0};
  c.devices[2] = {.fwd_compute_ms = 2, .bwd_compute_ms = 2, .fwd_comm_ms = 2, .bwd_comm_ms = 2};
  CHECK(c.max_ms() == 10.0);
  CHECK(c.min_ms() == 5.0);
  // Balance is over compute (fwd + bwd): 3, 5 and 4 ms.
  CHECK(c.balance() == 0.6);
  CHECK(embplan::plan_cost{}.balance() == 1.0);
}
