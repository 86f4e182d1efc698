// Every preset the library ships (run_preset's names, each also as rowwise_),
// one planner instance each, planned from four threads at once on the same
// instances; every concurrent result must be bit-for-bit the single-threaded
// one. The promise tested (planner.hpp, docs/design.md "Threads and determinism"): a planner is
// const-callable with no mutable state, so one instance serves several
// threads, and the seed is the only source of chance. Built as test_tsan: the
// tsan CMake preset runs it under ThreadSanitizer (.ci/tsan); in the other
// builds it is a determinism test. The cases of the planners that search on
// any cost model are built in model_presets_test.cpp, a unit of their own
// (tsan/preset_cases.hpp says what the two share).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"
#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/stage/settings.hpp"
#include "embplan/stage/staged.hpp"
#include "tsan/preset_cases.hpp"

namespace {

using namespace embplan_tsan_test;

bundled_models load_bundled() {
  const std::string dir = std::string(EMBPLAN_SOURCE_DIR) + "/data/cost/";
  auto cpu = embplan::neural_cost::load(dir + "cpu_compute_model.safetensors");
  auto comm = embplan::neural_comm::load(dir + "cpu_comm_4dev_model.safetensors");
  auto with_comm = cpu.with_communication(std::move(comm));
  return {std::move(cpu), std::move(with_comm),
          embplan::neural_cost::load(dir + "gpu_compute_model.safetensors"),
          embplan::rl::dreamshard_policy::load(std::string(EMBPLAN_SOURCE_DIR) +
                                               "/data/rl/dreamshard_cpu_4dev.safetensors"),
          embplan::rl::autoshard_policy::load(std::string(EMBPLAN_SOURCE_DIR) +
                                              "/data/rl/autoshard_cpu_8dev.safetensors")};
}

// One case per preset name (and its rowwise_ form) per variant. The names are
// spelled here on purpose: each builds its own typed planner and variants,
// which the registry's entries do not expose, and a name of preset_names()
// this function does not know fails the test, so that a preset added to the
// registry (run_preset.hpp) must be added here too to be covered.
std::vector<preset_case> shared_presets(const bundled_models& m) {
  std::vector<preset_case> out;
  const variant checked{.registry = registry_with(embplan::analytic_cost{})};
  for (const std::string_view name : embplan::preset_names()) {
    if (name == "random") {
      add_with_rowwise(out, name, embplan::random_planner{}, checked);
    } else if (name == "size_greedy") {
      add_with_rowwise(out, name, embplan::size_greedy_planner{}, checked);
    } else if (name == "dim_greedy") {
      add_with_rowwise(out, name, embplan::dim_greedy_planner{}, checked);
    } else if (name == "lookup_greedy") {
      add_with_rowwise(out, name, embplan::lookup_greedy_planner{}, checked);
    } else if (name == "size_lookup_greedy") {
      add_with_rowwise(out, name, embplan::size_lookup_greedy_planner{}, checked);
    } else if (name == "random_search") {
      add_with_rowwise(out, name, embplan::random_search_planner{}, checked);
    } else if (name == "torchrec") {
      add_with_rowwise(out, name, embplan::torchrec_planner{}, checked);
    } else if (name == "torchrec_like") {
      add_with_rowwise(out, name, embplan::torchrec_like_planner{}, checked);
    } else if (name == "portfolio") {
      add_with_rowwise(out, name, embplan::portfolio_planner{}, checked);
    } else if (name == "neuroshard" || name == "neuroshard_plus" || name == "neuroshard_ls") {
      add_model_presets(out, name, m);
    } else if (name == "dreamshard") {
      // run_preset plans it with the policy given in preset_models.
      const variant with_policy{.registry = [policy = m.dreamshard](std::string_view preset,
                                                                    const embplan::task& t,
                                                                    std::uint64_t seed) {
        return embplan::run_preset(preset, t, seed, embplan::analytic_cost{},
                                   {.dreamshard = embplan::rl::dreamshard_preset(policy)});
      }};
      add_with_rowwise(out, name, embplan::rl::make_dreamshard_planner(m.dreamshard), with_policy);
      // Best of 4 sampled episodes: seeded draws from the policy's softmax.
      add_with_rowwise(out, name,
                       embplan::rl::make_dreamshard_planner(m.dreamshard, {.samples = 4}),
                       {.tag = " samples=4"});
    } else if (name == "autoshard") {
      const variant with_policy{.registry = [policy = m.autoshard](std::string_view preset,
                                                                   const embplan::task& t,
                                                                   std::uint64_t seed) {
        return embplan::run_preset(preset, t, seed, embplan::analytic_cost{},
                                   {.autoshard = embplan::rl::autoshard_preset(policy)});
      }};
      add_with_rowwise(out, name, embplan::rl::make_autoshard_planner(m.autoshard), with_policy);
      add_with_rowwise(out, name, embplan::rl::make_autoshard_planner(m.autoshard, {.samples = 4}),
                       {.tag = " samples=4"});
    } else {
      FAIL("preset_names() lists '" << std::string(name)
                                    << "', which test/tsan/concurrent_presets_test.cpp does not "
                                       "build: add it to shared_presets()");
    }
  }
  return out;
}

// Small tasks of each protocol (data/tasks.hpp), 4 devices (the learned comm
// model's count), plus one whose largest table fits no device, so that the
// rowwise_ forms split rows and the others fail (failures are results too).
std::vector<embplan::task> small_tasks() {
  using embplan::data::protocol;
  const auto pool = embplan::data::synthetic_pool({.tables = 200, .seed = 3});
  std::vector<embplan::task> out;
  for (const auto proto : {protocol::neuroshard, protocol::dreamshard, protocol::autoshard}) {
    auto tasks = embplan::data::generate_tasks(pool, {.proto = proto,
                                                      .devices = 4,
                                                      .max_dim = 32,
                                                      .count = 1,
                                                      .seed = 5,
                                                      .min_tables = 6,
                                                      .max_tables = 10});
    for (auto& t : tasks)
      out.push_back(std::move(t));
  }
  // The first task with device memory just over the sum of its other tables
  // and its first table made half as large again as a device.
  embplan::task big = out.front();
  big.name += "+oversized";
  std::uint64_t others = 0;
  for (std::size_t i = 1; i < big.tables.size(); ++i)
    others += embplan::shard_bytes(big, embplan::whole_table(big, i, 0));
  const std::uint64_t memory = std::max<std::uint64_t>(others, std::uint64_t{64} << 20);
  for (auto& d : big.cluster.devices)
    d.memory_bytes = memory;
  const std::uint64_t row_bytes = embplan::shard_bytes(big, embplan::whole_table(big, 0, 0)) /
                                  static_cast<std::uint64_t>(big.tables[0].rows);
  big.tables[0].rows = static_cast<std::int64_t>(memory / 2 * 3 / row_bytes);
  out.push_back(std::move(big));
  return out;
}

bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

bool same_bits(const embplan::plan_cost& a, const embplan::plan_cost& b) {
  if (a.devices.size() != b.devices.size()) return false;
  for (std::size_t d = 0; d < a.devices.size(); ++d) {
    const auto& x = a.devices[d];
    const auto& y = b.devices[d];
    if (!same_bits(x.fwd_compute_ms, y.fwd_compute_ms) ||
        !same_bits(x.bwd_compute_ms, y.bwd_compute_ms) ||
        !same_bits(x.fwd_comm_ms, y.fwd_comm_ms) || !same_bits(x.bwd_comm_ms, y.bwd_comm_ms))
      return false;
  }
  return a.memory_bytes == b.memory_bytes && a.dim_sum == b.dim_sum;
}

// The first field in which `got` differs from `want` (empty: none). The wall
// time (sharding_ms) is not compared; the cache counts only when `counts`.
std::string difference(const embplan::plan_result& want, const embplan::plan_result& got,
                       bool counts) {
  if (got.ok != want.ok) return "ok";
  if (got.failure != want.failure)
    return "failure ('" + got.failure + "' vs '" + want.failure + "')";
  if (got.placement != want.placement) return "placement";
  if (!same_bits(got.cost_ms, want.cost_ms)) return "cost_ms";
  if (!same_bits(got.search_cost, want.search_cost)) return "search_cost";
  if (!same_bits(got.reward, want.reward)) return "reward";
  if (got.meter != want.meter || got.search_model != want.search_model ||
      got.search_unit != want.search_unit)
    return "meter / search model";
  if (counts && (got.evaluations != want.evaluations || got.cache_lookups != want.cache_lookups ||
                 got.cache_hits != want.cache_hits))
    return "evaluations / cache counts";
  return {};
}

struct job {
  std::size_t preset = 0;
  std::size_t task = 0;
  std::size_t seed_index = 0;
  std::uint64_t seed = 0;
};

// Thread k's order of the jobs: forward, backward, and two seeded shuffles.
std::vector<std::size_t> order_for(std::size_t k, std::size_t n) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (k == 1) std::reverse(order.begin(), order.end());
  if (k >= 2) {
    embplan::rng gen(100 + k);
    for (std::size_t i = n; i > 1; --i)
      std::swap(order[i - 1], order[static_cast<std::size_t>(gen.below(i))]);
  }
  return order;
}

}  // namespace

TEST_CASE("every preset, shared by four threads, plans as it does on one thread") {
  const auto models = load_bundled();
  const auto presets = shared_presets(models);
  const auto tasks = small_tasks();

  // Every name run_preset accepts is covered, plain and rowwise_.
  std::set<std::string> labels;
  for (const auto& p : presets)
    labels.insert(p.label);
  for (const std::string_view name : embplan::preset_names()) {
    const std::string plain(name);
    const std::string rowwise = std::string(embplan::presets::rowwise_prefix) + plain;
    CHECK_MESSAGE(labels.count(plain) == 1, plain);
    CHECK_MESSAGE(labels.count(rowwise) == 1, rowwise);
  }
  REQUIRE(labels.size() == presets.size());

  std::vector<job> jobs;
  for (std::size_t p = 0; p < presets.size(); ++p)
    for (std::size_t t = 0; t < tasks.size(); ++t)
      for (std::size_t s = 0; s < std::size(seeds); ++s)
        jobs.push_back({.preset = p, .task = t, .seed_index = s, .seed = seeds[s]});
  const auto index_of = [&](std::size_t p, std::size_t t, std::size_t s) {
    return (p * tasks.size() + t) * std::size(seeds) + s;
  };

  // The single-threaded reference, and what it is checked against.
  std::vector<embplan::plan_result> serial;
  serial.reserve(jobs.size());
  for (const auto& j : jobs)
    serial.push_back(presets[j.preset].plan(tasks[j.task], j.seed));
  std::size_t planned = 0;
  std::size_t rowwise_split = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    const auto& p = presets[j.preset];
    CAPTURE(p.label);
    CAPTURE(tasks[j.task].name);
    CAPTURE(j.seed);
    planned += serial[i].ok ? 1 : 0;
    for (const auto& s : serial[i].placement.shards)
      rowwise_split += s.rows() < tasks[j.task].tables[s.table].rows ? 1 : 0;
    if (!p.registry_name.empty()) {
      const auto registry = p.registry(p.registry_name, tasks[j.task], j.seed);
      CHECK_MESSAGE(difference(registry, serial[i], true).empty(),
                    "differs from run_preset(\"" << p.registry_name << "\") in "
                                                 << difference(registry, serial[i], true));
    }
    if (!p.same_plan_as.empty()) {
      const auto it = std::find_if(presets.begin(), presets.end(),
                                   [&](const preset_case& c) { return c.label == p.same_plan_as; });
      REQUIRE(it != presets.end());
      const auto& one_thread =
          serial[index_of(static_cast<std::size_t>(it - presets.begin()), j.task, j.seed_index)];
      CHECK_MESSAGE(
          difference(one_thread, serial[i], false).empty(),
          "differs from " << p.same_plan_as << " in " << difference(one_thread, serial[i], false));
    }
  }
  // The tasks exercise the searches, and the row splits of the rowwise_ forms.
  CHECK(planned > jobs.size() / 2);
  CHECK(rowwise_split > 0);

  // Every thread plans every job on the same instances, each in its own order.
  std::vector<std::vector<std::optional<embplan::plan_result>>> concurrent(
      planning_threads, std::vector<std::optional<embplan::plan_result>>(jobs.size()));
  std::vector<std::exception_ptr> errors(planning_threads);
  {
    std::latch start(static_cast<std::ptrdiff_t>(planning_threads));
    std::vector<std::jthread> threads;
    for (std::size_t k = 0; k < planning_threads; ++k) {
      threads.emplace_back([&, k] {
        start.arrive_and_wait();
        try {
          for (const std::size_t i : order_for(k, jobs.size()))
            concurrent[k][i] = presets[jobs[i].preset].plan(tasks[jobs[i].task], jobs[i].seed);
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    }
  }  // joins

  for (std::size_t k = 0; k < planning_threads; ++k) {
    CAPTURE(k);
    if (errors[k]) {
      try {
        std::rethrow_exception(errors[k]);
      } catch (const std::exception& e) {
        FAIL("thread " << k << " threw: " << e.what());
      }
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const auto& j = jobs[i];
      const auto& p = presets[j.preset];
      REQUIRE(concurrent[k][i].has_value());
      const std::string diff = difference(serial[i], *concurrent[k][i], p.exact_counts);
      CHECK_MESSAGE(diff.empty(), p.label << " on " << tasks[j.task].name << " seed " << j.seed
                                          << " from thread " << k << ": " << diff
                                          << " differs from the single-threaded result");
    }
  }
}
