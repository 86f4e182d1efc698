// stage::stage_settings (stage/settings.hpp): every job opt-in, the one type
// run_preset, behind_stage and stage::staged take; and run_preset's registry
// (run_preset.hpp): the names, in order, each run by name, a rowwise_ name the
// same as split_rows.
#include "embplan/stage/settings.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/heuristic.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/search/sorted_greedy.hpp"
#include "embplan/stage/staged.hpp"

#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace {

// 4 devices of 256 MiB, 10 small tables and, at index 3, one of 25M rows
// of dim 4 (fp32: 400 MB) that no device holds whole, nor any column block
// of it (4 columns are the narrowest).
embplan::task one_oversized_task() {
  auto t = embplan_test::random_task(
      23, {.tables = 10, .devices = 4, .device_memory_bytes = 256u << 20, .max_rows = 50'000});
  embplan::table_spec big;
  big.name = "too_big";
  big.rows = 25'000'000;
  big.dim = 4;
  big.pooling_factor = 2.0;
  big.reuse_hist[0] = 1.0;
  t.tables.insert(t.tables.begin() + 3, big);
  return t;
}

}  // namespace

TEST_CASE("stage_settings: no job by default; each job flag turns the stage on") {
  using embplan::stage::stage_settings;
  CHECK_FALSE(stage_settings{}.any());
  CHECK(stage_settings{.split_rows = true}.any());
  CHECK(stage_settings{.data_parallel = {.enabled = true}}.any());
  CHECK(stage_settings{.rows_by_cost = true}.any());
  // How a job runs is no job of its own.
  CHECK_FALSE(stage_settings{.hot_rows = 10}.any());
  CHECK_FALSE(stage_settings{.layout = embplan::stage::row_layout::row_wise}.any());
  CHECK_FALSE(stage_settings{.data_parallel = {.memory_fraction = 0.5}}.any());
  CHECK(stage_settings{} == stage_settings{});
  CHECK(stage_settings{.split_rows = true} != stage_settings{});
}

TEST_CASE("the stage with default settings leaves the searcher's plan as it is") {
  auto t = one_oversized_task();
  t.tables.erase(t.tables.begin() + 3);  // every table fits
  const embplan::default_constraint rule{};
  const embplan::stage::staged<embplan::sorted_greedy> stage{};
  CHECK(stage.name() == "staged");
  CHECK(stage.label() == "staged(sorted_greedy)");
  const auto staged = stage.search(t, embplan::lookup_cost{}, rule, embplan::balance_reward{}, 0);
  const auto plain = embplan::sorted_greedy{}.search(t, embplan::lookup_cost{}, rule,
                                                     embplan::balance_reward{}, 0);
  REQUIRE(plain.ok);
  REQUIRE(staged.ok);
  CHECK(staged.placement == plain.placement);
  // With a table no device holds, default settings do not split it.
  const auto big = one_oversized_task();
  const auto failed = stage.search(big, embplan::lookup_cost{}, rule, embplan::balance_reward{}, 0);
  CHECK_FALSE(failed.ok);
  CHECK(failed.failure.find("'too_big'") != std::string::npos);
}

TEST_CASE("behind_stage and rowwise_planner_of carry the settings") {
  const embplan::stage::stage_settings s{.split_rows = true,
                                         .hot_rows = 7,
                                         .layout = embplan::stage::row_layout::host_first,
                                         .data_parallel = {.enabled = true, .memory_fraction = 0.2},
                                         .rows_by_cost = true};
  CHECK(embplan::stage::behind_stage(embplan::sorted_greedy{}, s).settings == s);
  // A portfolio's members each behind their own stage, with the same settings.
  const auto both = embplan::stage::behind_stage(embplan::portfolio_planner{}.searcher(), s);
  CHECK(std::get<0>(both.searchers).settings == s);
  CHECK(std::get<1>(both.searchers).settings == s);
  // The rowwise_ planners, default-constructed, split rows and nothing else.
  CHECK(embplan::rowwise_lookup_greedy_planner{}.searcher().settings ==
        embplan::stage::stage_settings{.split_rows = true});
}

TEST_CASE("run_preset: a rowwise_ name is the name with split_rows") {
  const auto t = one_oversized_task();
  for (const std::string_view name : {"random", "lookup_greedy", "torchrec_like", "portfolio"}) {
    CAPTURE(name);
    const std::string rowwise = std::string(embplan::presets::rowwise_prefix) + std::string(name);
    const auto plain = embplan::run_preset(name, t, 3);
    CHECK_FALSE(plain.ok);  // the table no device holds
    const auto by_prefix = embplan::run_preset(rowwise, t, 3);
    const auto by_settings =
        embplan::run_preset(name, t, 3, embplan::analytic_cost{}, {}, {}, {.split_rows = true});
    REQUIRE(by_prefix.ok);
    REQUIRE(by_settings.ok);
    CHECK(by_settings.placement == by_prefix.placement);
    CHECK(by_settings.cost_ms.max_ms() == by_prefix.cost_ms.max_ms());
    CHECK(by_settings.made_by == by_prefix.made_by);
    std::size_t pieces = 0;
    for (const auto& s : by_prefix.placement.shards)
      pieces += s.table == 3 ? 1 : 0;
    CHECK(pieces >= 2);
    // The prefix and the flag together: the same once more (OR-ed).
    CHECK(embplan::run_preset(rowwise, t, 3, embplan::analytic_cost{}, {}, {}, {.split_rows = true})
              .placement == by_prefix.placement);
  }
}

TEST_CASE("preset_names: the registry's 14 names, in order, each run by run_preset") {
  // Spelled on purpose: the order is what the CLI lists and the docs name.
  constexpr std::array<std::string_view, 14> expected{
      "random",        "size_greedy", "dim_greedy",    "lookup_greedy", "size_lookup_greedy",
      "random_search", "torchrec",    "torchrec_like", "neuroshard",    "neuroshard_plus",
      "neuroshard_ls", "dreamshard",  "autoshard",     "portfolio"};
  static_assert(embplan::preset_names().size() == expected.size());
  const auto names = embplan::preset_names();
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(names[i] == expected[i]);

  auto fits = one_oversized_task();
  fits.tables.erase(fits.tables.begin() + 3);
  // TorchRec counts the batch's buffers per shard and reserves 15 % and 20 x
  // the input (docs/torchrec.md): its plan of these tables needs more room.
  auto roomy = fits;
  for (auto& d : roomy.cluster.devices)
    d.memory_bytes *= 16;
  for (const std::string_view name : names) {
    CAPTURE(name);
    const auto& t = name == "torchrec" ? roomy : fits;
    for (const std::string prefix : {"", "rowwise_"}) {
      const std::string asked = prefix + std::string(name);
      CAPTURE(asked);
      if (name == "dreamshard" || name == "autoshard") {
        // Without a trained policy in preset_models: the error names its field.
        const std::string message =
            embplan::test::message_of([&] { (void)embplan::run_preset(asked, t, 1); });
        CHECK(message.find("field 'preset_models." + std::string(name) + "' = \"(empty)\"") !=
              std::string::npos);
        CHECK(message.find("planner '" + asked + "'") != std::string::npos);
        continue;
      }
      const auto r = embplan::run_preset(asked, t, 1);
      REQUIRE(r.ok);
      CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
    }
  }
}

TEST_CASE("run_preset: an unknown name names 'planner', the value and the accepted names") {
  const auto t = embplan_test::random_task(1, {.tables = 2});
  for (const std::string name : {"greedy", "rowwise_greedy", "rowwise_rowwise_random", ""}) {
    CAPTURE(name);
    const std::string message =
        embplan::test::message_of([&] { (void)embplan::run_preset(name, t, 0); });
    CHECK(message.find("field 'planner' = \"" + name +
                       "\": expected one of random, size_greedy, ") != std::string::npos);
    CHECK(message.find("portfolio (each also prefixed rowwise_: tables that fit no device split "
                       "by rows)") != std::string::npos);
  }
}
