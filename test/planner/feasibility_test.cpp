// A feasible task is never refused as bad input (issue 51): small tasks (2-4
// devices, 2-5 tables, memory that binds) under combined user rules
// (min_shards, max_shards, separate, colocate, pins, sharding kinds), drawn
// from a seed. An exact search here decides each task's feasibility:
//  - feasible: a brute-force enumeration (each table whole, in equal column
//    blocks or in equal row ranges, each piece on every device in turn) finds
//    a plan that the library's own check (check_plan with the presets'
//    default_constraint: replayed admits, coverage, min_shards) accepts;
//  - infeasible: no choice of devices per table that the rules allow (pins,
//    kinds, max_shards, separate, colocate) has room for the tables' bytes
//    even split freely (Hall's condition over every subset of tables), a
//    relaxation of every plan;
//  - else undecided (equal pieces do not fit where unequal ones might).
// Every preset of presets::all_presets (and its rowwise_ form), run through
// run_preset, plans a feasible task or fails saying the search found no plan:
// it never throws and never returns a plan the planner's replay finds in
// breach ("violated"); an infeasible task it never plans.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/check_plan.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/table_rules.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/run_preset.hpp"
#include "support/bundled_models.hpp"

namespace {

using embplan::sharding_kind;

struct ruled_task {
  embplan::task t;
  embplan::user_constraints rules;
};

// One task and its rules from `gen`; nullopt where the drawn rules are bad
// input (contradictory groups and the like: table_rules refuses them).
std::optional<ruled_task> draw(embplan::rng& gen) {
  ruled_task out;
  auto& t = out.t;
  const auto devices = static_cast<std::size_t>(gen.between(2, 4));
  const auto tables = static_cast<std::size_t>(gen.between(2, 5));
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < tables; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = gen.between(200, 2000);
    s.dim = static_cast<std::int32_t>(4 << gen.between(0, 2));
    s.pooling_factor = gen.uniform(1.0, 20.0);
    total += embplan::table_bytes(s);
    t.tables.push_back(s);
  }
  // From 70 % to 220 % of the tables' bytes in all devices: memory binds.
  embplan::device_spec dev;
  dev.memory_bytes = static_cast<std::uint64_t>(static_cast<double>(total) * gen.uniform(0.7, 2.2) /
                                                static_cast<double>(devices)) +
                     1;
  t.cluster = embplan::uniform_topology(devices, dev);
  t.name = "feasibility";

  auto& c = out.rules;
  for (std::size_t i = 0; i < tables; ++i) {
    if (gen.uniform(0.0, 1.0) < 0.4) continue;
    embplan::table_rule r{.table = i};
    if (gen.uniform(0.0, 1.0) < 0.3) {
      const auto count = static_cast<std::size_t>(gen.between(1, static_cast<int>(devices)));
      for (std::size_t d = 0; d < devices; ++d)
        if (r.devices.size() < count && gen.uniform(0.0, 1.0) < 0.6) r.devices.push_back(d);
      if (r.devices.empty()) r.devices.push_back(static_cast<std::size_t>(gen.between(0, 1)));
    }
    if (gen.uniform(0.0, 1.0) < 0.3) {
      for (const auto k :
           {sharding_kind::table_wise, sharding_kind::column_wise, sharding_kind::row_wise})
        if (gen.uniform(0.0, 1.0) < 0.6) r.sharding.push_back(k);
      if (r.sharding.empty()) r.sharding.push_back(sharding_kind::column_wise);
    }
    if (gen.uniform(0.0, 1.0) < 0.35) r.max_shards = static_cast<std::uint32_t>(gen.between(1, 3));
    if (gen.uniform(0.0, 1.0) < 0.35) r.min_shards = static_cast<std::uint32_t>(gen.between(2, 3));
    c.tables.push_back(r);
  }
  if (gen.uniform(0.0, 1.0) < 0.6) {
    std::vector<std::size_t> g;
    for (std::size_t i = 0; i < tables; ++i)
      if (g.size() < devices && gen.uniform(0.0, 1.0) < 0.6) g.push_back(i);
    if (g.size() >= 2) c.separate.push_back(g);
  }
  if (gen.uniform(0.0, 1.0) < 0.3) {
    const auto a = static_cast<std::size_t>(gen.between(0, static_cast<int>(tables) - 1));
    const auto b = static_cast<std::size_t>(gen.between(0, static_cast<int>(tables) - 1));
    if (a != b) c.colocate.push_back({a, b});
  }
  try {
    (void)embplan::table_rules(t, c);
  } catch (const embplan::error&) {
    return std::nullopt;
  }
  return out;
}

enum class verdict { feasible, infeasible, undecided };

// The pieces table `ti` may be cut into here: whole; `c` equal column blocks
// (multiples of 4) for c up to its dim / 4 and the device count; `k` equal row
// ranges for k up to the device count. Each form's pieces on device 0 (the
// enumeration moves them).
std::vector<std::vector<embplan::shard>> forms_of(const embplan::task& t, std::size_t ti) {
  const auto& spec = t.tables[ti];
  const auto table = static_cast<std::uint32_t>(ti);
  const std::size_t devices = t.cluster.size();
  std::vector<std::vector<embplan::shard>> out;
  out.push_back({embplan::whole_table(t, ti, 0)});
  for (std::size_t c = 2; c <= devices && c <= static_cast<std::size_t>(spec.dim / 4); ++c) {
    std::vector<embplan::shard> form;
    const std::int32_t units = spec.dim / 4;
    std::int32_t begin = 0;
    for (std::size_t k = 0; k < c; ++k) {
      const auto n = static_cast<std::int32_t>(c);
      const std::int32_t end =
          k + 1 == c ? spec.dim
                     : begin + 4 * (units / n + (static_cast<std::int32_t>(k) < units % n));
      form.push_back({table, 0, begin, end, 0, spec.rows, false});
      begin = end;
    }
    out.push_back(form);
  }
  for (std::size_t k = 2; k <= devices; ++k) {
    const auto ranges = embplan::rowwise::range_partition::even(spec.rows, k);
    std::vector<embplan::shard> form;
    for (std::uint32_t p = 0; p < ranges.shards(); ++p)
      form.push_back({table, 0, 0, spec.dim, ranges.row_begin(p), ranges.row_end(p), false});
    out.push_back(form);
  }
  return out;
}

// Depth-first over tables, each table's forms, each piece's device, asking
// the rule (admits) at every step; a complete plan is accepted only if
// check_plan finds nothing. True when one is found; `budget` bounds the
// steps (exhausted: nullopt, undecided).
struct enumerator {
  const embplan::task& t;
  const embplan::default_constraint& rule;
  std::vector<std::vector<std::vector<embplan::shard>>> forms;
  std::uint64_t budget = 400'000;
  bool exhausted = false;

  bool place_table(std::size_t ti, embplan::placement_state& st, embplan::plan& p) {
    if (ti == t.tables.size()) return embplan::check_plan(t, p, rule).empty();
    for (const auto& form : forms[ti])
      if (place_piece(ti, form, 0, st, p)) return true;
    return false;
  }
  bool place_piece(std::size_t ti, const std::vector<embplan::shard>& form, std::size_t k,
                   embplan::placement_state& st, embplan::plan& p) {
    if (k == form.size()) return place_table(ti + 1, st, p);
    for (std::uint32_t d = 0; d < t.cluster.size(); ++d) {
      if (budget == 0) {
        exhausted = true;
        return false;
      }
      --budget;
      embplan::shard s = form[k];
      s.device = d;
      if (!rule.admits(t, st, s)) continue;
      embplan::placement_state next = st;
      next.place(t, s);
      p.shards.push_back(s);
      if (place_piece(ti, form, k + 1, next, p)) return true;
      p.shards.pop_back();
    }
    return false;
  }
};

// Whether some choice of a device set per table (allowed by pins, kinds,
// max_shards, co-location and separation) holds the tables' bytes split
// freely over their sets: Hall's condition for every subset of tables.
// False proves the task infeasible (every plan makes such a choice).
bool relaxation_feasible(const embplan::task& t, const embplan::user_constraints& c) {
  const std::size_t n = t.tables.size();
  const std::size_t devices = t.cluster.size();
  const std::uint32_t all = (1u << devices) - 1;
  std::vector<std::vector<std::uint32_t>> options(n);
  for (std::size_t i = 0; i < n; ++i) {
    const embplan::table_rule* r = nullptr;
    for (const auto& x : c.tables)
      if (x.table == i) r = &x;
    std::uint32_t allowed = all;
    std::size_t most = devices;
    if (r != nullptr) {
      if (!r->devices.empty()) {
        allowed = 0;
        for (const auto d : r->devices)
          allowed |= 1u << d;
      }
      const auto has = [&](sharding_kind k) {
        return r->sharding.empty() ||
               std::find(r->sharding.begin(), r->sharding.end(), k) != r->sharding.end();
      };
      if (!has(sharding_kind::row_wise)) {
        most = has(sharding_kind::column_wise)
                   ? std::min<std::size_t>(most, static_cast<std::size_t>(t.tables[i].dim / 4))
                   : 1;
      }
      if (r->max_shards != 0) most = std::min<std::size_t>(most, r->max_shards);
    }
    for (const auto& g : c.colocate)
      if (std::find(g.begin(), g.end(), i) != g.end()) most = 1;
    for (std::uint32_t set = 1; set <= all; ++set)
      if ((set & ~allowed) == 0 && static_cast<std::size_t>(std::popcount(set)) <= most)
        options[i].push_back(set);
  }
  std::vector<std::uint32_t> chosen(n, 0);
  const auto hall = [&] {
    for (std::uint32_t sub = 1; sub < (1u << n); ++sub) {
      std::uint64_t need = 0;
      std::uint32_t reach = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (((sub >> i) & 1u) == 0) continue;
        need += embplan::table_bytes(t.tables[i], t.optimizer_state);
        reach |= chosen[i];
      }
      std::uint64_t room = 0;
      for (std::size_t d = 0; d < devices; ++d)
        if (((reach >> d) & 1u) != 0) room += t.cluster.devices[d].memory_bytes;
      if (need > room) return false;
    }
    return true;
  };
  const auto consistent = [&](std::size_t upto) {
    for (const auto& g : c.separate)
      for (const auto a : g)
        for (const auto b : g)
          if (a < b && a <= upto && b <= upto && (chosen[a] & chosen[b]) != 0) return false;
    for (const auto& g : c.colocate)
      for (const auto a : g)
        for (const auto b : g)
          if (a <= upto && b <= upto && chosen[a] != chosen[b]) return false;
    return true;
  };
  const auto go = [&](const auto& self, std::size_t i) -> bool {
    if (i == n) return hall();
    for (const auto set : options[i]) {
      chosen[i] = set;
      if (consistent(i) && self(self, i + 1)) return true;
    }
    chosen[i] = 0;
    return false;
  };
  return go(go, 0);
}

verdict decide(const embplan::task& t, const embplan::user_constraints& c,
               const embplan::default_constraint& rule) {
  enumerator e{.t = t, .rule = rule, .forms = {}};
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    e.forms.push_back(forms_of(t, i));
  embplan::placement_state st(t);
  embplan::plan p;
  if (e.place_table(0, st, p)) return verdict::feasible;
  if (!relaxation_feasible(t, c)) return verdict::infeasible;
  return verdict::undecided;
}

}  // namespace

TEST_CASE("every preset plans a feasible ruled task or says its search found none") {
  embplan::rng gen(51);
  const auto models = embplan_test::bundled_models();
  std::vector<ruled_task> tasks;
  std::vector<verdict> verdicts;
  std::size_t feasible = 0;
  std::size_t infeasible = 0;
  while (tasks.size() < 120) {
    auto drawn = draw(gen);
    if (!drawn) continue;
    const embplan::table_rules rules(drawn->t, drawn->rules);
    const embplan::default_constraint rule{{}, {}, rules};
    const verdict v = decide(drawn->t, drawn->rules, rule);
    feasible += v == verdict::feasible ? 1 : 0;
    infeasible += v == verdict::infeasible ? 1 : 0;
    tasks.push_back(std::move(*drawn));
    verdicts.push_back(v);
  }
  MESSAGE(tasks.size() << " tasks: " << feasible << " feasible, " << infeasible
                       << " infeasible, the rest undecided");
  // The set exercises both sides.
  CHECK(feasible >= 40);
  CHECK(infeasible >= 10);

  std::map<std::string, std::size_t> planned;
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    const auto& [t, c] = tasks[k];
    const embplan::table_rules rules(t, c);
    const embplan::default_constraint rule{{}, {}, rules};
    for (const auto base : embplan::preset_names()) {
      for (const std::string prefix : {"", "rowwise_"}) {
        const std::string name = prefix + std::string(base);
        CAPTURE(k);
        CAPTURE(name);
        embplan::plan_result r;
        try {
          r = embplan::run_preset(name, t, 7, embplan::analytic_cost{}, models, rules);
        } catch (const std::exception& e) {
          FAIL_CHECK("threw on a well-formed task: " << e.what());
          continue;
        }
        if (r.ok) {
          CHECK(verdicts[k] != verdict::infeasible);
          CHECK(embplan::check_plan(t, r.placement, rule).empty());
          if (verdicts[k] == verdict::feasible) ++planned[name];
        } else {
          CHECK_FALSE(r.failure.empty());
          // A plan the planner's replay refuses is a searcher's fault.
          CHECK(r.failure.find("violated") == std::string::npos);
        }
      }
    }
  }
  std::string report;
  for (const auto base : embplan::preset_names()) {
    for (const std::string prefix : {"", "rowwise_"}) {
      const std::string name = prefix + std::string(base);
      report += name + " " + std::to_string(planned[name]) + "/" + std::to_string(feasible) + "; ";
    }
  }
  MESSAGE("feasible tasks planned: " << report);
}

TEST_CASE("min_shards with separate on 4 devices: the greedy presets plan it") {
  // Issue 51's task: table a cut into 2 column blocks, kept apart from b.
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 1u << 20;
  t.cluster = embplan::uniform_topology(4, dev);
  for (const char* name : {"a", "b"}) {
    embplan::table_spec s;
    s.name = name;
    s.rows = 1000;
    s.dim = 16;
    s.pooling_factor = 5.0;
    t.tables.push_back(s);
  }
  const embplan::user_constraints c{.tables = {{.table = 0, .min_shards = 2}},
                                    .separate = {{0, 1}}};
  const embplan::table_rules rules(t, c);
  const auto models = embplan_test::bundled_models();
  for (const auto name : {"lookup_greedy", "size_greedy", "neuroshard_ls", "dreamshard", "random",
                          "torchrec_like", "portfolio"}) {
    CAPTURE(name);
    const auto r = embplan::run_preset(name, t, 0, embplan::analytic_cost{}, models, rules);
    CHECK_MESSAGE(r.ok, r.failure);
    CHECK(embplan::check_plan(t, r.placement, embplan::default_constraint{{}, {}, rules}).empty());
  }
}

TEST_CASE("a failure behind the stage names tables by the caller's index") {
  // b (index 1) pinned to device 0, kept apart from a's two blocks, which
  // do not both fit device 1: b finds no device, and the message names it by
  // index 1, not by its index among the stage's blocks (2).
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 63'999;  // a block of a (32 000 bytes), not b (64 000) nor two blocks
  t.cluster = embplan::uniform_topology(2, dev);
  for (const char* name : {"a", "b"}) {
    embplan::table_spec s;
    s.name = name;
    s.rows = 1000;
    s.dim = 16;
    t.tables.push_back(s);
  }
  const embplan::user_constraints c{
      .tables = {{.table = 0, .min_shards = 2}, {.table = 1, .devices = {0}}},
      .separate = {{0, 1}}};
  const embplan::table_rules rules(t, c);
  const auto r = embplan::run_preset("random", t, 0, embplan::analytic_cost{}, {}, rules);
  REQUIRE_FALSE(r.ok);
  CHECK(r.failure.find("table 'b' (index 1)") != std::string::npos);
  CHECK(r.failure.find("(index 2)") == std::string::npos);
}

TEST_CASE("a row split that max_shards forbids names max_shards") {
  embplan::task t;
  embplan::device_spec dev;
  dev.memory_bytes = 1u << 20;
  t.cluster = embplan::uniform_topology(4, dev);
  embplan::table_spec s;
  s.name = "big";
  s.rows = 40'000;
  s.dim = 16;  // 2.56 MB: three devices' worth
  t.tables.push_back(s);
  const embplan::table_rules rules(t, {.tables = {{.table = 0, .max_shards = 1}}});
  const auto r =
      embplan::run_preset("rowwise_lookup_greedy", t, 0, embplan::analytic_cost{}, {}, rules);
  REQUIRE_FALSE(r.ok);
  CHECK(r.failure.find("max_shards 1") != std::string::npos);
  CHECK(r.failure.find("does not fit") == std::string::npos);
}
