// Data-parallel tables (docs/sharding.md): the copies in a plan, how
// they are checked, priced, written and chosen (stage/data_parallel.hpp, stage/staged.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/collectives.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/io/json_plan.hpp"
#include "embplan/io/torchrec.hpp"
#include "embplan/presets.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/stage/staged.hpp"

#include "support/message_of.hpp"
#include "support/random_task.hpp"

using embplan::test::message_of;

namespace {

// 4 devices; table 0 small (100 rows x 16), tables 1.. larger.
embplan::task small_and_large() {
  auto t = embplan_test::random_task(5, {.tables = 8, .devices = 4, .max_rows = 200'000});
  t.tables[0].rows = 100;
  t.tables[0].dim = 16;
  return t;
}

// Table `ti` as data-parallel copies on every device, the others whole on
// device i mod D.
embplan::plan with_copies(const embplan::task& t, std::size_t ti) {
  embplan::plan p;
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    if (i == ti) {
      for (std::size_t d = 0; d < t.cluster.size(); ++d)
        p.shards.push_back(embplan::stage::data_parallel_copy(t, i, d));
    } else {
      p.shards.push_back(embplan::whole_table(t, i, i % t.cluster.size()));
    }
  }
  return p;
}

std::size_t copies_of(const embplan::plan& p, std::size_t table) {
  std::size_t n = 0;
  for (const auto& s : p.shards)
    n += (s.table == table && s.data_parallel) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("a data-parallel table is one whole copy on every device; anything else is named") {
  const auto t = small_and_large();
  const auto good = with_copies(t, 0);
  CHECK(embplan::plan_problems(t, good).empty());

  auto missing = good;
  missing.shards.erase(missing.shards.begin() + 2);  // table 0's copy on device 2
  auto problems = embplan::plan_problems(t, missing);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == embplan::plan_problem_kind::data_parallel);
  CHECK(to_string(problems[0]) ==
        "table 0 't0': field 'tables[0]' = \"t0\": expected one data-parallel copy on every "
        "device, but device 2 'cuda:2' holds 0");

  auto twice = good;
  twice.shards[1].device = 0;
  problems = embplan::plan_problems(t, twice);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].message.find("device 0 'cuda:0' holds 2") != std::string::npos);

  auto part = good;
  part.shards[3].col_end = 8;
  problems = embplan::plan_problems(t, part);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems[0].message ==
        "field 'shards[3].data_parallel' = true: expected a data-parallel copy of the whole "
        "table (columns [0, 16), rows [0, 100))");

  auto mixed = good;
  mixed.shards.push_back(embplan::whole_table(t, 0, 1));
  problems = embplan::plan_problems(t, mixed);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].message.find("held by its copies alone, but shard 11 is a piece of it") !=
        std::string::npos);

  auto replica = good;
  replica.shards[0].replica = true;
  CHECK(message_of([&] { embplan::validate(t, replica); }) ==
        "field 'shards[0].replica' = true: expected false for a data-parallel copy (each copy "
        "is a whole table)");

  auto cached = t;
  cached.tables[0].placement = {.tier = embplan::memory_tier::uvm_caching, .load_factor = 0.5};
  CHECK(message_of([&] { embplan::validate(cached, good); }) ==
        "field 'tables[0].tier' = \"uvm_caching\": expected hbm for a data-parallel table "
        "(TorchRec runs one with a dense kernel)");
}

TEST_CASE("copies count in memory but send no columns; their kind and sharding type say so") {
  const auto t = small_and_large();
  const auto p = with_copies(t, 0);
  const auto st = embplan::state_of(t, p);
  const auto bytes = embplan::table_bytes(t.tables[0]);
  for (std::size_t d = 0; d < 4; ++d) {
    std::uint64_t others = 0;
    std::int64_t dims = 0;
    for (std::size_t i = 1; i < t.tables.size(); ++i) {
      if (i % 4 != d) continue;
      others += embplan::table_bytes(t.tables[i]);
      dims += t.tables[i].dim;
    }
    CHECK(st.memory_bytes[d] == others + bytes);
    CHECK(st.dim_sum[d] == dims);
  }
  auto back = st;
  back.unplace(t, p.shards[0]);
  CHECK(back.dim_sum == st.dim_sum);
  CHECK(back.memory_bytes[p.shards[0].device] == st.memory_bytes[p.shards[0].device] - bytes);

  CHECK(embplan::kind_of(t, p.shards[0]) == embplan::sharding_kind::data_parallel);
  const embplan::shard* pieces[] = {&p.shards[0], &p.shards[1]};
  CHECK(embplan::sharding_type_of(t.tables[0], pieces) == "data_parallel");
  CHECK(embplan::describe_shard(t, p.shards[1]) ==
        "table 0 't0' columns [0, 16) rows [0, 100) (data-parallel copy) on device 1");
  // A copy is priced as its device's share of the batch.
  const auto piece = embplan::piece_table(t, p.shards[0]);
  CHECK(piece.pooling_factor == doctest::Approx(t.tables[0].pooling_factor / 4.0));
}

TEST_CASE("the analytic model prices a copy as the table on 1/D of the batch") {
  auto t = small_and_large();
  t.tables[0].rows = 50'000;
  t.tables[0].reuse_hist = {0.5, 0.3, 0.0, 0.0, 0.2};
  auto quarter = t;
  quarter.batch_size = t.batch_size / 4;
  const embplan::analytic_cost model;
  const auto copy = embplan::stage::data_parallel_copy(t, 0, 2);
  CHECK(model.piece_forward_ms(t, copy, 2) ==
        doctest::Approx(model.piece_forward_ms(quarter, embplan::whole_table(quarter, 0, 2), 2))
            .epsilon(1e-12));
  CHECK(model.piece_forward_ms(t, copy, 2) <
        model.piece_forward_ms(t, embplan::whole_table(t, 0, 2), 2) / 3.0);
}

TEST_CASE("all_reduce_ms: a ring inside a host, two levels across hosts") {
  auto topo = embplan::uniform_topology(4);  // one host, 12 GB/s, latency 0.05 ms
  CHECK(embplan::all_reduce_ms(topo, 0) == 0.0);
  CHECK(embplan::all_reduce_ms(topo, 1'000'000) ==
        doctest::Approx(0.05 + 2.0 * 3.0 / 4.0 * 1e6 / 12e6));
  topo = embplan::uniform_topology(16);  // two hosts of 8, 12.5 GB/s between them
  CHECK(embplan::all_reduce_ms(topo, 1'000'000) ==
        doctest::Approx(0.05 + 2.0 * 7.0 / 8.0 * 1e6 / 12e6 + 2.0 * 0.5 * (1e6 / 8.0) / 12.5e6));
  CHECK(embplan::all_reduce_ms(embplan::uniform_topology(1), 1'000'000) == 0.0);
  // Each all-to-all column: forward and backward, 1/D of the batch in fp32.
  CHECK(embplan::all_to_all_column_ms(embplan::uniform_topology(4), 65536) ==
        doctest::Approx(2.0 * 16384.0 * 4.0 / 12e6));
}

TEST_CASE("evaluate adds the copies' compute and one all-reduce of their gradients") {
  const auto t = small_and_large();
  const auto p = with_copies(t, 0);
  const embplan::analytic_cost model;
  const auto cost = embplan::evaluate(t, p, model);
  embplan::plan without;  // the same plan less the copies
  for (const auto& s : p.shards)
    if (!s.data_parallel) without.shards.push_back(s);
  auto rest = t;  // table 0 still in the task, nowhere in `without`: priced per device
  const auto base = embplan::evaluate(rest, without, model);
  const double reduce = embplan::all_reduce_ms(t.cluster, 100 * 16 * 4);
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(cost.devices[d].bwd_comm_ms == doctest::Approx(base.devices[d].bwd_comm_ms + reduce));
    const double copy_ms =
        model.piece_forward_ms(t, embplan::stage::data_parallel_copy(t, 0, d), d);
    const double launch =
        base.devices[d].fwd_compute_ms == 0.0 ? model.options.kernel_launch_ms : 0;
    CHECK(cost.devices[d].fwd_compute_ms ==
          doctest::Approx(base.devices[d].fwd_compute_ms + copy_ms + launch));
  }
  CHECK(embplan::data_parallel_bytes(t, p) == 100 * 16 * 4);
}

TEST_CASE("copies round-trip through JSON and export as TorchRec's data_parallel") {
  const auto t = small_and_large();
  const auto p = with_copies(t, 0);
  const auto j = embplan::io::to_json(t, p);
  CHECK(j.at("shards")[0].at("data_parallel") == true);
  CHECK_FALSE(j.at("shards")[4].contains("data_parallel"));  // written only when true
  CHECK(embplan::io::plan_from_json(j, t) == p);
  auto bad = j;
  bad["shards"][0]["data_parallel"] = 3;
  CHECK(message_of([&] {
          (void)embplan::io::plan_from_json(bad, t);
        }).find("shards[0].data_parallel") != std::string::npos);

  const auto tr = embplan::io::torchrec_sharding(t, p);
  const auto& entry = tr.at("t0");
  CHECK(entry.at("sharding_type") == "data_parallel");
  CHECK(entry.at("compute_kernel") == "dense");
  CHECK(entry.at("ranks") == nlohmann::json({0, 1, 2, 3}));
  CHECK(entry.at("sharding_spec").is_null());
  CHECK(tr.at("t1").at("sharding_type") == "table_wise");
}

TEST_CASE("user rules: data_parallel is a sharding kind like the others") {
  const auto t = small_and_large();
  const auto copy = embplan::stage::data_parallel_copy(t, 0, 1);
  const embplan::placement_state empty(4);
  const embplan::table_rules only_whole(
      t, {.tables = {{.table = 0, .sharding = {embplan::sharding_kind::table_wise}}}});
  CHECK_FALSE(only_whole.admits(t, empty, copy));
  const embplan::table_rules only_dp(
      t, {.tables = {{.table = 0, .sharding = {embplan::sharding_kind::data_parallel}}}});
  CHECK(only_dp.admits(t, empty, copy));
  CHECK_FALSE(only_dp.admits(t, empty, embplan::whole_table(t, 0, 1)));
  CHECK(embplan::parse_sharding_kind("data_parallel", "f") ==
        embplan::sharding_kind::data_parallel);
  CHECK(message_of([] { (void)embplan::parse_sharding_kind("replicated", "rules.sharding[0]"); }) ==
        "field 'rules.sharding[0]' = \"replicated\": expected one of table_wise, column_wise, "
        "row_wise, data_parallel");
}

namespace {

// 4 devices of one host; 6 tiny tables (64 rows, pooling 20: copies are
// cheaper than their all-to-all) and 10 of at least 100,000 rows (whose
// gradients take longer to all-reduce than their columns to send).
embplan::task tiny_tables_task() {
  auto t = embplan_test::search_task(21, 16, 4);
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    if (i >= 6) {
      t.tables[i].rows = std::max<std::int64_t>(t.tables[i].rows, 100'000);
      continue;
    }
    t.tables[i].rows = 64;
    t.tables[i].dim = 32;
    t.tables[i].pooling_factor = 20.0;
  }
  return t;
}

embplan::stage::data_parallel_options on() {
  return {.enabled = true};
}

}  // namespace

TEST_CASE("planners replicate the tables that are cheaper data-parallel, and plan the rest") {
  const auto t = tiny_tables_task();
  for (const char* name :
       {"torchrec_like", "lookup_greedy", "neuroshard_plus", "rowwise_torchrec_like"}) {
    CAPTURE(name);
    const auto plain = embplan::run_preset(name, t);
    const auto dp = embplan::run_preset(name, t, 0, embplan::analytic_cost{}, {}, {}, on());
    REQUIRE(plain.ok);
    REQUIRE(dp.ok);
    CHECK(embplan::plan_problems(t, dp.placement, {.dim_multiple = 4}).empty());
    for (std::size_t i = 0; i < 6; ++i)
      CHECK(copies_of(dp.placement, i) == 4);
    for (std::size_t i = 6; i < t.tables.size(); ++i)
      CHECK(copies_of(dp.placement, i) == 0);
    // The same plan again (same seed), and cheaper than without the copies.
    CHECK(embplan::run_preset(name, t, 0, embplan::analytic_cost{}, {}, {}, on()).placement ==
          dp.placement);
    const embplan::analytic_cost model;
    CHECK(embplan::evaluate(t, dp.placement, model).max_ms() <
          embplan::evaluate(t, plain.placement, model).max_ms());
  }
}

TEST_CASE(
    "no copies where they do not pay, where the memory budget is zero, or where rules forbid") {
  auto t = tiny_tables_task();
  const embplan::torchrec_like_planner base;
  const auto run = [&](const embplan::task& task, embplan::stage::data_parallel_options o,
                       const embplan::table_rules& rules = {}) {
    using wrapped = embplan::rowwise_planner_of<embplan::torchrec_like_planner>;
    const wrapped p({}, {.inner = {}, .settings = {.data_parallel = o}},
                    {embplan::memory_capacity{}, embplan::dim_multiple{}, rules}, {});
    return p(task, 0);
  };
  const auto plain = base(t, 0);
  auto zero = on();
  zero.memory_fraction = 0.0;
  CHECK(run(t, zero).placement == plain.placement);
  CHECK(run(t, {}).placement == plain.placement);  // disabled

  auto slow = t;  // an all-reduce start-up no saving covers
  slow.cluster.collective_latency_ms = 1000.0;
  CHECK(run(slow, on()).placement == base(slow, 0).placement);

  const embplan::table_rules rules(
      t, {.tables = {{.table = 2, .sharding = {embplan::sharding_kind::table_wise}}}});
  const auto ruled = run(t, on(), rules);
  REQUIRE(ruled.ok);
  CHECK(copies_of(ruled.placement, 2) == 0);
  CHECK(copies_of(ruled.placement, 1) == 4);

  CHECK(message_of([&] {
          auto bad = on();
          bad.memory_fraction = 2.0;
          (void)run(t, bad);
        }) == "field 'data_parallel.memory_fraction' = 2: expected a fraction in [0, 1]");
}

TEST_CASE("a table the user allows only data_parallel is replicated whatever it costs") {
  auto t = tiny_tables_task();
  const embplan::table_rules rules(
      t, {.tables = {{.table = 9, .sharding = {embplan::sharding_kind::data_parallel}}}});
  const auto r =
      embplan::run_preset("torchrec_like", t, 0, embplan::analytic_cost{}, {}, rules, on());
  REQUIRE(r.ok);
  CHECK(copies_of(r.placement, 9) == 4);
  CHECK(embplan::plan_problems(t, r.placement).empty());
  // Without the stage, no searcher can place it.
  const auto off = embplan::run_preset("torchrec_like", t, 0, embplan::analytic_cost{}, {}, rules);
  CHECK_FALSE(off.ok);
}
