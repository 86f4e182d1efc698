#pragma once
// The bundled learned compute model (data/cost/cpu_compute_model.safetensors,
// EMBPLAN_BUNDLED_COMPUTE_MODEL from bench/CMakeLists.txt), loaded once per
// benchmark program.

#include "embplan/cost/neural.hpp"

namespace embplan_bench {

inline const embplan::neural_cost& bundled_compute_model() {
  static const auto m = embplan::neural_cost::load(EMBPLAN_BUNDLED_COMPUTE_MODEL);
  return m;
}

}  // namespace embplan_bench
