#pragma once
// What the two units of test_tsan share (concurrent_presets_test.cpp and
// model_presets_test.cpp, compiled side by side): the cases, each a preset
// planner shared by the planning threads, and how they are built.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/planner.hpp"
#include "embplan/presets.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/stage/staged.hpp"

namespace embplan_tsan_test {

constexpr std::size_t planning_threads = 4;
// column_beam's own workers, in the variants that use them (3 per search: with
// the 4 planning threads, 12 threads search at once).
constexpr std::int32_t beam_threads = 3;
constexpr std::uint64_t seeds[] = {0, 11};

using plan_fn = std::function<embplan::plan_result(const embplan::task&, std::uint64_t)>;
using registry_fn =
    std::function<embplan::plan_result(std::string_view, const embplan::task&, std::uint64_t)>;

// One shared planner instance, called through a const reference from every thread.
struct preset_case {
  std::string label;  // the preset name, plus the model / thread variant
  plan_fn plan;
  // The searcher's thread count is 1: with more, which worker prices which
  // state varies, and with it the cache counts (column_beam.hpp); the plan and
  // its costs do not.
  bool exact_counts = true;
  // Set where run_preset(registry_name, t, seed, model) must give the same
  // result: the instance is the planner the registry runs under that name.
  std::string registry_name{};
  registry_fn registry{};
  // Set for a column_beam.threads variant: the label of the single-threaded
  // case whose plan and costs it must reproduce.
  std::string same_plan_as{};
};

// How a preset is built in one variant.
struct variant {
  std::string tag{};  // appended to the preset name: the model, the thread count
  bool exact_counts = true;
  registry_fn registry{};                     // run_preset with this variant's model, if any
  std::optional<std::string> same_plan_as{};  // the tag of the variant whose plan it must give
};

template <class Planner>
plan_fn shared(Planner p) {
  auto instance = std::make_shared<const Planner>(std::move(p));
  return [instance](const embplan::task& t, std::uint64_t seed) { return (*instance)(t, seed); };
}

// `p` as it is, and behind stage::staged with split_rows as run_preset builds
// its rowwise_ form (presets::detail::run).
template <class Planner>
void add_with_rowwise(std::vector<preset_case>& out, std::string_view name, const Planner& p,
                      const variant& v) {
  const embplan::rowwise_planner_of<Planner> rw(
      p.cost(), embplan::stage::behind_stage(p.searcher(), {.split_rows = true}), p.rule(),
      p.scorer());
  const auto add = [&](std::string preset, plan_fn plan) {
    preset_case c{.label = preset + v.tag, .plan = std::move(plan), .exact_counts = v.exact_counts};
    if (v.registry) {
      c.registry_name = preset;
      c.registry = v.registry;
    }
    if (v.same_plan_as) c.same_plan_as = preset + *v.same_plan_as;
    out.push_back(std::move(c));
  };
  add(std::string(name), shared(p));
  add(std::string(embplan::presets::rowwise_prefix) + std::string(name), shared(rw));
}

template <class Model>
registry_fn registry_with(Model model) {
  return [model = std::move(model)](std::string_view name, const embplan::task& t,
                                    std::uint64_t seed) {
    return embplan::run_preset(name, t, seed, model);
  };
}

struct bundled_models {
  embplan::neural_cost cpu_compute;
  embplan::neural_cost cpu_compute_comm;  // with the learned 4-device all-to-all
  embplan::neural_cost gpu_compute;
  embplan::rl::dreamshard_policy dreamshard;  // data/rl/, `embplan train dreamshard`
  embplan::rl::autoshard_policy autoshard;    // data/rl/, `embplan train autoshard`
};

// The cases of `name`, one of the planners that search on any cost model
// (neuroshard, neuroshard_plus, neuroshard_ls), on the analytic model and on
// each bundled learned one (model_presets_test.cpp).
void add_model_presets(std::vector<preset_case>& out, std::string_view name,
                       const bundled_models& m);

}  // namespace embplan_tsan_test
