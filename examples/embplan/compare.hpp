#pragma once
// `embplan compare`: every registered planner on the same tasks, judged by one
// meter, reported in the shape of NeuroShard Table 1 / Table 3.

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/embplan.hpp"

namespace embplan_cli {

struct planner_summary {
  std::string planner;
  std::size_t tasks = 0;
  std::size_t succeeded = 0;
  double mean_cost_ms = 0.0;  // over all tasks; meaningful only if all succeeded
  double mean_balance = 0.0;  // over succeeded tasks
  double mean_speedup = 0.0;  // cost(random) / cost(plan), over tasks both solved
  std::size_t speedup_tasks = 0;
  double mean_sharding_ms = 0.0;    // over all tasks
  double mean_gap = 0.0;            // cost / lower bound - 1, over succeeded tasks
  std::uint64_t cache_lookups = 0;  // the searcher's device-cost cache, all tasks
  std::uint64_t cache_hits = 0;
  bool has_cache() const { return cache_lookups > 0; }
  double cache_hit_rate() const {
    return cache_lookups ? double(cache_hits) / double(cache_lookups) : 0.0;
  }
  double success_rate() const { return tasks ? double(succeeded) / double(tasks) : 0.0; }
  bool all_succeeded() const { return tasks > 0 && succeeded == tasks; }
};

// Runs each planner on each task (seed = task index, so planners see the same
// randomness per task) and prices every plan with `meter`. The planners that
// search on any cost model search on `model` (embplan::run_preset).
template <class Meter, class Model>
std::vector<planner_summary> compare_planners(std::span<const embplan::task> tasks,
                                              std::span<const std::string_view> planners,
                                              const Meter& meter, const Model& model,
                                              std::uint64_t seed) {
  const std::size_t n = tasks.size();
  std::vector<std::vector<double>> cost(
      planners.size(), std::vector<double>(n, std::numeric_limits<double>::quiet_NaN()));
  std::vector<planner_summary> out(planners.size());
  // The additive lower bound under the meter itself (search/lower_bound.hpp),
  // once per task: gap = how far a plan is from it.
  std::vector<double> bound(n);
  for (std::size_t i = 0; i < n; ++i)
    bound[i] = embplan::additive_lower_bound(tasks[i], meter);
  for (std::size_t p = 0; p < planners.size(); ++p) {
    auto& s = out[p];
    s.planner = std::string(planners[p]);
    s.tasks = n;
    for (std::size_t i = 0; i < n; ++i) {
      const auto result =
          embplan::run_preset(planners[p], tasks[i], embplan::derive_seed(seed, i), model);
      s.mean_sharding_ms += result.sharding_ms / double(n);
      s.cache_lookups += result.cache_lookups;
      s.cache_hits += result.cache_hits;
      if (!result.ok) continue;
      const auto measured = embplan::evaluate(tasks[i], result.placement, meter);
      cost[p][i] = measured.max_ms();
      ++s.succeeded;
      s.mean_cost_ms += cost[p][i];
      s.mean_balance += measured.balance();
      s.mean_gap += embplan::gap_to_bound(cost[p][i], bound[i]);
    }
    if (s.succeeded) {
      s.mean_cost_ms /= double(s.succeeded);
      s.mean_balance /= double(s.succeeded);
      s.mean_gap /= double(s.succeeded);
    }
  }
  // Speedup over random: on the tasks both random and the planner solved.
  std::size_t random_index = planners.size();
  for (std::size_t p = 0; p < planners.size(); ++p) {
    if (planners[p] == "random") random_index = p;
  }
  if (random_index < planners.size()) {
    for (std::size_t p = 0; p < planners.size(); ++p) {
      double sum = 0.0;
      std::size_t k = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double r = cost[random_index][i];
        const double c = cost[p][i];
        if (std::isnan(r) || std::isnan(c) || c <= 0.0) continue;
        sum += r / c;
        ++k;
      }
      out[p].speedup_tasks = k;
      out[p].mean_speedup = k ? sum / double(k) : 0.0;
    }
  }
  return out;
}

inline nlohmann::json to_json(const planner_summary& s) {
  nlohmann::json j;
  j["planner"] = s.planner;
  j["tasks"] = s.tasks;
  j["succeeded"] = s.succeeded;
  j["success_rate"] = s.success_rate();
  j["mean_cost_ms"] = s.all_succeeded() ? nlohmann::json(s.mean_cost_ms) : nlohmann::json(nullptr);
  j["mean_cost_ms_of_succeeded"] =
      s.succeeded ? nlohmann::json(s.mean_cost_ms) : nlohmann::json(nullptr);
  j["mean_balance"] = s.mean_balance;
  j["mean_speedup_over_random"] =
      s.speedup_tasks ? nlohmann::json(s.mean_speedup) : nlohmann::json(nullptr);
  j["mean_sharding_ms"] = s.mean_sharding_ms;
  j["mean_gap_to_lower_bound"] = s.succeeded ? nlohmann::json(s.mean_gap) : nlohmann::json(nullptr);
  j["cache_hit_rate"] =
      s.has_cache() ? nlohmann::json(s.cache_hit_rate()) : nlohmann::json(nullptr);
  j["cache_lookups"] = s.cache_lookups;
  return j;
}

}  // namespace embplan_cli
