// `embplan compare`: every registered planner on the same tasks, judged by one
// meter, reported in the shape of NeuroShard Table 1 / Table 3.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/io/json.hpp"
#include "embplan/meter/paired.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/exact.hpp"
#include "embplan/search/lower_bound.hpp"
#include "embplan/torchrec/planner.hpp"
#include "models.hpp"
#include "options.hpp"
#include "planners.hpp"
#include "progress.hpp"
#include "tasks.hpp"
#include "text_table.hpp"

namespace embplan_cli {

namespace {

// The planner compare's cost ratios are to when --baseline is not given (and
// it is among --planners): TorchRec's own planner (v0.3.2, docs/torchrec.md).
constexpr std::string_view default_baseline = "torchrec";

struct planner_summary {
  std::string planner;
  std::size_t tasks = 0;
  std::size_t succeeded = 0;
  std::size_t no_device = 0;  // failures on a task with a table larger than any device
  double mean_cost_ms = 0.0;  // over the succeeded tasks
  double mean_balance = 0.0;  // over succeeded tasks
  double mean_speedup = 0.0;  // cost(random) / cost(plan), over tasks both solved
  std::size_t speedup_tasks = 0;
  double mean_sharding_ms = 0.0;  // over all tasks
  double mean_gap = 0.0;          // cost / lower bound - 1, over succeeded tasks
  bool has_gap = true;            // false: the meter prices plans unlike its devices' sum
  // --optimum: cost / the task's optimum table-wise plan - 1, over the tasks
  // both solved; how many of them the planner's plan costs no more than it.
  double mean_gap_opt = 0.0;
  std::size_t optimum_tasks = 0;
  std::size_t optimum_found = 0;
  // Per task: cost / the baseline planner's cost of the same task (NaN where
  // either failed), and their geometric mean with its 95 % t-interval.
  std::vector<double> ratios;
  embplan::meter::ratio_interval to_baseline;
  std::vector<double> costs;        // per task, NaN where it failed (--json's per_task_cost_ms)
  std::uint64_t cache_lookups = 0;  // the searcher's device-cost cache, all tasks
  std::uint64_t cache_hits = 0;
  // A portfolio's plans by the member that made them (search_result::made_by),
  // over the tasks it solved; empty for other planners.
  std::map<std::string, std::size_t> made_by;
  bool has_cache() const { return cache_lookups > 0; }
  double cache_hit_rate() const {
    return cache_lookups ? double(cache_hits) / double(cache_lookups) : 0.0;
  }
  double success_rate() const { return tasks ? double(succeeded) / double(tasks) : 0.0; }
  bool all_succeeded() const { return tasks > 0 && succeeded == tasks; }
  // The mean cost, and where some task failed, over the solved ones: "12.34 (3/4)".
  std::string cost_text() const {
    if (all_succeeded()) return fixed(mean_cost_ms);
    const std::string solved = "(" + std::to_string(succeeded) + "/" + std::to_string(tasks) + ")";
    return (succeeded ? fixed(mean_cost_ms) : std::string("-")) + " " + solved;
  }
};

// How planner_comparison judges the plans.
struct judging {
  bool optimum = false;    // also each task's optimum (exact search)
  std::size_t rounds = 1;  // interleaved measurements per plan (measured meter)
  std::size_t baseline =
      std::numeric_limits<std::size_t>::max();  // index of the planner the ratios are to, if any
  embplan::stage::stage_settings stages{};      // --data-parallel auto, --rows-by-cost auto
};

// Runs each planner on each task (seed = task index, so planners see the same
// randomness per task) and prices every plan with `meter`. NeuroShard's
// planners search on the planning model (planners.hpp). Task by task: all
// planners plan it, then their plans are priced back to back, `rounds` times
// interleaved (meter/paired.hpp: A B C A B C ...), each plan's cost the mean
// of its rounds; per task, each plan's cost over the baseline's.
// With `optimum`, also each task's optimum table-wise plan under the meter
// (exact_table_wise, search/exact.hpp) and each plan's gap to it.
// The tasks come one at a time (add), so that a run of a million tasks holds
// one task, not all of them: what it keeps per planner and task is the
// plan's cost and, at the end, its ratio to the baseline's.
class planner_comparison {
 public:
  // `tasks`: how many add() will be given.
  planner_comparison(std::span<const std::string> planners, const meter_choice& meter,
                     const planning_model& pm, std::uint64_t seed, const judging& how,
                     std::size_t tasks)
      : planners_(planners)
      , meter_(meter)
      , pm_(pm)
      , seed_(seed)
      , how_(how)
      , n_(tasks)
      // No lower bound for a meter whose plan cost is not its devices' (--meter dreamshard).
      , with_bound_(!meter.plan_ms)
      , out_(planners.size()) {
    for (std::size_t p = 0; p < out_.size(); ++p) {
      out_[p].planner = planners[p];
      out_[p].tasks = n_;
      out_[p].has_gap = with_bound_;
      out_[p].costs.assign(n_, nan);  // NaN until the planner solves the task
    }
  }

  // The next of the tasks: every planner plans it, its plans are priced.
  void add(const embplan::task& task, progress& bar) {
    const std::size_t i = added_++;
    // NaN: no optimum asked for, or the task has no table-wise plan.
    double best = nan;
    if (how_.optimum) {
      const auto r = embplan::exact_table_wise{}.search(
          task, meter_.meter, embplan::default_constraint{}, embplan::neg_max_cost_reward{}, 0);
      if (r.ok) best = embplan::evaluate(task, r.placement, meter_.meter).max_ms();
      bar.advance();
    }
    // The additive lower bound under the meter itself (search/lower_bound.hpp):
    // gap = how far a plan is from it.
    const double bound = with_bound_ ? embplan::additive_lower_bound(task, meter_.meter) : 0.0;
    plans_.clear();
    planned_.clear();
    for (std::size_t p = 0; p < out_.size(); ++p) {
      auto& s = out_[p];
      auto result =
          run_planner(planners_[p], task, embplan::derive_seed(seed_, i), pm_, {}, how_.stages);
      s.mean_sharding_ms += result.search_ms / double(n_);
      s.cache_lookups += result.cache_lookups;
      s.cache_hits += result.cache_hits;
      if (!result.ok) {
        s.no_device += oversized_tables(task) > 0 ? 1 : 0;
        bar.advance();
        continue;
      }
      if (!result.made_by.empty()) ++s.made_by[result.made_by];
      plans_.push_back(std::move(result.placement));
      planned_.push_back(p);
    }
    const auto measured = embplan::meter::measure_interleaved(
        task, std::span<const embplan::plan>(plans_), meter_.meter, how_.rounds);
    for (std::size_t k = 0; k < plans_.size(); ++k) {
      auto& s = out_[planned_[k]];
      double c = 0.0;
      double balance = 0.0;
      for (const auto& round : measured[k]) {
        c += round.max_ms() / double(how_.rounds);
        balance += round.balance() / double(how_.rounds);
      }
      if (meter_.plan_ms) c = meter_.plan_ms(task, plans_[k]);
      s.costs[i] = c;
      ++s.succeeded;
      s.mean_cost_ms += c;
      s.mean_balance += balance;
      if (with_bound_) s.mean_gap += embplan::gap_to_bound(c, bound);
      if (!std::isnan(best)) {
        ++s.optimum_tasks;
        s.mean_gap_opt += embplan::gap_to_bound(c, best);
        // The same plan priced the same way gives the same figure; allow
        // for a different plan of equal cost summed in another order.
        s.optimum_found += c <= best * (1.0 + 1e-12) ? 1 : 0;
      }
      bar.advance();
    }
  }

  // The summaries, once every task was added.
  std::vector<planner_summary> finish() && {
    const std::size_t np = out_.size();
    for (auto& s : out_) {
      if (s.succeeded) {
        s.mean_cost_ms /= double(s.succeeded);
        s.mean_balance /= double(s.succeeded);
        s.mean_gap /= double(s.succeeded);
      }
      if (s.optimum_tasks) s.mean_gap_opt /= double(s.optimum_tasks);
    }
    // Paired ratios to the baseline: NaN where either failed the task.
    if (how_.baseline < np) {
      const auto& base = out_[how_.baseline].costs;
      for (auto& s : out_) {
        s.ratios.resize(n_);
        for (std::size_t i = 0; i < n_; ++i)
          s.ratios[i] = s.costs[i] / base[i];
        s.to_baseline = embplan::meter::paired_ratio_interval(std::span<const double>(s.ratios));
      }
    }
    // Speedup over random: on the tasks both random and the planner solved.
    std::size_t random_index = np;
    for (std::size_t p = 0; p < np; ++p) {
      if (planners_[p] == "random") random_index = p;
    }
    if (random_index < np) {
      const auto& random = out_[random_index].costs;
      for (auto& s : out_) {
        double sum = 0.0;
        std::size_t k = 0;
        for (std::size_t i = 0; i < n_; ++i) {
          const double r = random[i];
          const double c = s.costs[i];
          if (std::isnan(r) || std::isnan(c) || c <= 0.0) continue;
          sum += r / c;
          ++k;
        }
        s.speedup_tasks = k;
        s.mean_speedup = k ? sum / double(k) : 0.0;
      }
    }
    return std::move(out_);
  }

 private:
  static constexpr double nan = std::numeric_limits<double>::quiet_NaN();

  std::span<const std::string> planners_;
  const meter_choice& meter_;
  const planning_model& pm_;
  std::uint64_t seed_;
  judging how_;
  std::size_t n_;
  bool with_bound_;
  std::vector<planner_summary> out_;
  std::size_t added_ = 0;             // the index of the task add() is given next
  std::vector<embplan::plan> plans_;  // of the task being added
  std::vector<std::size_t> planned_;  // planner of each entry of plans_
};

// NaN as JSON null.
nlohmann::json number_or_null(double x) {
  return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x);
}

// "0.962 [0.951, 0.973]": the geometric mean of the ratios and its interval.
std::string ratio_text(const embplan::meter::ratio_interval& r) {
  if (r.tasks == 0) return "-";
  if (std::isnan(r.low)) return fixed(r.ratio, 3);
  return fixed(r.ratio, 3) + " [" + fixed(r.low, 3) + ", " + fixed(r.high, 3) + "]";
}

nlohmann::json to_json(const planner_summary& s, bool optimum, const std::string& baseline) {
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
  j["mean_gap_to_lower_bound"] =
      s.succeeded && s.has_gap ? nlohmann::json(s.mean_gap) : nlohmann::json(nullptr);
  // Each task's cost of the planner's plan (null: it failed), so that runs on
  // two meters of the same tasks and seed can be set side by side.
  nlohmann::json costs = nlohmann::json::array();
  for (const double c : s.costs)
    costs.push_back(number_or_null(c));
  j["per_task_cost_ms"] = std::move(costs);
  if (!s.ratios.empty()) {
    nlohmann::json per_task = nlohmann::json::array();
    for (const double r : s.ratios)
      per_task.push_back(std::isfinite(r) ? nlohmann::json(r) : nlohmann::json(nullptr));
    j["ratio_to_baseline"] = {
        {"baseline", baseline},
        {"method",
         "geometric mean of the per-task ratios cost / baseline cost, with a t-interval on "
         "their logs"},
        {"geometric_mean", number_or_null(s.to_baseline.ratio)},
        {"ci95", {number_or_null(s.to_baseline.low), number_or_null(s.to_baseline.high)}},
        {"tasks", s.to_baseline.tasks},
        {"per_task", per_task}};
  }
  if (optimum) {
    j["mean_gap_to_optimum"] =
        s.optimum_tasks ? nlohmann::json(s.mean_gap_opt) : nlohmann::json(nullptr);
    j["optimum_tasks"] = s.optimum_tasks;
    j["optimum_found"] = s.optimum_found;
  }
  j["cache_hit_rate"] =
      s.has_cache() ? nlohmann::json(s.cache_hit_rate()) : nlohmann::json(nullptr);
  j["cache_lookups"] = s.cache_lookups;
  j["failed_with_oversized_table"] = s.no_device;
  if (!s.made_by.empty()) j["made_by"] = s.made_by;
  return j;
}

struct compare_args {
  std::string protocol = "neuroshard";
  std::vector<std::size_t> devices{4, 8};
  std::vector<std::int32_t> max_dims{4, 8, 16, 32, 64, 128};
  std::vector<std::size_t> tables{};  // tables per task; empty: the protocol's
  std::size_t count = 100;
  std::uint64_t seed = 0;
  double memory_gib = 4.0;
  std::string pool;
  std::vector<std::string> planners;
  std::string json;
  std::string model;             // empty: the bundled learned model
  std::string policy;            // empty: the bundled DreamShard policy
  std::string autoshard_policy;  // empty: the bundled AutoShard policy
  meter_args meter;
  std::string half = "auto";  // auto | default | whole | train | test
  std::uint64_t split_seed = 0;
  std::optional<double> unseen_share{};  // AutoShard §5.5
  bool optimum = false;                  // also each task's optimum table-wise plan (exact search)
  std::string baseline;                  // the ratios' denominator; empty: default_baseline
  std::size_t rounds = 1;                // interleaved measurements per plan (--meter measured)
  std::string data_parallel = "none";    // auto: every planner replicates small tables first
  std::string rows_by_cost = "none";     // auto: every planner cuts tables by rows where cheaper
  std::string tiers = "none";            // torchrec: tables to the tiers of TorchRec's kernels
  std::string task_file;                 // the user's tasks instead of generated ones
  std::vector<std::string>
      generator_flags{};  // the task generator's flags given (refused with --task)
  bool quiet = false;
  std::shared_ptr<const program_meter> own{};  // the program's own meter, if any
};

// Where compare's tasks draw their tables from. --half auto: the half of the
// pool the planning model did not train on (its file records which, with the
// split's seed), so the learned model is judged on tables it never saw; the
// whole pool where no learned model is used or its file does not say.
struct task_source {
  std::string half;
  std::uint64_t split_seed = 0;
  std::string text;  // what the output says
};

task_source task_source_of(const compare_args& a, const planning_model& pm) {
  // --unseen-share draws from both halves: --half auto or default only (the
  // tasks' options refuse another).
  if (a.unseen_share && (a.half == "auto" || a.half == "default")) {
    return {"default", a.split_seed,
            embplan::data::detail::share_text(*a.unseen_share) +
                " of each task's tables from the test half of the pool (split seed " +
                std::to_string(a.split_seed) +
                "), the rest from its train half, as --unseen-share says (AutoShard §5.5)"};
  }
  if (a.half != "auto") {
    const auto half = pool_half_of(a.half);
    std::string text = "the whole pool, as --half says";
    if (half == embplan::data::pool_half::protocol_default) {
      text = "the part of the pool the protocol draws from, as --half says";
    } else if (half != embplan::data::pool_half::whole) {
      text = "the " + a.half + " half of the pool (split seed " + std::to_string(a.split_seed) +
             "), as --half says";
    }
    return {a.half, a.split_seed, std::move(text)};
  }
  if (!pm.compute) return {"whole", 0, "the whole pool (no learned model plans)"};
  const auto& m = pm.compute->metadata();
  if (m.pool_half.empty() || m.pool_half == "whole") {
    return {"whole", 0,
            "the whole pool: the learned model's file does not record one half of it as "
            "its training tables, so tasks may hold tables it was trained on"};
  }
  const auto other = std::string(embplan::data::to_string(embplan::data::other_half(
      embplan::data::parse_pool_half(m.pool_half, "neural_cost.pool_half"))));
  return {other, m.split_seed,
          "the " + other + " half of the pool (split seed " + std::to_string(m.split_seed) +
              "): tables the learned model, trained on the " + m.pool_half + " half, never saw"};
}

struct setting {
  std::size_t devices;
  std::int32_t max_dim;
  std::size_t tables;  // 0: the protocol's
  embplan::data::task_options options;
  task_args args;  // what the options were made of (for messages)
  // compare --task: the file's tasks, in place of the generator's.
  std::string file{};
  std::vector<embplan::task> tasks{};
};

int run_compare(const compare_args& a) {
  // Every option checked before the first line of output.
  std::vector<std::string> names;
  for (const auto& n : a.planners.empty() ? planner_names() : a.planners)
    names.push_back(parse_planner(n, "--planners"));
  check_meter(a.meter, /*dreamshard=*/true);
  check_output_path("--json", a.json);
  check_none_or_auto("--data-parallel", a.data_parallel);
  check_none_or_auto("--rows-by-cost", a.rows_by_cost);
  if (a.tiers != "none" && a.tiers != "torchrec") {
    embplan::detail::fail("--tiers", a.tiers, "none or torchrec");
  }
  for (const auto d : a.devices)
    check_devices(d);
  for (const auto m : a.max_dims)
    check_max_dim(m);
  if (a.half != "auto") (void)pool_half_of(a.half, /*takes_auto=*/true);
  auto pm = load_planning_model(a.model, a.own ? a.own->bundled_model : std::string());
  const bool dreamshard = std::any_of(names.begin(), names.end(), is_dreamshard);
  // A policy no planner or meter of the run reads is refused, not ignored.
  if (!a.policy.empty() && !dreamshard && a.meter.name != "dreamshard") {
    embplan::detail::fail("--policy", a.policy,
                          "only with a dreamshard planner in --planners or --meter dreamshard "
                          "(none of the planners run reads a DreamShard policy)");
  }
  if (dreamshard || a.meter.name == "dreamshard") {
    load_policy(pm, a.policy, a.own ? a.own->bundled_policy : std::string());
  }
  const bool autoshard = std::any_of(names.begin(), names.end(), is_autoshard);
  if (!a.autoshard_policy.empty() && !autoshard) {
    embplan::detail::fail("--autoshard-policy", a.autoshard_policy,
                          "only with an autoshard planner in --planners (none of the planners "
                          "run reads an AutoShard policy)");
  }
  if (autoshard) load_autoshard_policy(pm, a.autoshard_policy);
  if (!a.task_file.empty() && !a.generator_flags.empty()) {
    embplan::detail::fail(
        a.generator_flags.front(), "given",
        "no task-generator option with --task (the tasks come from " + a.task_file + ")");
  }
  auto source = task_source_of(a, pm);
  std::vector<setting> settings;
  const std::vector<std::size_t> table_counts =
      a.tables.empty() || !a.task_file.empty() ? std::vector<std::size_t>{0} : a.tables;
  if (!a.task_file.empty()) {
    // The user's tasks, one setting: read whole and checked before any work.
    setting st{};
    st.file = a.task_file;
    st.tasks = embplan::io::read_tasks_file(a.task_file);
    for (std::size_t i = 0; i < st.tasks.size(); ++i) {
      check_dim_multiple(st.tasks[i].tables, "task.tables");
      st.devices = std::max(st.devices, st.tasks[i].cluster.size());
      for (const auto& tb : st.tasks[i].tables)
        st.max_dim = std::max(st.max_dim, tb.dim);
      st.tables = std::max(st.tables, st.tasks[i].tables.size());
    }
    source.text = "the task file " + a.task_file;
    settings.push_back(std::move(st));
  }
  for (const std::size_t devices : a.task_file.empty() ? a.devices : std::vector<std::size_t>{}) {
    for (const std::int32_t max_dim : a.max_dims) {
      for (const std::size_t tables : table_counts) {
        const task_args ta{.protocol = a.protocol,
                           .devices = devices,
                           .max_dim = max_dim,
                           .count = a.count,
                           .tables = tables,
                           .seed = a.seed,
                           .memory_gib = a.memory_gib,
                           .half = source.half,
                           .split_seed = source.split_seed,
                           .unseen_share = a.unseen_share};
        settings.push_back({devices, max_dim, tables, task_options_of(ta), ta});
      }
    }
  }
  if (!a.baseline.empty()) {
    const auto b = parse_planner(a.baseline, "--baseline");
    if (std::find(names.begin(), names.end(), b) == names.end())
      embplan::detail::fail("--baseline", a.baseline, "one of the planners run (--planners)");
  }
  const bool own_meter = a.own && a.meter.name == a.own->name;
  if (a.rounds > 1 && a.meter.name != "measured" && !(own_meter && a.own->measures))
    embplan::detail::fail("--rounds", a.rounds,
                          "1 unless --meter measured" +
                              std::string(a.own && a.own->measures ? " or " + a.own->name : "") +
                              " (the other meters are deterministic)");
  if (a.optimum) {
    // The exact search prices up to millions of plans: a simulated meter
    // only, and small tasks (checked before any work).
    if (a.meter.name != "simulated" && a.meter.name != "analytic")
      embplan::detail::fail("--meter", a.meter.name,
                            "simulated or analytic with --optimum (the exact search prices up "
                            "to millions of plans with the meter)");
    const std::uint32_t limit = embplan::exact_table_wise{}.max_tables;
    for (const auto& st : settings) {
      const std::size_t most =
          st.file.empty() ? embplan::data::resolve_protocol(st.options).max_tables : st.tables;
      if (most > limit)
        embplan::detail::fail("--tables", most,
                              "at most " + std::to_string(limit) +
                                  " tables per task with --optimum (the exact search is "
                                  "exponential in them): e.g. --tables 10");
    }
  }
  const auto pool = load_pool(a.pool);
  check_dim_multiple(pool, "pool.tables");
  const auto meter = meter_of(a.meter, pm, a.own.get());
  const std::string& meter_text = meter.text;

  nlohmann::json report;
  report["protocol"] = a.protocol;
  report["seed"] = a.seed;
  report["count"] = a.count;
  report["meter"] = a.meter.name + ", " + meter_text;
  report["planning_model"] = pm.text;
  if (dreamshard) report["policy"] = pm.policy_text;
  if (autoshard) report["autoshard_policy"] = pm.autoshard_text;
  report["settings"] = nlohmann::json::array();
  report["tasks_from"] = {{"half", source.half}, {"split_seed", source.split_seed}};
  if (a.unseen_share) report["tasks_from"]["unseen_share"] = *a.unseen_share;
  std::cout << "meter: " << a.meter.name << ", " << meter_text << "\nplanning model: " << pm.text
            << "\ntasks from: " << source.text << "\n";
  if (dreamshard) std::cout << "dreamshard policy: " << pm.policy_text << '\n';
  if (autoshard) std::cout << "autoshard policy: " << pm.autoshard_text << '\n';
  if (a.data_parallel == "auto") {
    std::cout << "data-parallel: auto (every planner first replicates the tables cheaper as "
                 "data-parallel copies)\n";
  }
  report["data_parallel"] = a.data_parallel;
  if (a.rows_by_cost == "auto") {
    std::cout << "rows by cost: auto (every planner also cuts by rows the tables that fit where "
                 "its estimate finds it cheaper)\n";
  }
  report["rows_by_cost"] = a.rows_by_cost;
  if (a.tiers == "torchrec") {
    print_wrapped(std::cout,
                  "tiers: torchrec (each task's tables first moved to the tiers of the compute "
                  "kernels TorchRec's default sharder picks: fused_uvm_caching to uvm_caching, "
                  "fused_uvm to host; every planner plans the moved task)");
  }
  report["tiers"] = a.tiers;
  print_wrapped(std::cout,
                "cost = max over devices of fwd+bwd compute + fwd+bwd comm (ms), the mean over "
                "the tasks; \"(n/N)\": the planner found a plan for n of the N tasks only (the "
                "others did not fit memory) and the mean is over those n; \"-\": for none");
  std::cout.flush();
  progress bar("compare", "plans", settings.size() * (names.size() + (a.optimum ? 1 : 0)) * a.count,
               !a.quiet);
  // NeuroShard Table 1 shape: one row per planner, one column per setting.
  std::vector<std::string> summary_header{"planner"};
  std::vector<std::vector<std::string>> summary(names.size());
  for (std::size_t p = 0; p < names.size(); ++p)
    summary[p].push_back(names[p]);
  std::size_t no_device = 0;
  // The planner the ratios are to: --baseline, else default_baseline if it runs.
  const std::string baseline = a.baseline.empty() ? std::string(default_baseline) : a.baseline;
  judging how{.optimum = a.optimum,
              .rounds = a.rounds,
              .stages = {.data_parallel = {.enabled = a.data_parallel == "auto"},
                         .rows_by_cost = a.rows_by_cost == "auto"}};
  for (std::size_t p = 0; p < names.size(); ++p)
    if (names[p] == baseline) how.baseline = p;
  for (const auto& st : settings) {
    std::size_t task_count = st.tasks.size();
    std::vector<planner_summary> rows;
    if (!st.file.empty()) {
      planner_comparison comparison(std::span<const std::string>(names), meter, pm, a.seed, how,
                                    task_count);
      for (auto t : st.tasks) {
        if (a.tiers == "torchrec") embplan::torchrec::choose_kernel_tiers(t);
        comparison.add(t, bar);
      }
      rows = std::move(comparison).finish();
    } else {
      // One task at a time: --count 1000000 holds one task, not a million.
      auto tasks = task_generator_of(pool, st.options, st.args);
      task_count = tasks.count();
      planner_comparison comparison(std::span<const std::string>(names), meter, pm, a.seed, how,
                                    task_count);
      while (tasks.remaining() > 0) {
        auto t = next_task_of(tasks, st.args);
        if (a.tiers == "torchrec") embplan::torchrec::choose_kernel_tiers(t);
        comparison.add(t, bar);
      }
      rows = std::move(comparison).finish();
    }
    bar.clear();
    if (!st.file.empty()) {
      std::cout << "\n"
                << st.file << ": " << task_count << " task" << (task_count == 1 ? "" : "s")
                << ", up to " << st.tables << " tables on up to " << st.devices
                << " devices, max dim " << st.max_dim << " (seed " << a.seed << ")";
    } else {
      std::cout << "\n"
                << a.protocol << ": " << st.devices << " devices, max dim " << st.max_dim << ", ";
      if (st.tables > 0) std::cout << st.tables << " tables per task, ";
      std::cout << task_count << " tasks (seed " << a.seed << ")";
    }
    if (a.unseen_share) {
      std::cout << ", " << embplan::data::detail::share_text(*a.unseen_share)
                << " of each task's tables unseen";
    }
    std::cout << '\n';
    std::vector<std::string> header{"planner",      "cost ms",   "success",   "speedup/random",
                                    "time ms/task", "cache hit", "gap to LB", "balance"};
    if (a.optimum) {
      header.push_back("gap to opt");
      header.push_back("at opt");
    }
    if (how.baseline < names.size()) header.push_back("vs " + baseline + " (95% CI)");
    text_table table(header);
    nlohmann::json setting_json;
    if (!st.file.empty()) setting_json["task_file"] = st.file;
    setting_json["devices"] = st.devices;
    setting_json["max_dim"] = st.max_dim;
    if (st.tables > 0) setting_json["tables"] = st.tables;
    setting_json["tasks"] = task_count;
    setting_json["planners"] = nlohmann::json::array();
    summary_header.push_back(std::to_string(st.devices) + "dev/" + std::to_string(st.max_dim) +
                             (st.tables > 0 ? "/T" + std::to_string(st.tables) : ""));
    for (std::size_t p = 0; p < rows.size(); ++p) {
      const auto& r = rows[p];
      const std::string cost = r.cost_text();
      std::vector<std::string> row{
          r.planner,
          cost,
          fixed(100.0 * r.success_rate(), 1) + "%",
          r.speedup_tasks ? fixed(r.mean_speedup, 3) + "x" : "-",
          fixed(r.mean_sharding_ms, 3),
          r.has_cache() ? fixed(100.0 * r.cache_hit_rate(), 1) + "%" : "-",
          r.succeeded && r.has_gap ? fixed(100.0 * r.mean_gap, 1) + "%" : "-",
          r.succeeded ? fixed(r.mean_balance, 3) : "-"};
      if (a.optimum) {
        row.push_back(r.optimum_tasks ? fixed(100.0 * r.mean_gap_opt, 2) + "%" : "-");
        row.push_back(std::to_string(r.optimum_found) + "/" + std::to_string(r.optimum_tasks));
      }
      if (how.baseline < names.size()) row.push_back(ratio_text(r.to_baseline));
      table.add(std::move(row));
      summary[p].push_back(cost);
      // Per task figures: built only for --json to write them.
      if (!a.json.empty()) setting_json["planners"].push_back(to_json(r, a.optimum, baseline));
      if (!std::string_view(r.planner).starts_with("rowwise_")) no_device += r.no_device;
    }
    table.print(std::cout);
    for (const auto& r : rows) {
      if (r.made_by.empty()) continue;
      std::string by;
      for (const auto& [member, count] : r.made_by)
        by += (by.empty() ? "" : ", ") + member + ": " + std::to_string(count);
      std::cout << r.planner << "'s plans by member: " << by << '\n';
    }
    std::cout.flush();
    report["settings"].push_back(std::move(setting_json));
  }
  bar.clear();
  if (summary_header.size() > 2) {
    std::cout << "\nmean cost (ms) per setting, devices/max dim"
              << (a.tables.empty() ? "" : "/tables") << " (NeuroShard Table 1 shape):\n";
    text_table table(summary_header);
    for (auto& row : summary)
      table.add(std::move(row));
    table.print(std::cout);
  }
  std::cout << '\n';
  print_wrapped(
      std::cout,
      "speedup/random = mean of cost(random)/cost(planner) over tasks both solved; "
      "time = search wall time per task; cache hit = cost-cache hits / lookups "
      "(NeuroShard §3.3: device sets, or single pieces where the model folds "
      "per-piece terms); gap to LB = cost / additive lower bound - 1, the bound being "
      "the larger of the costliest table and the sum of all tables' costs / devices, "
      "each table priced alone by the same meter (a true bound for table-wise plans "
      "on an additive meter; column splits, and meters that price a device unlike "
      "the sum of its tables alone, e.g. the learned one, can go below it: a negative "
      "gap; none under --meter dreamshard, which prices a plan by its overall "
      "head); balance = min/max device compute (AutoShard)" +
          std::string(a.optimum ? "; gap to opt = cost / the task's optimum table-wise plan "
                                  "under the meter - 1 (exact search, search/exact.hpp; a "
                                  "plan with column splits can go below it), at opt = tasks "
                                  "whose plan costs no more than the optimum / tasks with one"
                                : "") +
          std::string(how.baseline < names.size()
                          ? "; vs " + baseline + " = the geometric mean over tasks of cost / " +
                                baseline +
                                "'s cost of the same task, with its 95% t-interval on the log "
                                "ratios (tasks both solved; below 1: cheaper)"
                          : "") +
          std::string(a.rounds > 1 ? "; each plan measured " + std::to_string(a.rounds) +
                                         " times, interleaved with the task's other plans (A B "
                                         "C A B C ...), its cost the mean"
                                   : ""));
  if (no_device > 0) {
    print_wrapped(std::cout, "note: " + std::to_string(no_device) +
                                 " plans failed on a task with a table larger than any device; " +
                                 rowwise_hint("torchrec_like") +
                                 ": --planners rowwise_torchrec_like");
  }
  if (!a.json.empty()) {
    embplan::io::write_json_file(a.json, report);
    std::cout << "wrote " << a.json << '\n';
  }
  return 0;
}

}  // namespace

command add_compare(CLI::App& app, std::shared_ptr<const program_meter> own) {
  auto a = std::make_shared<compare_args>();
  if (own) {
    a->meter.own = own->name;
    a->meter.own_help = own->help;
    a->meter.name = own->name;
    a->own = std::move(own);
  }
  auto* sub = app.add_subcommand("compare",
                                 "Run every planner on the same tasks (NeuroShard Table 1 shape)");
  sub->add_option("--protocol", a->protocol, "neuroshard | dreamshard | autoshard")
      ->capture_default_str();
  add_int_option(sub, "--devices", a->devices, "device counts, one table each", 1, max_devices)
      ->capture_default_str();
  add_int_option(sub, "--max-dim", a->max_dims, "largest table dimensions, one table each", 4, 1024)
      ->capture_default_str();
  add_int_option(sub, "--tables", a->tables,
                 "tables per task, one setting each (default: the protocol's; dreamshard: DLRM-T "
                 "with T = --tables)",
                 1, max_tables);
  add_int_option(sub, "--count", a->count, "tasks per setting", 1, max_task_count)
      ->capture_default_str();
  add_seed_option(sub, a->seed);
  add_memory_option(sub, a->memory_gib);
  add_pool_option(sub, a->pool);
  add_half_options(sub, a->half, a->split_seed);
  add_unseen_share_option(sub, a->unseen_share);
  sub->add_option("--planners", a->planners, "planners to run (default: all): " + planner_list())
      ->delimiter(',');
  sub->add_option("--json", a->json, "also write the results as JSON");
  add_meter_options(sub, a->meter, /*dreamshard=*/true);
  add_model_option(sub, a->model, a->own ? "the bundled " + a->own->bundled_model : std::string());
  add_policy_option(sub, a->policy, a->own ? a->own->bundled_policy : std::string());
  add_autoshard_policy_option(sub, a->autoshard_policy);
  sub->add_flag("--optimum", a->optimum,
                "also find each task's optimum table-wise plan under the meter (exact search; "
                "tasks of at most 16 tables, --meter simulated or analytic) and report each "
                "planner's gap to it");
  sub->add_option("--baseline", a->baseline,
                  "the planner each planner's per-task cost ratios are to (default: " +
                      std::string(default_baseline) + ", where it runs)");
  add_int_option(sub, "--rounds", a->rounds,
                 "--meter measured" +
                     std::string(a->own && a->own->measures ? " or " + a->own->name : "") +
                     ": measurements per plan, interleaved with the task's other plans",
                 1, 1000)
      ->capture_default_str();
  sub->add_option("--data-parallel", a->data_parallel,
                  "none (default); auto: every planner first replicates the tables cheaper as "
                  "data-parallel copies (as plan --data-parallel auto)")
      ->capture_default_str();
  sub->add_option("--rows-by-cost", a->rows_by_cost,
                  "none (default); auto: every planner also cuts by rows the tables that fit "
                  "where cheaper (as plan --rows-by-cost auto)")
      ->capture_default_str();
  sub->add_option("--tiers", a->tiers,
                  "none (default): every table in the tier its task gives; torchrec: first move "
                  "each task's tables to the tiers of the compute kernels TorchRec's default "
                  "sharder picks (fused_uvm_caching: uvm_caching, fused_uvm: host)")
      ->capture_default_str();
  sub->add_option("--task", a->task_file,
                  "compare on the tasks of this file (one task or {\"tasks\": [...]}, e.g. "
                  "your own) instead of generated ones; no generator option with it");
  add_quiet_option(sub, a->quiet);
  return {sub, [a, sub] {
            for (const char* flag :
                 {"--protocol", "--devices", "--max-dim", "--tables", "--count", "--memory-gib",
                  "--pool", "--half", "--split-seed", "--unseen-share"}) {
              if (sub->count(flag) > 0) a->generator_flags.emplace_back(flag);
            }
            return run_compare(*a);
          }};
}

}  // namespace embplan_cli
