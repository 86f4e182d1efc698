// docs/extending.md, "Writing your own Searcher": greedy placement from several
// table orders (costliest first, then seeded shuffles), keeping the plan the
// Reward scores highest. Plans a small task, checks the contract (same seed,
// same plan; the planner's replay catches a searcher that ignores the
// constraint); exits non-zero otherwise.

#include <embplan/core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// [extending.md: restart_greedy]
struct restart_greedy {
  std::uint32_t restarts = 8;  // table orders tried: costliest first, then shuffles

  // It compares complete plans by Reward::score (embplan::searcher_uses_reward).
  static constexpr bool uses_reward = true;

  std::string_view name() const noexcept { return "restart_greedy"; }

  template <embplan::cost_model CostModel, embplan::constraint Constraint, embplan::reward Reward>
  embplan::search_result search(const embplan::task& t, const CostModel& model,
                                const Constraint& rule, const Reward& reward,
                                std::uint64_t seed) const {
    if (restarts == 0) throw embplan::error("restart_greedy.restarts = 0: expected at least 1");
    const std::size_t tables = t.tables.size();
    const std::size_t devices = t.cluster.size();
    std::vector<double> cost(tables);
    for (std::size_t i = 0; i < tables; ++i)
      cost[i] = model.shard_cost(t, embplan::whole_table(t, i, 0));

    embplan::search_result best;
    best.evaluations = tables;
    double best_score = 0.0;
    std::vector<std::size_t> order(tables);
    for (std::uint32_t r = 0; r < restarts; ++r) {
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
      if (r > 0) {  // a shuffle from its own sub-stream of the seed: reproducible
        embplan::rng gen(embplan::derive_seed(seed, r));
        for (std::size_t i = tables; i > 1; --i)
          std::swap(order[i - 1], order[gen.below(i)]);
      }
      // Each table to the admitted device with the least load so far.
      embplan::placement_state st(devices);
      std::vector<double> load(devices, 0.0);
      embplan::plan p;
      std::string failure;
      for (const std::size_t i : order) {
        std::size_t chosen = devices;
        for (std::size_t d = 0; d < devices; ++d) {
          if (!rule.admits(t, st, embplan::whole_table(t, i, d))) continue;
          if (chosen == devices || load[d] < load[chosen]) chosen = d;
        }
        if (chosen == devices) {  // the library's message for "fits nowhere"
          failure = embplan::no_device_for(t, st, i, rule);
          break;
        }
        const embplan::shard s = embplan::whole_table(t, i, chosen);
        st.place(t, s);
        load[chosen] += cost[i];
        p.shards.push_back(s);
      }
      if (!failure.empty()) {
        if (!best.ok && best.failure.empty()) best.failure = std::move(failure);
        continue;
      }
      // A complete plan: price it with the search's cost model, score it.
      const double score = reward.score(t, embplan::evaluate(t, p, model));
      best.evaluations += devices + 2;  // compute() per device, communication() twice
      if (!best.ok || score > best_score) {
        best.placement = std::move(p);
        best.ok = true;
        best.failure.clear();
        best_score = score;
      }
    }
    return best;
  }
};
static_assert(embplan::searcher<restart_greedy>);
// [end]

// [extending.md: careless]
// Everything on device 0, whatever the constraint says: the planner's replay
// reports it instead of returning the plan.
struct careless {
  std::string_view name() const noexcept { return "careless"; }

  template <embplan::cost_model CostModel, embplan::constraint Constraint, embplan::reward Reward>
  embplan::search_result search(const embplan::task& t, const CostModel&, const Constraint&,
                                const Reward&, std::uint64_t) const {
    embplan::search_result out;
    out.placement = embplan::table_wise_plan(t, std::vector<std::size_t>(t.tables.size(), 0));
    out.ok = true;
    return out;
  }
};
static_assert(embplan::searcher<careless>);
// [end]

namespace {

// 24 tables on 4 devices of 1 GiB.
embplan::task small_task() {
  embplan::task t;
  t.name = "own_searcher";
  t.cluster = embplan::uniform_topology(4, embplan::device_spec{.memory_bytes = embplan::gib});
  for (int i = 0; i < 24; ++i) {
    embplan::table_spec spec;
    spec.name = "t" + std::to_string(i);
    spec.rows = 100'000 * (1 + i % 6);
    spec.dim = 16 << (i % 3);
    spec.pooling_factor = 1.0 + (i * 7) % 11;
    spec.reuse_hist[0] = 1.0;
    t.tables.push_back(spec);
  }
  return t;
}

}  // namespace

int main() {
  const embplan::task t = small_task();

  // [extending.md: plan_with_searcher]
  using my_planner = embplan::planner<embplan::analytic_cost, restart_greedy,
                                      embplan::default_constraint, embplan::neg_max_cost_reward>;
  const my_planner planner{{}, restart_greedy{.restarts = 16}, {}, {}};
  const embplan::plan_result r = planner(t, /*seed=*/1);
  // [end]
  if (!r.ok) {
    std::fprintf(stderr, "no plan: %s\n", r.failure.c_str());
    return 1;
  }
  embplan::validate(t, r.placement);
  // Same seed, same plan; more restarts never score lower (they include the first ones).
  if (planner(t, 1).placement != r.placement) {
    std::fprintf(stderr, "the same seed gave another plan\n");
    return 1;
  }
  const my_planner one{{}, restart_greedy{.restarts = 1}, {}, {}};
  const embplan::plan_result first = one(t, 1);
  if (!first.ok || first.reward > r.reward) {
    std::fprintf(stderr, "16 restarts scored below 1\n");
    return 1;
  }
  std::printf("restart_greedy: %.3f ms after 16 orders, %.3f ms after 1; %llu evaluations\n",
              r.cost_ms.max_ms(), first.cost_ms.max_ms(),
              static_cast<unsigned long long>(r.evaluations));

  // A searcher that breaks the constraint gets no plan through the planner.
  const auto bad = embplan::planner<embplan::analytic_cost, careless, embplan::default_constraint,
                                    embplan::neg_max_cost_reward>{}(t);
  if (bad.ok || bad.failure.find("searcher 'careless' violated memory capacity") != 0) {
    std::fprintf(stderr, "careless: expected a violation, got '%s'\n", bad.failure.c_str());
    return 1;
  }
  std::printf("careless: %s\n", bad.failure.c_str());
  return 0;
}
