#pragma once
// stage_options: the stages embplan::run_preset (run_preset.hpp) adds to a
// preset on request, kept apart so that a caller may name them without
// including every preset.

#include "embplan/stage/split_oversized.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// The rowwise_ prefix and the rules' min_shards aside: data-parallel copies
// of small tables, where split tables go across hosts, and row cuts of
// tables that fit by cost (stage/split_oversized.hpp, split_oversized).
struct stage_options {
  stage::data_parallel_options data_parallel{};
  stage::row_layout layout = stage::row_layout::by_cost;
  bool rows_by_cost = false;
};

}  // namespace embplan::inline EMBPLAN_ABI
