#include "embplan/concepts/promises.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/max_device_dim.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/memory_penalty.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "support/random_task.hpp"

namespace {

// 10 tables on 4 devices of 64 MiB: random states overfill some devices.
embplan::task promise_task() {
  return embplan_test::random_task(
      11, {.tables = 10, .devices = 4, .device_memory_bytes = 64u << 20, .max_rows = 300'000});
}

// A rule whose optional promises are false, to show the checker can fail.
struct false_promises {
  bool admits(const embplan::task& t, const embplan::placement_state& st,
              const embplan::shard& s) const {
    return embplan::memory_capacity{}.admits(t, st, s);
  }
  bool admits(const embplan::task&, const embplan::placement_state&, const embplan::shard&,
              std::uint64_t) const {
    return true;  // not admits(t, st, s)
  }
  std::uint64_t room(const embplan::task&, const embplan::placement_state& st,
                     std::size_t) const noexcept {
    return st.memory_bytes[0];  // reads device 0 whatever the device
  }
  std::string describe() const { return "false promises"; }
};

// A reward that promises to fall with the max cost but reads the min.
struct min_cost_reward {
  static constexpr bool decreasing_in_max_cost = true;
  std::string_view name() const noexcept { return "min"; }
  double score(const embplan::task&, const embplan::plan_cost& c) const { return -c.min_ms(); }
};

std::string first_of(const std::vector<std::string>& lines) {
  return lines.empty() ? std::string("none") : lines.front();
}

}  // namespace

TEST_CASE("the built-in constraints keep their optional promises") {
  const auto t = promise_task();
  CHECK(embplan::broken_promises(embplan::memory_capacity{}, t, 1).empty());
  CHECK(embplan::broken_promises(embplan::dim_multiple{}, t, 2).empty());
  CHECK(embplan::broken_promises(embplan::dim_multiple{.multiple = 8}, t, 3).empty());
  CHECK(embplan::broken_promises(embplan::max_device_dim{.max_dim = 256}, t, 4).empty());
  CHECK(embplan::broken_promises(embplan::paper_constraint{}, t, 5).empty());
  CHECK(embplan::broken_promises(embplan::default_constraint{}, t, 6).empty());
  const embplan::table_rules rules(
      t, {.tables = {{.table = 0, .devices = {3}}, {.table = 4, .max_shards = 2}},
          .colocate = {{1, 2}},
          .separate = {{5, 6, 7}}});
  CHECK(embplan::reads_table_record(rules));
  const auto broken = embplan::broken_promises(rules, t, 7);
  CHECK_MESSAGE(broken.empty(), first_of(broken));
  const embplan::default_constraint ruled{{}, {}, rules};
  const auto broken_ruled = embplan::broken_promises(ruled, t, 8);
  CHECK_MESSAGE(broken_ruled.empty(), first_of(broken_ruled));
}

TEST_CASE("the promise checker names each promise a rule breaks") {
  const auto t = promise_task();
  const auto broken = embplan::broken_promises(false_promises{}, t, 9);
  const auto has = [&](const std::string& start) {
    for (const auto& line : broken)
      if (line.starts_with(start)) return true;
    return false;
  };
  CHECK(has("admits(t, st, s, bytes) differs from admits(t, st, s): trial "));
  CHECK(has("room() of device "));
  CHECK(has("room() "));
}

TEST_CASE("the built-in rewards keep their optional promise") {
  const auto t = promise_task();
  CHECK(embplan::broken_reward_promises(embplan::neg_max_cost_reward{}, t, 1).empty());
  // balance and the memory penalty promise nothing: nothing to break.
  CHECK(embplan::broken_reward_promises(embplan::balance_reward{}, t, 2).empty());
  CHECK(embplan::broken_reward_promises(embplan::memory_penalty_reward{}, t, 3).empty());
  // A reward that promises falsely is caught.
  CHECK_FALSE(embplan::broken_reward_promises(min_cost_reward{}, t, 4).empty());
}

TEST_CASE("the built-in cost models keep their optional promises") {
  const auto t = promise_task();
  CHECK(embplan::broken_cost_promises(embplan::analytic_cost{}, t, 1).empty());
  CHECK(embplan::broken_cost_promises(embplan::size_cost{}, t, 2).empty());
  CHECK(embplan::broken_cost_promises(embplan::lookup_cost{}, t, 3).empty());
  const std::string dir = std::string(EMBPLAN_SOURCE_DIR) + "/data/cost/";
  const auto learned = embplan::neural_cost::load(dir + "cpu_compute_model.safetensors");
  CHECK(embplan::broken_cost_promises(learned, t, 4).empty());
  const auto with_comm = learned.with_communication(
      embplan::neural_comm::load(dir + "cpu_comm_4dev_model.safetensors"));
  const auto broken = embplan::broken_cost_promises(with_comm, t, 5);
  CHECK_MESSAGE(broken.empty(), first_of(broken));
}
