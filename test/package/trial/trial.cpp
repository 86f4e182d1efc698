// A downstream trainer's first day with embplan, built against the installed
// package (find_package(embplan COMPONENTS core io)): its own 30 tables on
// 4 x 16 GiB devices, two presets, then its own Constraint (a pinned table),
// Reward and Searcher composed with row-wise splitting, on a task whose table 0
// fits no device; a task read from JSON and the plan written as JSON.
// Exit code 0 when every check holds.

#include <embplan/core.hpp>
#include <embplan/io/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

// ---------------------------------------------------------------- my policies

// Table `table`, every piece of it, on device `device`.
struct pin_table {
  std::uint32_t table = 0;
  std::uint32_t device = 0;

  bool admits(const embplan::task&, const embplan::placement_state&,
              const embplan::shard& s) const {
    return s.table != table || s.device == device;
  }
  std::string describe() const {
    return "table " + std::to_string(table) + " on device " + std::to_string(device);
  }
};
static_assert(embplan::constraint<pin_table>);

// Minus the slowest device, minus a tenth of the mean: a plan that is fast
// everywhere beats one that is fast only at its bottleneck.
struct fast_everywhere {
  std::string_view name() const noexcept { return "fast_everywhere"; }
  double score(const embplan::task&, const embplan::plan_cost& c) const {
    double sum = 0.0;
    for (const auto& d : c.devices)
      sum += d.total_ms();
    const double mean = c.devices.empty() ? 0.0 : sum / static_cast<double>(c.devices.size());
    return -c.max_ms() - 0.1 * mean;
  }
};
static_assert(embplan::reward<fast_everywhere>);

// Greedy by load from two orders (costliest first, largest first); keeps the
// plan the reward prefers.
struct two_orders {
  static constexpr bool uses_reward = true;

  std::string_view name() const noexcept { return "two_orders"; }

  template <embplan::cost_model M, embplan::constraint C, embplan::reward R>
  embplan::search_result search(const embplan::task& t, const M& model, const C& rule,
                                const R& reward, std::uint64_t) const {
    const std::size_t n = t.tables.size();
    const std::size_t devices = t.cluster.size();
    std::vector<double> cost(n);
    for (std::size_t i = 0; i < n; ++i)
      cost[i] = model.shard_cost(t, embplan::whole_table(t, i, 0));
    embplan::search_result best;
    double best_score = 0.0;
    for (int by_bytes = 0; by_bytes < 2; ++by_bytes) {
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return by_bytes != 0 ? embplan::table_bytes(t.tables[a]) > embplan::table_bytes(t.tables[b])
                             : cost[a] > cost[b];
      });
      embplan::placement_state st(devices);
      std::vector<double> load(devices, 0.0);
      std::vector<std::size_t> device_of(n);
      bool placed_all = true;
      for (const std::size_t i : order) {
        std::size_t chosen = devices;
        for (std::size_t d = 0; d < devices; ++d)
          if (rule.admits(t, st, embplan::whole_table(t, i, d)) &&
              (chosen == devices || load[d] < load[chosen]))
            chosen = d;
        if (chosen == devices) {
          if (best.failure.empty()) best.failure = embplan::no_device_for(t, st, i, rule);
          placed_all = false;
          break;
        }
        st.place(t, embplan::whole_table(t, i, chosen));
        load[chosen] += cost[i];
        device_of[i] = chosen;
      }
      if (!placed_all) continue;
      embplan::plan p = embplan::table_wise_plan(t, device_of);
      const double score = reward.score(t, embplan::evaluate(t, p, model));
      if (!best.ok || score > best_score) {
        best.placement = std::move(p);
        best.ok = true;
        best_score = score;
      }
    }
    if (best.ok) best.failure.clear();
    return best;
  }
};
static_assert(embplan::searcher<two_orders>);

// ---------------------------------------------------------------- my tables

embplan::task my_task() {
  embplan::task t;
  t.name = "trial";
  t.cluster = embplan::uniform_topology(4, embplan::device_spec{.memory_bytes = 16 * embplan::gib});
  for (int i = 0; i < 30; ++i) {
    embplan::table_spec spec;
    spec.name = "feature_" + std::to_string(i);
    spec.rows = 100'000 + 250'000 * ((i * 7) % 11);
    spec.dim = 16 << (i % 4);  // 16 .. 128
    spec.pooling_factor = 1.0 + (i * 3) % 20;
    spec.reuse_hist[0] = 0.7;
    spec.reuse_hist[1] = 0.2;
    spec.reuse_hist[4] = 0.1;
    t.tables.push_back(spec);
  }
  return t;
}

bool honours(const embplan::plan& p, const pin_table& pin) {
  bool seen = false;
  for (const auto& s : p.shards) {
    if (s.table != pin.table) continue;
    seen = true;
    if (s.device != pin.device) return false;
  }
  return seen;
}

// The checks every plan_result of a planner priced by the analytic model passes.
template <class Result>
void check_priced(const Result& r, const embplan::task& t, const char* who) {
  std::printf("%-28s ok=%d  %8.3f ms (meter %s; searched on %s)  %zu shards\n", who, r.ok,
              r.cost_ms.max_ms(), r.meter.c_str(), r.search_model.c_str(),
              r.placement.shards.size());
  if (!r.ok) {
    std::fprintf(stderr, "%s: %s\n", who, r.failure.c_str());
    check(false, "the planner finds a plan");
    return;
  }
  embplan::validate(t, r.placement, embplan::plan_check{.dim_multiple = 4});
  check(r.meter == "analytic", "cost_ms comes from the analytic meter");
  check(r.cost_ms.max_ms() > 0.0 &&
            r.cost_ms.max_ms() ==
                embplan::evaluate(t, r.placement, embplan::analytic_cost{}).max_ms(),
        "cost_ms is the plan priced by the analytic model, in ms");
}

}  // namespace

int main() {
  try {
    const embplan::task t = my_task();

    // Two presets.
    check_priced(embplan::lookup_greedy_planner{}(t, 0), t, "lookup_greedy_planner");
    const auto ns = embplan::neuroshard_planner{}(t, 0);
    check_priced(ns, t, "neuroshard_planner");
    check(ns.search_unit == embplan::cost_unit::ms, "neuroshard searches in ms");

    // My own composition, on a task whose table 0 (before the pinned table 7)
    // is larger than any device.
    embplan::task big = t;
    big.tables[0].rows = 40'000'000;
    big.tables[0].dim = 128;  // 20.48 GB > 16 GiB
    const pin_table pin{.table = 7, .device = 3};
    using rule = embplan::all_of<embplan::memory_capacity, embplan::dim_multiple, pin_table>;
    const rule my_rule{embplan::memory_capacity{}, embplan::dim_multiple{}, pin};

    using mine = embplan::planner<embplan::analytic_cost, embplan::stage::staged<two_orders>, rule,
                                  fast_everywhere>;
    const auto r = mine{{}, {.settings = {.split_rows = true}}, my_rule, {}}(big, 0);
    check_priced(r, big, "mine (own searcher)");
    check(honours(r.placement, pin), "table 7 stays on device 3");
    check(r.search_unit == embplan::cost_unit::ms, "searched in ms");
    check(r.reward == fast_everywhere{}.score(big, r.search_cost), "reward is my reward's score");
    std::size_t pieces_of_0 = 0;
    for (const auto& s : r.placement.shards)
      pieces_of_0 += s.table == 0 ? 1 : 0;
    check(pieces_of_0 >= 2, "table 0 is split by rows");

    using greedy =
        embplan::planner<embplan::analytic_cost, embplan::stage::staged<embplan::sorted_greedy>,
                         rule, fast_everywhere>;
    const auto g = greedy{{}, {.settings = {.split_rows = true}}, my_rule, {}}(big, 0);
    check_priced(g, big, "mine (sorted_greedy)");
    check(honours(g.placement, pin), "table 7 stays on device 3 (sorted_greedy)");

    // Without row-wise splitting the task is infeasible, and says why.
    const auto none = embplan::planner<embplan::analytic_cost, two_orders, rule, fast_everywhere>{
        {}, {}, my_rule, {}}(big, 0);
    check(!none.ok && none.failure.find("feature_0") != std::string::npos,
          "without splitting, the failure names table 0");

    // A task from JSON, planned, the plan written as JSON and read back.
    const std::string text = R"({
      "name": "from_json",
      "tables": [
        {"name": "user_id", "rows": 50000000, "dim": 128, "pooling_factor": 1},
        {"name": "item_id", "rows": 2000000, "dim": 64, "pooling_factor": 20},
        {"name": "country", "rows": 300, "dim": 16, "pooling_factor": 1},
        {"name": "history", "rows": 5000000, "dim": 32, "pooling_factor": 50, "dtype": "fp16"},
        {"row": 100000, "dim": 8, "pooling_factor": 3.5}
      ],
      "cluster": {"count": 4, "device": {"memory_gib": 16}}
    })";
    const embplan::task from_json = embplan::io::task_from_json(embplan::io::parse_json(text));
    const auto j = mine{{},
                        {.settings = {.split_rows = true}},
                        rule{{}, {}, pin_table{.table = 2, .device = 1}},
                        {}}(from_json, 0);
    check_priced(j, from_json, "mine (task from JSON)");
    check(honours(j.placement, pin_table{.table = 2, .device = 1}), "country stays on device 1");
    const std::string written = embplan::io::to_json(from_json, j.placement).dump();
    const embplan::plan read_back =
        embplan::io::plan_from_json(embplan::io::parse_json(written), from_json);
    check(read_back == j.placement, "the plan reads back as written");
    std::printf("plan as JSON: %s...\n", written.substr(0, 100).c_str());

    // A misspelt key is an error, not a default.
    try {
      std::string typo = text;
      typo.replace(typo.find("\"dtype\""), 7, "\"dtyp\"");
      (void)embplan::io::task_from_json(embplan::io::parse_json(typo));
      check(false, "a misspelt key is rejected");
    } catch (const embplan::error& e) {
      std::printf("misspelt key: %s\n", e.what());
      check(std::string_view(e.what()).find("did you mean \"dtype\"") != std::string_view::npos,
            "the error names the key meant");
    }
  } catch (const embplan::error& e) {
    std::fprintf(stderr, "embplan::error: %s\n", e.what());
    return 2;
  }
  if (failures != 0) std::fprintf(stderr, "%d checks failed\n", failures);
  return failures == 0 ? 0 : 1;
}
