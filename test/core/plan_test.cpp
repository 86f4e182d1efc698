#include "embplan/core/plan.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "embplan/core/costs.hpp"
#include "embplan/core/random.hpp"

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

TEST_CASE("coverage of a table in 50,000 one-row shards: valid, an overlap and a gap found") {
  constexpr std::int64_t rows = 50000;
  embplan::task t;
  t.name = "many";
  t.cluster = embplan::uniform_topology(4);
  embplan::table_spec spec;
  spec.name = "big";
  spec.rows = rows;
  spec.dim = 8;
  spec.pooling_factor = 1.0;
  t.tables.push_back(spec);
  embplan::plan p;
  for (std::int64_t r = rows; r-- > 0;) {  // listed bottom-up: the check must not rely on order
    p.shards.push_back({.table = 0,
                        .device = static_cast<std::uint32_t>(r % 4),
                        .col_begin = 0,
                        .col_end = 8,
                        .row_begin = r,
                        .row_end = r + 1});
  }
  const embplan::plan_check no_memory{.memory = false};
  CHECK(message_of(p, t, no_memory).empty());

  auto overlap = p;  // shard 100 (row 49899) grows into row 49900, shard 99's
  overlap.shards[100].row_end += 1;
  auto msg = message_of(overlap, t, no_memory);
  CHECK(msg.find("tables[0]") != std::string::npos);
  CHECK(msg.find("shards 99 and 100 overlap") != std::string::npos);

  auto gap = p;  // row 30000 uncovered
  gap.shards.erase(gap.shards.begin() + (rows - 1 - 30000));
  msg = message_of(gap, t, no_memory);
  CHECK(msg.find("\"big\"") != std::string::npos);
  CHECK(msg.find("some are missing") != std::string::npos);
}

TEST_CASE("column pieces and row pieces of one table: overlaps found exactly") {
  const auto t = two_tables_two_devices();  // tables of 100 rows x 16 columns
  const auto piece = [](std::int32_t c0, std::int32_t c1, std::int64_t r0, std::int64_t r1) {
    return embplan::shard{
        .table = 0, .device = 0, .col_begin = c0, .col_end = c1, .row_begin = r0, .row_end = r1};
  };
  embplan::plan mixed;  // columns 0..8 whole; columns 8..16 split by rows
  mixed.shards = {piece(0, 8, 0, 100), piece(8, 16, 0, 40), piece(8, 16, 40, 100),
                  embplan::whole_table(t, 1, 1)};
  CHECK(message_of(mixed, t).empty());
  auto wide = mixed;  // the first row piece reaches into the whole column piece
  wide.shards[1].col_begin = 6;
  CHECK(message_of(wide, t).find("shards 0 and 1 overlap") != std::string::npos);
  auto touching = mixed;  // blocks that only meet at an edge do not overlap
  touching.shards = {piece(0, 8, 0, 50), piece(0, 8, 50, 100), piece(8, 16, 0, 50),
                     piece(8, 16, 50, 100), embplan::whole_table(t, 1, 1)};
  CHECK(message_of(touching, t).empty());

  // Random blocks on a 6 x 6 grid: the sweep agrees with the pairwise test.
  embplan::task grid = t;
  grid.tables[0].rows = 6;
  grid.tables[0].dim = 6;
  embplan::rng gen(7);
  for (int trial = 0; trial < 2000; ++trial) {
    embplan::plan p;
    const auto n = 2 + gen.below(5);
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto c0 = static_cast<std::int32_t>(gen.below(6));
      const auto c1 =
          c0 + 1 + static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(6 - c0)));
      const auto r0 = static_cast<std::int64_t>(gen.below(6));
      const auto r1 =
          r0 + 1 + static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(6 - r0)));
      p.shards.push_back(piece(c0, c1, r0, r1));
    }
    p.shards.push_back(embplan::whole_table(grid, 1, 1));
    bool pairwise = false;
    for (std::size_t a = 0; a + 1 < p.shards.size(); ++a) {
      for (std::size_t b = a + 1; b + 1 < p.shards.size(); ++b) {
        const auto& x = p.shards[a];
        const auto& y = p.shards[b];
        pairwise = pairwise || (x.col_begin < y.col_end && y.col_begin < x.col_end &&
                                x.row_begin < y.row_end && y.row_begin < x.row_end);
      }
    }
    CHECK((message_of(p, grid).find("overlap") != std::string::npos) == pairwise);
  }
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

TEST_CASE("shard_bytes counts HBM by the table's tier; shard_dram_bytes the host DRAM") {
  auto t = two_tables_two_devices();
  t.optimizer_state = embplan::optimizer::rowwise_adagrad;
  const embplan::shard whole = embplan::whole_table(t, 0, 0);
  const embplan::shard half{0, 0, 0, 16, 0, 50, false};
  // hbm: as before tiers, weights and optimizer state.
  CHECK(embplan::shard_bytes(t, whole) == 100 * 16 * 4 + 100 * 4);
  CHECK(embplan::shard_dram_bytes(t, whole) == 0);

  // uvm_caching: the HBM items storage.hpp charges, nothing more.
  t.tables[0].placement = {embplan::memory_tier::uvm_caching, 0.1};
  for (const auto& s : {whole, half}) {
    const auto items =
        embplan::shard_storage(t.tables[0], s.rows(), static_cast<std::int32_t>(s.cols()), 1,
                               t.optimizer_state, t.tables[0].placement);
    CHECK(embplan::shard_bytes(t, s) == items.weights.hbm_bytes + items.cache_state.hbm_bytes);
    CHECK(embplan::shard_dram_bytes(t, s) ==
          items.weights.host_bytes + items.optimizer_state.host_bytes);
  }
  CHECK(embplan::shard_bytes(t, whole) == 10 * (16 * 4 + 16) + 100 * 4);
  CHECK(embplan::shard_dram_bytes(t, whole) == 100 * 16 * 4 + 100 * 4);

  // host: nothing in HBM.
  t.tables[0].placement = {embplan::memory_tier::host, 0.0};
  CHECK(embplan::shard_bytes(t, whole) == 0);
  CHECK(embplan::shard_dram_bytes(t, whole) == 100 * 16 * 4 + 100 * 4);
}

TEST_CASE("memory checks see HBM: a table too big for a device fits it off hbm") {
  auto t = two_tables_two_devices();
  for (auto& d : t.cluster.devices)
    d.memory_bytes = 4000;  // one table's 6,400 bytes do not fit
  const auto p = embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1});
  CHECK(!message_of(p, t).empty());
  t.tables[0].placement = {embplan::memory_tier::uvm_caching, 0.1};
  t.tables[1].placement = {embplan::memory_tier::host, 0.0};
  CHECK(message_of(p, t).empty());
}

TEST_CASE("placement state counts host DRAM of the tables off hbm, and takes it back") {
  auto t = two_tables_two_devices();
  t.tables[1].placement = {embplan::memory_tier::uvm_caching, 0.1};
  embplan::placement_state st(2);
  CHECK(st.dram_bytes == std::vector<std::uint64_t>{0, 0});
  const auto hbm_table = embplan::whole_table(t, 0, 1);
  const auto cached_table = embplan::whole_table(t, 1, 1);
  st.place(t, hbm_table);
  CHECK(st.dram_bytes[1] == 0);  // hbm: none
  st.place(t, cached_table);
  CHECK(st.dram_bytes[1] == 100 * 16 * 4);
  CHECK(st.dram_bytes[0] == 0);
  st.unplace(t, cached_table);
  CHECK(st.dram_bytes[1] == 0);
  CHECK(st.memory_bytes[1] == embplan::shard_bytes(t, hbm_table));
  t.tables[0].placement = {embplan::memory_tier::host, 0.0};
  CHECK(embplan::state_of(t, embplan::table_wise_plan(t, std::vector<std::size_t>{0, 0}))
            .dram_bytes[0] == 2 * 100 * 16 * 4);
}

TEST_CASE("host DRAM caps are enforced per device where set; 0 is not limited") {
  auto t = two_tables_two_devices();
  t.tables[0].placement = {embplan::memory_tier::host, 0.0};
  t.tables[1].placement = {embplan::memory_tier::uvm_caching, 0.1};
  const auto both_on_1 = embplan::table_wise_plan(t, std::vector<std::size_t>{1, 1});
  CHECK(message_of(both_on_1, t).empty());                 // dram_bytes 0: not limited
  t.cluster.devices[1].dram_bytes = 2 * 100 * 16 * 4 - 1;  // one byte short of both tables
  CHECK(message_of(both_on_1, t) ==
        "field 'devices[1].dram_bytes' = 12800: expected at most the capacity 12799");
  const auto problems = embplan::plan_problems(t, both_on_1);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == embplan::plan_problem_kind::memory);
  CHECK(problems[0].subject == "device 1 'cuda:1'");
  CHECK(message_of(both_on_1, t, {.memory = false}).empty());
  CHECK(message_of(embplan::table_wise_plan(t, std::vector<std::size_t>{0, 1}), t).empty());
  t.cluster.devices[1].dram_bytes = 2 * 100 * 16 * 4;  // exactly full
  CHECK(message_of(both_on_1, t).empty());
  // An hbm table uses no host DRAM, whatever the cap.
  t.tables[0].placement = {};
  t.tables[1].placement = {};
  t.cluster.devices[1].dram_bytes = 1;
  CHECK(message_of(both_on_1, t).empty());
}
