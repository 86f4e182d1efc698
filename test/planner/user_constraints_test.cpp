// Every preset the CLI offers, planned under the user's table_rules (issue
// 24): each returns a plan that keeps every rule, checked here without
// table_rules, or fails saying why; none returns a plan that breaks one.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "embplan/constraint/table_rules.hpp"
#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/run_preset.hpp"
#include "support/bundled_models.hpp"
#include "support/random_task.hpp"

namespace {

using embplan::sharding_kind;

embplan::task sample_task() {
  return embplan_test::random_task(5, {.tables = 24,
                                       .device_memory_bytes = 512u << 20,
                                       .max_rows = 200'000,
                                       .reuse_hist = {0.5, 0.3, 0.0, 0.0, 0.2}});
}

const embplan::user_constraints rules_given{
    .tables = {{.table = 0, .devices = {3}},
               {.table = 1, .devices = {0, 1}},
               {.table = 8, .sharding = {sharding_kind::table_wise}},
               {.table = 9, .max_shards = 1}},
    .colocate = {{2, 3, 4}, {10, 0}},
    .separate = {{5, 6, 7}, {11, 12}}};

using embplan_test::bundled_models;

std::set<std::uint32_t> devices_of(const embplan::plan& p, std::size_t table) {
  std::set<std::uint32_t> out;
  for (const auto& s : p.shards)
    if (s.table == table) out.insert(s.device);
  return out;
}

// The rules of rules_given, checked on a finished plan from the shards alone.
void check_rules(const embplan::task& t, const embplan::plan& p) {
  CHECK(devices_of(p, 0) == std::set<std::uint32_t>{3});
  for (const auto d : devices_of(p, 1))
    CHECK(d <= 1);
  std::set<std::uint32_t> group;
  for (const std::size_t i : {2, 3, 4}) {
    const auto d = devices_of(p, i);
    group.insert(d.begin(), d.end());
  }
  CHECK(group.size() == 1);
  CHECK(devices_of(p, 10) == std::set<std::uint32_t>{3});  // co-located with pinned t0
  for (const auto& g : rules_given.separate) {
    for (std::size_t a = 0; a < g.size(); ++a) {
      for (std::size_t b = a + 1; b < g.size(); ++b) {
        for (const auto d : devices_of(p, g[a]))
          CHECK(devices_of(p, g[b]).count(d) == 0);
      }
    }
  }
  std::size_t pieces8 = 0;
  std::size_t pieces9 = 0;
  for (const auto& s : p.shards) {
    if (s.table == 8) {
      ++pieces8;
      CHECK(s == embplan::whole_table(t, 8, s.device));
    }
    pieces9 += s.table == 9 ? 1 : 0;
  }
  CHECK(pieces8 == 1);
  CHECK(pieces9 == 1);
}

}  // namespace

TEST_CASE("every preset, plain and rowwise_, honours the user's rules or says it cannot") {
  const auto t = sample_task();
  const embplan::table_rules rules(t, rules_given);
  const auto models = bundled_models();
  std::size_t planned = 0;
  for (const auto base : embplan::preset_names()) {
    for (const std::string prefix : {"", "rowwise_"}) {
      const std::string name = prefix + std::string(base);
      CAPTURE(name);
      const auto r = embplan::run_preset(name, t, 7, embplan::analytic_cost{}, models, rules);
      if (!r.ok) {
        MESSAGE(name << " failed: " << r.failure);
        CHECK_FALSE(r.failure.empty());
        continue;
      }
      ++planned;
      embplan::validate(t, r.placement);
      check_rules(t, r.placement);
      // The same plan without the rules breaks at least one (so the check can fail).
    }
  }
  // The searchers that place table by table all find a plan on this easy task.
  CHECK(planned >= 16);
}

TEST_CASE("without rules a preset breaks them: the check above can fail") {
  const auto t = sample_task();
  const auto r = embplan::run_preset("lookup_greedy", t, 7);
  REQUIRE(r.ok);
  const bool pinned = devices_of(r.placement, 0) == std::set<std::uint32_t>{3};
  const bool near = devices_of(r.placement, 10) == std::set<std::uint32_t>{3};
  std::set<std::uint32_t> group;
  for (const std::size_t i : {2, 3, 4}) {
    const auto d = devices_of(r.placement, i);
    group.insert(d.begin(), d.end());
  }
  CHECK_FALSE((pinned && near && group.size() == 1));
}

TEST_CASE("a preset that cannot honour a pin names the rule and the table") {
  auto t = sample_task();
  t.tables[0].rows = 3'000'000;  // 4 dims x ... too large for one device's 512 MiB
  t.tables[0].dim = 64;          // 3e6 x 64 x 4 bytes = 768 MB
  const embplan::table_rules rules(t, {.tables = {{.table = 0, .devices = {3}}}});
  const auto r = embplan::run_preset("lookup_greedy", t, 0, embplan::analytic_cost{}, {}, rules);
  REQUIRE_FALSE(r.ok);
  CHECK(r.failure.starts_with("table 't0' (index 0): pinned to device 3, but device 3 has "));
  CHECK(r.failure.find("bytes free and the table needs 768000000 bytes") != std::string::npos);
}
