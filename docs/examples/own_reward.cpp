// docs/extending.md, "Writing your own Reward": prefer plans that leave memory
// free on every device. Plans one task under two rewards with a searcher that
// uses the reward (random_search) and one that does not (sorted_greedy), and
// checks what each must do; exits non-zero otherwise.

#include <embplan/core.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

// [extending.md: headroom_reward]
// Minus the plan's cost, less a penalty for each device filled beyond
// `max_fill` of its memory: among plans that leave enough free, the fastest
// wins; a plan that fills a device by 1 % too much pays `penalty` (in the
// cost's own unit) on top.
struct headroom_reward {
  double max_fill = 0.75;   // share of a device's memory a plan may fill freely
  double penalty = 1000.0;  // per 100 % over max_fill

  std::string_view name() const noexcept { return "headroom"; }

  double score(const embplan::task& t, const embplan::plan_cost& c) const {
    double over = 0.0;
    for (std::size_t d = 0; d < t.cluster.size(); ++d) {
      const double fill = static_cast<double>(c.memory_bytes[d]) /
                          static_cast<double>(t.cluster.devices[d].memory_bytes);
      over = std::max(over, fill - max_fill);
    }
    return -c.max_ms() - penalty * over;
  }
};
static_assert(embplan::reward<headroom_reward>);
// [end]

namespace {

// 20 tables on 4 devices of 512 MiB, about 60 % full in all.
embplan::task small_task() {
  embplan::task t;
  t.name = "own_reward";
  t.cluster = embplan::uniform_topology(4, embplan::device_spec{.memory_bytes = embplan::gib / 2});
  for (int i = 0; i < 20; ++i) {
    embplan::table_spec spec;
    spec.name = "t" + std::to_string(i);
    spec.rows = 200'000 + 150'000 * (i % 5);
    spec.dim = i % 2 == 0 ? 64 : 32;
    spec.pooling_factor = 2.0 + i % 9;
    spec.reuse_hist[0] = 1.0;
    t.tables.push_back(spec);
  }
  return t;
}

double worst_fill(const embplan::task& t, const embplan::plan_cost& c) {
  double worst = 0.0;
  for (std::size_t d = 0; d < t.cluster.size(); ++d)
    worst = std::max(worst, static_cast<double>(c.memory_bytes[d]) /
                                static_cast<double>(t.cluster.devices[d].memory_bytes));
  return worst;
}

}  // namespace

int main() {
  const embplan::task t = small_task();
  using rule = embplan::default_constraint;

  // [extending.md: use_reward]
  static_assert(embplan::searcher_uses_reward<embplan::random_search>);
  static_assert(!embplan::searcher_uses_reward<embplan::sorted_greedy>);
  using roomy_planner =
      embplan::planner<embplan::analytic_cost, embplan::random_search, rule, headroom_reward>;
  using fast_planner = embplan::planner<embplan::analytic_cost, embplan::random_search, rule,
                                        embplan::neg_max_cost_reward>;
  const embplan::plan_result roomy = roomy_planner{}(t, /*seed=*/7);
  const embplan::plan_result fast = fast_planner{}(t, /*seed=*/7);
  // [end]
  if (!roomy.ok || !fast.ok) {
    std::fprintf(stderr, "no plan: %s%s\n", roomy.failure.c_str(), fast.failure.c_str());
    return 1;
  }
  embplan::validate(t, roomy.placement);
  const headroom_reward headroom;
  // The planner reports the score of the plan it returns...
  if (roomy.reward != headroom.score(t, roomy.search_cost)) {
    std::fprintf(stderr, "plan_result::reward is not the reward's score\n");
    return 1;
  }
  // ... and a searcher that uses the reward returns the plan it scores
  // highest: both runs draw the same 100 samples (same seed), so the plan kept
  // under headroom_reward scores at least as high under it as the fastest one.
  if (roomy.reward < headroom.score(t, fast.search_cost)) {
    std::fprintf(stderr, "random_search did not optimise headroom_reward\n");
    return 1;
  }
  std::printf("headroom: %.3f ms, fullest device %.0f %%; neg_max_cost: %.3f ms, %.0f %%\n",
              roomy.cost_ms.max_ms(), 100.0 * worst_fill(t, roomy.cost_ms), fast.cost_ms.max_ms(),
              100.0 * worst_fill(t, fast.cost_ms));

  // A constructive searcher ignores the reward: the same plan under both.
  const auto greedy_roomy =
      embplan::planner<embplan::analytic_cost, embplan::sorted_greedy, rule, headroom_reward>{}(t);
  const auto greedy_fast = embplan::planner<embplan::analytic_cost, embplan::sorted_greedy, rule,
                                            embplan::neg_max_cost_reward>{}(t);
  if (!greedy_roomy.ok || greedy_roomy.placement != greedy_fast.placement) {
    std::fprintf(stderr, "sorted_greedy's plan changed with the reward\n");
    return 1;
  }
  return 0;
}
