#pragma once
// The trained models run_preset needs for "dreamshard" and "autoshard": the
// bundled policies, loaded once.
#include <string>

#include "embplan/rl/autoshard_preset.hpp"
#include "embplan/rl/dreamshard_preset.hpp"
#include "embplan/run_preset.hpp"

namespace embplan_test {

inline embplan::preset_models bundled_models() {
  static const auto policy = embplan::rl::dreamshard_policy::load(
      std::string(EMBPLAN_SOURCE_DIR) + "/data/rl/dreamshard_cpu_4dev.safetensors");
  static const auto autoshard = embplan::rl::autoshard_policy::load(
      std::string(EMBPLAN_SOURCE_DIR) + "/data/rl/autoshard_cpu_8dev.safetensors");
  return {.dreamshard = embplan::rl::dreamshard_preset(policy),
          .autoshard = embplan::rl::autoshard_preset(autoshard)};
}

}  // namespace embplan_test
