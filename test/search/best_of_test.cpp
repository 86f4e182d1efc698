#include "embplan/search/best_of.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/presets.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/search/local_search.hpp"
#include "embplan/search/torchrec_like.hpp"
#include "embplan/stage/staged.hpp"

#include "support/random_task.hpp"

namespace {

embplan::task portfolio_task(std::uint64_t seed, std::size_t tables, std::size_t devices = 4) {
  return embplan_test::random_task(seed, {.tables = tables,
                                          .devices = devices,
                                          .device_memory_bytes = 512u << 20,
                                          .max_rows = 200'000});
}

// Returns its plan, or fails with its message; counts what it was asked.
struct fixed_plan {
  std::string label = "fixed";
  embplan::plan placement;
  bool ok = true;
  std::string failure;
  std::vector<std::uint64_t>* seeds = nullptr;  // the seeds it was given
  std::string_view name() const noexcept { return label; }
  template <class M, class C, class R>
  embplan::search_result search(const embplan::task&, const M&, const C&, const R&,
                                std::uint64_t seed) const {
    if (seeds != nullptr) seeds->push_back(seed);
    embplan::search_result r{.evaluations = 3, .cache_lookups = 5, .cache_hits = 2};
    r.ok = ok;
    if (ok) {
      r.placement = placement;
    } else {
      r.failure = failure;
    }
    return r;
  }
};

fixed_plan planning(embplan::plan p, std::vector<std::uint64_t>* seeds = nullptr) {
  fixed_plan s;
  s.placement = std::move(p);
  s.seeds = seeds;
  return s;
}

fixed_plan failing(std::string label, std::string failure,
                   std::vector<std::uint64_t>* seeds = nullptr) {
  fixed_plan s;
  s.label = std::move(label);
  s.ok = false;
  s.failure = std::move(failure);
  s.seeds = seeds;
  return s;
}

// Every table whole on device `first`, or spread round-robin from it.
embplan::plan tables_whole(const embplan::task& t, bool spread, std::uint32_t first = 0) {
  embplan::plan p;
  const auto devices = static_cast<std::uint32_t>(t.cluster.size());
  for (std::uint32_t i = 0; i < t.tables.size(); ++i) {
    p.shards.push_back({.table = i,
                        .device = spread ? (first + i) % devices : first,
                        .col_end = t.tables[i].dim,
                        .row_end = t.tables[i].rows});
  }
  return p;
}

}  // namespace

static_assert(embplan::searcher<embplan::best_of<embplan::local_search<>, embplan::torchrec_like>>);
static_assert(embplan::searcher_uses_reward<embplan::best_of<embplan::torchrec_like>>);
static_assert(embplan::is_best_of<embplan::best_of<embplan::torchrec_like>>);
static_assert(!embplan::is_best_of<embplan::torchrec_like>);
static_assert(std::is_same_v<embplan::stage::staged_searcher_t<
                                 embplan::best_of<embplan::local_search<>, embplan::torchrec_like>>,
                             embplan::best_of<embplan::stage::staged<embplan::local_search<>>,
                                              embplan::stage::staged<embplan::torchrec_like>>>);
static_assert(std::is_same_v<embplan::stage::staged_searcher_t<embplan::torchrec_like>,
                             embplan::stage::staged<embplan::torchrec_like>>);

TEST_CASE("best_of keeps the plan the reward scores highest, the first on a tie") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  const auto t = portfolio_task(1, 8);
  const auto piled = planning(tables_whole(t, false));
  const auto spread = planning(tables_whole(t, true));
  const auto shifted = planning(tables_whole(t, true, 1));  // another spread
  const auto cost = [&](const embplan::plan& p) { return embplan::evaluate(t, p, model).max_ms(); };
  REQUIRE(cost(spread.placement) < cost(piled.placement));
  const auto plan_of = [&](const auto& searchers) {
    const embplan::best_of<fixed_plan, fixed_plan> b{searchers};
    const auto r = b.search(t, model, rule, reward, 0);
    REQUIRE(r.ok);
    return r.placement;
  };
  CHECK(plan_of(std::tuple{piled, spread}).shards == spread.placement.shards);
  CHECK(plan_of(std::tuple{spread, piled}).shards == spread.placement.shards);
  // Two plans of one cost (devices renamed on identical devices): the first.
  REQUIRE(cost(spread.placement) == cost(shifted.placement));
  CHECK(plan_of(std::tuple{shifted, spread}).shards == shifted.placement.shards);
  CHECK(plan_of(std::tuple{spread, shifted}).shards == spread.placement.shards);
}

TEST_CASE("best_of's made_by names the member whose plan it kept, by place and label") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  const auto t = portfolio_task(1, 8);
  auto piled = planning(tables_whole(t, false));
  piled.label = "piled";
  auto spread = planning(tables_whole(t, true));
  spread.label = "spread";
  const auto made_by = [&](const auto& b) {
    const auto r = b.search(t, model, rule, reward, 0);
    REQUIRE(r.ok);
    return r.made_by;
  };
  CHECK(made_by(embplan::best_of<fixed_plan, fixed_plan>{{piled, spread}}) == "#2 spread");
  CHECK(made_by(embplan::best_of<fixed_plan, fixed_plan>{{spread, piled}}) == "#1 spread");
  // A portfolio inside a portfolio adds its own member.
  using inner = embplan::best_of<fixed_plan, fixed_plan>;
  CHECK(made_by(embplan::best_of<fixed_plan, inner>{{piled, inner{{piled, spread}}}}) ==
        "#2 best_of(piled, spread) > #2 spread");
  // Another searcher leaves it empty.
  CHECK(spread.search(t, model, rule, reward, 0).made_by.empty());
}

TEST_CASE("searcher_label: a wrapper names what it wraps; else the searcher's name") {
  CHECK(embplan::searcher_label(embplan::torchrec_like{}) == "torchrec_like");
  CHECK(embplan::searcher_label(embplan::local_search<>{}) == "local_search(column_beam)");
  CHECK(embplan::searcher_label(embplan::stage::staged<embplan::torchrec_like>{}) ==
        "staged(torchrec_like)");
  CHECK(embplan::searcher_label(
            embplan::best_of<embplan::local_search<>, embplan::torchrec_like>{}) ==
        "best_of(local_search(column_beam), torchrec_like)");
}

TEST_CASE("best_of passes over a member without a plan and names each failure when none has one") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  const auto t = portfolio_task(2, 6);
  const auto never = failing("never", "table 3 fits no device");
  const auto nor = failing("nor", "no room on device 1");
  const auto spread = planning(tables_whole(t, true));
  const auto r1 =
      embplan::best_of<fixed_plan, fixed_plan>{{never, spread}}.search(t, model, rule, reward, 0);
  REQUIRE(r1.ok);
  CHECK(r1.failure.empty());
  CHECK(r1.placement.shards == spread.placement.shards);
  const auto r2 =
      embplan::best_of<fixed_plan, fixed_plan>{{never, nor}}.search(t, model, rule, reward, 0);
  CHECK_FALSE(r2.ok);
  CHECK(r2.failure == "#1 never: table 3 fits no device; #2 nor: no room on device 1");
}

TEST_CASE("best_of gives every member the same seed and adds up their counts") {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  const auto t = portfolio_task(3, 6);
  std::vector<std::uint64_t> seeds;
  const auto a = planning(tables_whole(t, true), &seeds);
  const auto b = failing("b", "none", &seeds);
  const auto c = planning(tables_whole(t, false), &seeds);
  const auto r = embplan::best_of<fixed_plan, fixed_plan, fixed_plan>{{a, b, c}}.search(
      t, model, rule, reward, 41);
  CHECK(seeds == std::vector<std::uint64_t>{41, 41, 41});
  CHECK(r.evaluations == 3 * 3 + 2);  // each member's 3, one evaluate() per plan compared
  CHECK(r.cache_lookups == 15);
  CHECK(r.cache_hits == 6);
}

TEST_CASE("the portfolio preset plans as the cheaper of neuroshard_ls and torchrec_like") {
  // Plain and behind the row stage (rowwise_, with a table that fits no
  // device): each member behind its own stage, so the portfolio's plan is
  // exactly the cheaper of the two presets' plans of the full task.
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    auto t = portfolio_task(seed, 12 + 2 * seed, seed % 2 ? 8 : 4);
    for (const bool rowwise : {false, true}) {
      CAPTURE(rowwise);
      // Table 0 a third larger than a device (4-byte weights).
      if (rowwise) {
        const auto row_bytes = static_cast<std::uint64_t>(t.tables[0].dim) * 4;
        t.tables[0].rows =
            static_cast<std::int64_t>(4 * t.cluster.devices[0].memory_bytes / row_bytes / 3);
      }
      const std::string prefix = rowwise ? "rowwise_" : "";
      const auto ls = embplan::run_preset(prefix + "neuroshard_ls", t, seed);
      const auto tr = embplan::run_preset(prefix + "torchrec_like", t, seed);
      const auto both = embplan::run_preset(prefix + "portfolio", t, seed);
      REQUIRE(ls.ok);
      REQUIRE(tr.ok);
      REQUIRE(both.ok);
      const auto& cheaper = ls.cost_ms.max_ms() <= tr.cost_ms.max_ms() ? ls : tr;
      CHECK(both.cost_ms.max_ms() == cheaper.cost_ms.max_ms());
      CHECK(both.placement.shards == cheaper.placement.shards);
      // Which member made it (the first on a tie), through the planner's result.
      const std::string member = &cheaper == &ls ? "#1 " : "#2 ";
      const std::string label =
          &cheaper == &ls ? "local_search(column_beam)" : std::string("torchrec_like");
      CHECK(both.made_by == (rowwise ? member + "staged(" + label + ")" : member + label));
      CHECK(ls.made_by.empty());
      if (rowwise) {
        bool split_by_rows = false;
        for (const auto& s : both.placement.shards)
          split_by_rows =
              split_by_rows || (s.table == 0 && s.row_end - s.row_begin < t.tables[0].rows);
        CHECK(split_by_rows);
      }
    }
  }
}
