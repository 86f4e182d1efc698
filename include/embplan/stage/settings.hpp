#pragma once
// stage::stage_settings: what the stage (stage::staged, stage/staged.hpp)
// does around a searcher, every job opt-in, with the two knobs it is made of
// (row_layout, data_parallel_options). Light on purpose: naming the settings
// (run_preset, the CLI) does not include the stage's algorithms.
// Design notes: docs/design/stage.md.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::stage {

// Where a table that fits no device goes (stage_settings::layout), on a
// cluster of several hosts:
enum class row_layout {
  by_cost,    // the cheaper of host_first's host-local layout and row_wise, where
              // both fit (layout_comm_ms; ties: the host-local one)
  row_wise,   // the fewest devices of any hosts (the only layout on one host)
  host_first  // table_row_wise where a host holds it, else grid, else row_wise
};

// The layouts' names, in the enum's order.
inline constexpr std::array<std::string_view, 3> row_layout_names{"by_cost", "row_wise",
                                                                  "host_first"};

inline std::string_view to_string(row_layout l) noexcept {
  return row_layout_names[static_cast<std::size_t>(l)];
}

// "by_cost" | "row_wise" | "host_first"; anything else fails naming `field`.
inline row_layout row_layout_from(std::string_view text, std::string_view field) {
  for (std::size_t i = 0; i < row_layout_names.size(); ++i)
    if (text == row_layout_names[i]) return static_cast<row_layout>(i);
  embplan::detail::fail(field, text, "one of by_cost, row_wise, host_first");
}

// Which tables the stage replicates as data-parallel copies
// (stage/data_parallel.hpp; docs/design/stage.md says how it chooses).
struct data_parallel_options {
  bool enabled = false;
  double memory_fraction = 0.1;  // of the smallest device memory, for all copies together

  void validate() const {
    if (!(memory_fraction >= 0.0 && memory_fraction <= 1.0)) {
      embplan::detail::fail("data_parallel.memory_fraction", memory_fraction,
                            "a fraction in [0, 1]");
    }
  }

  friend bool operator==(const data_parallel_options&, const data_parallel_options&) = default;
};

// The stage's jobs. None is on by default: the default settings leave the
// searcher's plan as it is, except for the column blocks of tables the
// user's rules give a min_shards, which the stage cuts whenever it runs.
struct stage_settings {
  bool split_rows = false;    // tables no device admits whole split by rows (the rowwise_ presets)
  std::int64_t hot_rows = 0;  // rows [0, hot_rows) of a split table replicated (0: none)
  row_layout layout = row_layout::by_cost;  // where a split table's pieces go, across hosts
  data_parallel_options data_parallel{};    // small tables replicated
  bool rows_by_cost = false;                // tables that fit cut by rows where cheaper

  // Whether any job is asked for (the min_shards column blocks aside).
  bool any() const noexcept { return split_rows || data_parallel.enabled || rows_by_cost; }

  friend bool operator==(const stage_settings&, const stage_settings&) = default;
};

}  // namespace embplan::inline EMBPLAN_ABI::stage
