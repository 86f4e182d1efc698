// A user's co-location rule written the obvious way — it reads
// placement_state::tables and declares no reads_table_record() — under every
// preset's searcher, plain and behind the stage: the plan keeps the two
// tables on one device, or the planner says it could not; nothing throws.
// And a rule that promises falsely not to read the record is caught by the
// planner's final check, which keeps the record whatever the promise.

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>

#include "embplan/concepts/promises.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/dim_multiple.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/stage/staged.hpp"
#include "support/random_task.hpp"

namespace {

// Tables `a` and `b` on one device: every piece of either on the device of
// the pieces already placed. Two ways of writing it, one type (so that each
// planner below is instantiated once for both): `defensive` reads a record
// shorter than the task as "nothing placed"; otherwise st.tables.at() would
// throw on it.
struct together {
  std::uint32_t a = 0;
  std::uint32_t b = 1;
  bool defensive = false;

  bool admits(const embplan::task&, const embplan::placement_state& st,
              const embplan::shard& s) const {
    if (s.table != a && s.table != b) return true;
    for (const std::uint32_t table : {a, b}) {
      if (defensive && st.tables.size() <= table) continue;
      if (!st.tables.at(table).only_on(s.device)) return false;
    }
    return true;
  }
  std::string describe() const {
    return "tables " + std::to_string(a) + " and " + std::to_string(b) + " together";
  }
};
static_assert(embplan::constraint<together>);

// The defensive rule with a false promise: it says it does not read the record.
struct together_false_promise : together {
  together_false_promise() : together{.defensive = true} {}
  bool reads_table_record() const noexcept { return false; }
};

template <class Rule>
using colocation_constraint =
    embplan::all_of<embplan::memory_capacity, embplan::dim_multiple, Rule>;

// 12 tables on 4 devices; tables 0 and 1 the two with the most lookups, so a
// planner without the rule puts them apart (checked below).
embplan::task colocation_task() {
  auto t = embplan_test::random_task(
      21, {.tables = 12, .devices = 4, .device_memory_bytes = embplan::gib, .max_rows = 200'000});
  t.tables[0].pooling_factor = 60.0;
  t.tables[1].pooling_factor = 55.0;
  t.tables[0].dim = t.tables[1].dim = 64;
  return t;
}

std::set<std::uint32_t> colocation_devices(const embplan::plan& p) {
  std::set<std::uint32_t> out;
  for (const auto& s : p.shards)
    if (s.table <= 1) out.insert(s.device);
  return out;
}

struct colocation_tally {
  int planned = 0;
  int refused = 0;
};

// `preset`'s cost model, searcher and reward under the co-location rule (both
// ways of writing it), plain and with its searcher behind the stage (rows
// split, data-parallel copies, row cuts by cost).
template <class Planner>
void check_colocation(const Planner& preset, std::string_view label, colocation_tally& tally) {
  const auto t = colocation_task();
  const auto one = [&](const auto& p, std::string_view how) {
    CAPTURE(label);
    CAPTURE(how);
    embplan::plan_result r;
    CHECK_NOTHROW(r = p(t, 3));
    if (r.ok) {
      ++tally.planned;
      CHECK(colocation_devices(r.placement).size() == 1);
    } else {
      ++tally.refused;
      CHECK_FALSE(r.failure.empty());
      MESSAGE(label << " (" << how << ") could not plan: " << r.failure);
    }
  };
  const auto both_rules = [&](const auto& searcher, std::string_view how) {
    using searcher_t = std::decay_t<decltype(searcher)>;
    using cost_t = typename Planner::cost_model_type;
    using reward_t = typename Planner::reward_type;
    using planner_t =
        embplan::planner<cost_t, searcher_t, colocation_constraint<together>, reward_t>;
    one(planner_t(preset.cost(), searcher, {{}, {}, together{}}, preset.scorer()),
        std::string(how) + ", st.tables.at()");
    one(planner_t(preset.cost(), searcher, {{}, {}, together{.defensive = true}}, preset.scorer()),
        std::string(how) + ", size-checked");
  };
  both_rules(preset.searcher(), "plain");
  both_rules(embplan::stage::behind_stage(
                 preset.searcher(),
                 {.split_rows = true, .data_parallel = {.enabled = true}, .rows_by_cost = true}),
             "behind the stage");
}

}  // namespace

TEST_CASE("a co-location rule that reads the table record holds under every preset") {
  colocation_tally tally;
  check_colocation(embplan::random_planner{}, "random", tally);
  check_colocation(embplan::size_greedy_planner{}, "size_greedy", tally);
  check_colocation(embplan::dim_greedy_planner{}, "dim_greedy", tally);
  check_colocation(embplan::lookup_greedy_planner{}, "lookup_greedy", tally);
  check_colocation(embplan::size_lookup_greedy_planner{}, "size_lookup_greedy", tally);
  check_colocation(embplan::random_search_planner{}, "random_search", tally);
  check_colocation(embplan::torchrec_like_planner{}, "torchrec_like", tally);
  check_colocation(embplan::neuroshard_planner{}, "neuroshard", tally);
  check_colocation(embplan::neuroshard_plus_planner{}, "neuroshard_plus", tally);
  check_colocation(embplan::neuroshard_ls_planner{}, "neuroshard_ls", tally);
  check_colocation(embplan::portfolio_planner{}, "portfolio", tally);
  const auto dreamshard = embplan::rl::dreamshard_policy::load(
      std::string(EMBPLAN_SOURCE_DIR) + "/data/rl/dreamshard_cpu_4dev.safetensors");
  check_colocation(embplan::rl::make_dreamshard_planner(dreamshard), "dreamshard", tally);
  const auto autoshard = embplan::rl::autoshard_policy::load(
      std::string(EMBPLAN_SOURCE_DIR) + "/data/rl/autoshard_cpu_8dev.safetensors");
  check_colocation(embplan::rl::make_autoshard_planner(autoshard), "autoshard", tally);
  // 14 presets x 2 rules x (plain, staged): an easy task, every one plans it.
  CHECK(tally.planned == 52);
  CHECK(tally.refused == 0);
}

TEST_CASE("without the co-location rule the presets put the two tables apart") {
  // So the check above can fail: the rule changes these plans.
  const auto t = colocation_task();
  for (const auto& r :
       {embplan::lookup_greedy_planner{}(t, 3), embplan::neuroshard_plus_planner{}(t, 3),
        embplan::neuroshard_ls_planner{}(t, 3)}) {
    REQUIRE(r.ok);
    CHECK(colocation_devices(r.placement).size() == 2);
  }
}

TEST_CASE("a false promise not to read the record is caught by the planner's final check") {
  const auto t = colocation_task();
  // column_beam drops the record for a rule that promises not to read it, so
  // the defensive rule admits everything there and the plan parts the tables;
  // the planner's replay keeps the record and refuses the plan.
  using rule_t = colocation_constraint<together_false_promise>;
  const embplan::planner<embplan::analytic_cost, embplan::column_beam, rule_t,
                         embplan::neg_max_cost_reward>
      p({}, {}, {}, {});
  const auto r = p(t, 3);
  CHECK_FALSE(r.ok);
  CHECK(
      r.failure.starts_with("searcher 'column_beam' violated memory capacity and columns a "
                            "multiple of 4 and tables 0 and 1 together at shard "));
  // The promise checker names the broken promise.
  const auto broken = embplan::broken_promises(together_false_promise{}, t, 5);
  REQUIRE_FALSE(broken.empty());
  CHECK(
      broken.front().starts_with("reads_table_record() is false, but admits() answers "
                                 "otherwise without the per-table record: trial "));
  // Said truthfully (no member), the same rule keeps no promise to check.
  CHECK(embplan::broken_promises(together{.defensive = true}, t, 5).empty());
  CHECK(embplan::reads_table_record(together{.defensive = true}));
}
