#pragma once
// stage_options: the stages embplan::run_preset (run_preset.hpp) adds to a
// preset on request, kept apart so that a caller may name them without
// including every preset.

#include "embplan/rowwise/split.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// The rowwise_ prefix and the rules' min_shards aside: data-parallel copies
// of small tables, where split tables go across hosts, and row cuts of
// tables that fit by cost (rowwise/split.hpp, split_oversized).
struct stage_options {
  rowwise::data_parallel_options data_parallel{};
  rowwise::row_layout layout = rowwise::row_layout::by_cost;
  bool rows_by_cost = false;
};

}  // namespace embplan::inline EMBPLAN_ABI
