// The cases of the planners that search on any cost model (neuroshard,
// neuroshard_plus, neuroshard_ls) on every model, with and without
// column_beam's worker threads: a unit of their own (their planners are most
// of test_tsan's compile time), compiled beside concurrent_presets_test.cpp.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/cost/analytic.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/presets.hpp"
#include "tsan/preset_cases.hpp"

namespace embplan_tsan_test {

namespace {

// The planners that search on any cost model, on `model`: as run_preset builds
// them (checked against it) and, with `beam_workers`, also with column_beam's
// worker threads.
template <template <class> class Basic, class Model>
void add_on_model(std::vector<preset_case>& out, std::string_view name, const Model& model,
                  const std::string& tag, bool beam_workers) {
  using planner_type = Basic<Model>;
  const planner_type p(model, {}, {}, {});
  add_with_rowwise(out, name, p, {.tag = tag, .registry = registry_with(model)});
  if (!beam_workers) return;
  auto searcher = p.searcher();
  if constexpr (requires { searcher.threads; }) {
    searcher.threads = beam_threads;
  } else {
    searcher.start.threads = beam_threads;  // local_search<column_beam>
  }
  add_with_rowwise(out, name, planner_type(model, searcher, {}, {}),
                   {.tag = tag + " threads=" + std::to_string(beam_threads),
                    .exact_counts = false,
                    .same_plan_as = tag});
}

template <class Model>
using neuroshard_on = embplan::basic_neuroshard_planner<Model>;
template <class Model>
using neuroshard_plus_on = embplan::basic_neuroshard_plus_planner<Model>;
template <class Model>
using neuroshard_ls_on = embplan::basic_neuroshard_ls_planner<Model>;

}  // namespace

void add_model_presets(std::vector<preset_case>& out, std::string_view name,
                       const bundled_models& m) {
  const auto add = [&](const auto& model, const std::string& tag, bool beam_workers) {
    if (name == "neuroshard") {
      add_on_model<neuroshard_on>(out, name, model, tag, beam_workers);
    } else if (name == "neuroshard_plus") {
      add_on_model<neuroshard_plus_on>(out, name, model, tag, beam_workers);
    } else {
      add_on_model<neuroshard_ls_on>(out, name, model, tag, beam_workers);
    }
  };
  // Worker threads on the analytic model and on the learned one with
  // learned communication (shared packed networks, cost/neural_comm.hpp).
  add(embplan::analytic_cost{}, "", true);
  add(m.cpu_compute, " [cpu_compute_model]", false);
  add(m.cpu_compute_comm, " [cpu_compute_model + cpu_comm_4dev_model]", true);
  add(m.gpu_compute, " [gpu_compute_model]", false);
}

}  // namespace embplan_tsan_test
