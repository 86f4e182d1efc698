#pragma once
// The cost models `embplan plan` and `compare` plan on and judge by.
//
// --model PATH | none: the learned compute-cost model (a neural_cost file,
// `embplan train compute`) that NeuroShard's planners (neuroshard,
// neuroshard_ls) search on — NeuroShard's "pre-train, then search" (§3).
// Without --model the CLI takes the bundled one, data/cost/cpu_compute_model
// .safetensors, trained on CPU-meter measurements of the train half of the
// synthetic pool (README "Cost data"); `none` plans on the analytic model.
//
// --meter, the model every plan is priced by (the same for every planner):
//   simulated  the learned model when there is one (its compute + the analytic
//              all-to-all, as the measured meter does), else the analytic model;
//   analytic   the analytic model (bandwidth roofline + all-to-all);
//   measured   the CPU meter (each device's shard run and timed).
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "embplan/core/error.hpp"
#include "embplan/cost/neural.hpp"

namespace embplan_cli {

#ifdef EMBPLAN_BUNDLED_COMPUTE_MODEL
inline constexpr const char* bundled_compute_model = EMBPLAN_BUNDLED_COMPUTE_MODEL;
#else
inline constexpr const char* bundled_compute_model = "";
#endif

struct planning_model {
  std::optional<embplan::neural_cost> compute;  // empty: the analytic model
  std::string text;                             // what the output calls it
};

// `arg`: a path, "none", or empty for the bundled model. A missing bundled file
// (a CLI installed without its data) falls back to the analytic model and says
// so; a missing file the user named is an error.
inline planning_model load_planning_model(const std::string& arg) {
  if (arg == "none") return {std::nullopt, "none: neuroshard plans on the analytic model"};
  const bool bundled = arg.empty();
  const std::filesystem::path path = bundled ? bundled_compute_model : arg;
  if (bundled && (path.empty() || !std::filesystem::exists(path))) {
    return {std::nullopt, "the bundled model is not at '" + path.string() +
                              "': neuroshard plans on the analytic model"};
  }
  if (!std::filesystem::exists(path)) {
    embplan::detail::fail("--model", arg, "a neural_cost file (embplan train compute) or none");
  }
  auto model = embplan::neural_cost::load(path);
  const auto& m = model.metadata();
  std::string text = (bundled ? "bundled " : "") + path.filename().string() + " (" +
                     std::string(embplan::cost::to_string(m.features)) + " features, " + m.meter +
                     " meter at batch " + std::to_string(m.batch_size) +
                     ", trained on: " + m.trained_on + ")";
  return {std::move(model), std::move(text)};
}

inline void check_meter(const std::string& meter) {
  if (meter != "simulated" && meter != "analytic" && meter != "measured") {
    embplan::detail::fail("--meter", meter, "simulated, analytic or measured");
  }
}

}  // namespace embplan_cli
