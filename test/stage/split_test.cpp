#include "embplan/stage/staged.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/io/json_plan.hpp"
#include "embplan/io/torchrec.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/random_placement.hpp"
#include "embplan/search/sorted_greedy.hpp"

#include "support/random_task.hpp"

static_assert(embplan::searcher<embplan::stage::staged<embplan::sorted_greedy>>);
static_assert(embplan::searcher<embplan::stage::staged<embplan::random_placement>>);

namespace {

// 8 devices of 4 GiB, 12 small tables and one of 2e9 rows x 4 fp16 (16 GB,
// ~14.9 GiB): no device holds it, four do together.
embplan::task huge_task() {
  auto t = embplan_test::random_task(11, {.tables = 12, .devices = 8, .max_rows = 200'000});
  embplan::table_spec big;
  big.name = "user_ids";
  big.rows = 2'000'000'000;
  big.dim = 4;
  big.pooling_factor = 1.0;
  big.reuse_hist[0] = 1.0;
  big.weight_dtype = embplan::dtype::fp16;
  t.tables.insert(t.tables.begin() + 5, big);
  return t;
}

}  // namespace

TEST_CASE("a table larger than any device is split by rows; the plan is valid and fits") {
  const auto t = huge_task();
  const auto plain = embplan::run_preset("lookup_greedy", t);
  CHECK_FALSE(plain.ok);
  CHECK(plain.failure.find("table 'user_ids' (index 5") != std::string::npos);

  const auto r = embplan::run_preset("rowwise_lookup_greedy", t);
  REQUIRE(r.ok);
  CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
  std::size_t row_shards = 0;
  std::int64_t covered = 0;
  for (const auto& s : r.placement.shards) {
    if (s.table != 5) continue;
    ++row_shards;
    covered += s.rows();
    CHECK(s.cols() == 4);
    CHECK_FALSE(s.replica);
  }
  CHECK(row_shards == 4);  // the fewest 4 GiB devices that hold 14.9 GiB
  CHECK(covered == 2'000'000'000);
  // Same result as the typed preset, and deterministic.
  const auto typed = embplan::rowwise_lookup_greedy_planner{}(t);
  CHECK(typed.placement == r.placement);
}

TEST_CASE("row-wise plans round-trip through JSON and show row offsets in the TorchRec export") {
  const auto t = huge_task();
  const auto r = embplan::run_preset("rowwise_size_lookup_greedy", t);
  REQUIRE(r.ok);
  const auto j = embplan::io::to_json(t, r.placement);
  CHECK(embplan::io::plan_from_json(j, t) == r.placement);
  const auto tr = embplan::io::torchrec_sharding(t, r.placement);
  const auto& entry = tr.at("user_ids");
  CHECK(entry.at("sharding_type") == "row_wise");
  const auto& shards = entry.at("sharding_spec").at("shards");
  REQUIRE(shards.size() == 4);
  std::int64_t next = 0;
  for (const auto& s : shards) {
    CHECK(s.at("shard_offsets")[0].get<std::int64_t>() == next);
    CHECK(s.at("shard_offsets")[1] == 0);
    CHECK(s.at("shard_sizes")[1] == 4);
    next += s.at("shard_sizes")[0].get<std::int64_t>();
  }
  CHECK(next == 2'000'000'000);
}

TEST_CASE("hot rows are replicated on the other row-shard devices, memory counted") {
  const auto t = huge_task();
  const embplan::stage::staged<embplan::sorted_greedy> search{
      .settings = {.split_rows = true, .hot_rows = 1'000}};
  const auto r = search.search(t, embplan::lookup_cost{}, embplan::default_constraint{},
                               embplan::balance_reward{}, 0);
  REQUIRE(r.ok);
  CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
  std::size_t replicas = 0;
  for (const auto& s : r.placement.shards) {
    if (!s.replica) continue;
    ++replicas;
    CHECK(s.table == 5);
    CHECK(s.row_begin == 0);
    CHECK(s.row_end == 1'000);
  }
  CHECK(replicas == 3);
  const auto tr = embplan::io::torchrec_sharding(t, r.placement);
  CHECK(tr.at("user_ids").at("replicas").size() == 3);
}

TEST_CASE("without an oversized table the inner searcher's plan is unchanged") {
  const auto t = embplan_test::random_task(4, {.tables = 20});
  const auto policy = embplan::rl::dreamshard_policy::load(
      std::string(EMBPLAN_SOURCE_DIR) + "/data/rl/dreamshard_cpu_4dev.safetensors");
  const auto autoshard = embplan::rl::autoshard_policy::load(
      std::string(EMBPLAN_SOURCE_DIR) + "/data/rl/autoshard_cpu_8dev.safetensors");
  const embplan::preset_models models{.dreamshard = embplan::rl::dreamshard_preset(policy),
                                      .autoshard = embplan::rl::autoshard_preset(autoshard)};
  for (const auto name : embplan::preset_names()) {
    CAPTURE(name);
    const auto base = embplan::run_preset(name, t, 3, embplan::analytic_cost{}, models);
    const auto rw =
        embplan::run_preset("rowwise_" + std::string(name), t, 3, embplan::analytic_cost{}, models);
    REQUIRE(base.ok);
    REQUIRE(rw.ok);
    CHECK(rw.placement == base.placement);
  }
}

TEST_CASE("a table too big for all devices together still fails, naming it") {
  auto t = huge_task();
  t.tables[5].dim = 128;  // 512 GB
  const auto r = embplan::run_preset("rowwise_lookup_greedy", t);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find("table 'user_ids' (index 5") != std::string::npos);
  CHECK(r.failure.find("split by rows across all 8 devices") != std::string::npos);
  CHECK_THROWS_WITH_AS((void)embplan::run_preset("rowwise_foo", t),
                       doctest::Contains("field 'planner' = \"rowwise_foo\""), embplan::error);
}

namespace {

// default_constraint under another type: the stage then asks it every
// question about the full task's state (in_full_task's general path), where
// default_constraint's tables no user rule names are asked on the sub-task.
struct through_full_task {
  embplan::default_constraint rule;
  bool admits(const embplan::task& t, const embplan::placement_state& st,
              const embplan::shard& s) const {
    return rule.admits(t, st, s);
  }
  std::string describe() const { return rule.describe(); }
  std::string explain(const embplan::task& t, const embplan::placement_state& st,
                      std::size_t table) const {
    return rule.explain(t, st, table);
  }
  bool reads_table_record() const noexcept { return embplan::reads_table_record(rule); }
  std::uint32_t min_shards(std::size_t table) const noexcept {
    return embplan::min_shards_of(rule, table);
  }
};

}  // namespace

TEST_CASE("with user rules, the stage asks about unruled tables on the sub-task: the same plans") {
  // Rules of every kind on some tables, a table split by rows, small tables
  // replicated: the stage's answers for the tables no rule names come from
  // the sub-task (no combined state built), and the plans are those of asking
  // every question on the full task's state.
  auto t = huge_task();
  t.tables[10].dim = 16;
  embplan::user_constraints c;
  c.tables.push_back({.table = 3, .devices = {2}});
  c.tables.push_back({.table = 9, .max_shards = 1});
  c.tables.push_back({.table = 10, .min_shards = 2});
  c.colocate.push_back({0, 1});
  c.separate.push_back({7, 8});
  const embplan::default_constraint rule(embplan::memory_capacity{}, embplan::dim_multiple{},
                                         embplan::table_rules(t, c));
  const through_full_task reference{rule};
  const embplan::analytic_cost model;
  const embplan::neg_max_cost_reward reward;
  const auto both = [&](const auto& stage) {
    const auto fast = stage.search(t, model, rule, reward, 0);
    const auto slow = stage.search(t, model, reference, reward, 0);
    REQUIRE(fast.ok);
    REQUIRE(slow.ok);
    CHECK(fast.placement == slow.placement);
    CHECK_NOTHROW(embplan::validate(t, fast.placement, {.dim_multiple = 4, .memory = true}));
    return fast.placement;
  };
  const auto ls = both(embplan::stage::staged<embplan::local_search<>>{
      .settings = {.split_rows = true, .data_parallel = {.enabled = true}}});
  const auto greedy = both(embplan::stage::staged<embplan::sorted_greedy>{
      .settings = {.split_rows = true, .data_parallel = {.enabled = true}}});
  // The grid search skips devices whose room (in_full_task::room: the memory
  // capacity's on the sub-task) a piece exceeds; the general path offers no
  // room, so each device is asked.
  static_assert(embplan::room_bounding_constraint<
                embplan::stage::detail::in_full_task<embplan::default_constraint>>);
  const auto beam = both(embplan::stage::staged<embplan::column_beam>{
      .settings = {.split_rows = true, .data_parallel = {.enabled = true}}});
  for (const auto* p : {&ls, &greedy, &beam}) {
    std::size_t row_pieces = 0;
    std::size_t copies = 0;
    std::set<std::uint32_t> of_3;
    std::set<std::uint32_t> of_0;
    std::set<std::uint32_t> of_1;
    for (const auto& s : p->shards) {
      row_pieces += s.table == 5 ? 1 : 0;
      copies += s.data_parallel ? 1 : 0;
      if (s.table == 3) of_3.insert(s.device);
      if (s.table == 0) of_0.insert(s.device);
      if (s.table == 1) of_1.insert(s.device);
    }
    CHECK(row_pieces > 1);  // the big table, split
    CHECK(of_3 == std::set<std::uint32_t>{2});
    CHECK(of_0.size() == 1);
    CHECK(of_0 == of_1);
  }
}
