// Host DRAM (device_spec::dram_bytes) inside the searchers that keep their own
// per-device sums or undo placements: the grid engine (NeuroShard's greedy
// grid and column beam), the exact search, local search, and stage::staged's
// sub-task behind row shards. Each must plan within the limit where one
// exists, not hand the planner a plan that its final check then refuses.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/presets.hpp"
#include "embplan/search/detail/grid_engine.hpp"

#include "support/random_task.hpp"

namespace {

using namespace embplan;

// Ten tables, the first six in host DRAM, on four devices whose DRAM
// takes a quarter of those six plus largest / slack: tight enough that plans
// made without the limit break it. With `oversized`, table 6 (in HBM) takes
// 1.5 devices' memory and table 0 (host) more DRAM than a device has:
// stage::staged row-shards both, and table 0's shards leave their devices
// less DRAM for the others.
task dram_task(std::uint64_t seed, bool oversized, std::uint64_t slack) {
  auto t = embplan_test::random_task(seed, {.tables = 10,
                                            .device_memory_bytes = 512u << 20,
                                            .max_rows = 200'000,
                                            .reuse_hist = {0.5, 0.3, 0.0, 0.0, 0.2}});
  const auto rows_for = [&](const table_spec& spec, std::uint64_t bytes) {
    table_spec one = spec;
    one.rows = 1;
    return static_cast<std::int64_t>(bytes / table_bytes(one, t.optimizer_state));
  };
  std::uint64_t rest = 0;  // tables 1..5
  std::uint64_t largest = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    t.tables[i].placement = {memory_tier::host, 0.0};
    const auto bytes = table_bytes(t.tables[i], t.optimizer_state);
    if (i > 0) rest += bytes;
    largest = std::max(largest, bytes);
  }
  if (oversized) {
    t.tables[6].rows = rows_for(t.tables[6], (512u << 20) * 3 / 2);
    // Over a device's DRAM: T0 > (rest + T0) / 4 + largest / slack.
    t.tables[0].rows = rows_for(t.tables[0], rest / 2 + largest);
  }
  const std::uint64_t dram = rest + table_bytes(t.tables[0], t.optimizer_state);
  for (auto& d : t.cluster.devices)
    d.dram_bytes = dram / 4 + largest / slack;
  return t;
}

task unlimited(task t) {
  for (auto& d : t.cluster.devices)
    d.dram_bytes = 0;
  return t;
}

bool over_dram(const task& t, const plan& p) {
  const auto st = state_of(t, p);
  for (std::size_t d = 0; d < t.cluster.size(); ++d)
    if (st.dram_bytes[d] > t.cluster.devices[d].dram_bytes) return true;
  return false;
}

// Plans dram_task(seed, oversized, slack) for every seed of 0..seeds-1 with
// and without the limit: each plan under the limit is ok and within it;
// returns on how many tasks the plan made without the limit breaks it (the
// limit binds there).
template <class Planner>
std::size_t check_within(const Planner& p, std::size_t seeds, std::uint64_t slack = 3,
                         bool oversized = false) {
  std::size_t binding = 0;
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    CAPTURE(seed);
    const auto t = dram_task(seed, oversized, slack);
    const auto free = p(unlimited(t));
    REQUIRE(free.ok);
    if (over_dram(t, free.placement)) ++binding;
    const auto r = p(t);
    CHECK_MESSAGE(r.ok, r.failure);
    if (!r.ok) continue;
    CHECK_FALSE(over_dram(t, r.placement));
    CHECK(plan_problems(t, r.placement, {.dim_multiple = 4, .memory = true}).empty());
  }
  return binding;
}

}  // namespace

TEST_CASE("host DRAM: the grid engine counts it (NeuroShard's search, faithful and improved)") {
  CHECK(check_within(neuroshard_planner{}, 6) > 0);
  CHECK(check_within(neuroshard_plus_planner{}, 6) > 0);
}

TEST_CASE("host DRAM: the exact search plans within it (its optimum: exact_test.cpp)") {
  // Table-wise only: a looser limit, that whole tables can meet.
  CHECK(check_within(exact_planner{}, 6, 2) > 0);
}

TEST_CASE("host DRAM: local search and the TorchRec-like search stay within it") {
  CHECK(check_within(neuroshard_ls_planner{}, 4) > 0);
  CHECK(check_within(torchrec_like_planner{}, 6) > 0);
}

TEST_CASE("host DRAM: behind row shards the sub-task's searcher sees what they hold") {
  // The row shards of table 0 hold host DRAM when the sub-task (the other
  // tables) is planned: its questions must count them.
  CHECK(check_within(rowwise_planner_of<neuroshard_plus_planner>{}, 6, 3, true) > 0);
}

TEST_CASE("host DRAM: the grid's message for a column piece names what binds") {
  // Table 0 lives in host DRAM, and no device has DRAM for a half of it.
  auto t = dram_task(0, false, 3);
  for (auto& d : t.cluster.devices)
    d.dram_bytes = 1024;
  const default_constraint rule;
  const placement_state st(t.cluster.size());
  const auto& spec = t.tables[0];
  REQUIRE(spec.dim >= 8);
  const shard half{.table = 0,
                   .device = 0,
                   .col_begin = 0,
                   .col_end = spec.dim / 2,
                   .row_begin = 0,
                   .row_end = spec.rows};
  const auto msg = search::detail::no_device_for_piece(t, st, half, rule, 64);
  CAPTURE(msg);
  CHECK(msg.find("table '" + spec.name + "' (index 0), columns [0, " +
                 std::to_string(spec.dim / 2) + ")") != std::string::npos);
  CHECK(msg.find("device dim at most 64") != std::string::npos);
  CHECK(msg.find("(0 bytes of HBM, " + std::to_string(shard_dram_bytes(t, half)) +
                 " bytes of host DRAM)") != std::string::npos);
  // What memory_capacity explains: the tier and the DRAM free and needed.
  CHECK(msg.find("; the table: ") != std::string::npos);
  CHECK(msg.find("host DRAM") != std::string::npos);
  CHECK(msg.find("1024 bytes of host DRAM free") != std::string::npos);
  // Without the DRAM limit nothing explains itself: the free memory is listed.
  const auto plain = search::detail::no_device_for_piece(unlimited(t), st, half, rule, 64);
  CHECK(plain.find("; the table: ") == std::string::npos);
  CHECK(plain.find("free memory per device: 0: ") != std::string::npos);
}
