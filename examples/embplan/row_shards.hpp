#pragma once
// `embplan plan`'s list of row-wise shards: tables split by rows (and their
// declared hot-row replicas), one line per piece, under the per-device report.
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "text_table.hpp"

namespace embplan_cli {

inline void print_row_shards(std::ostream& os, const embplan::task& t, const embplan::plan& p) {
  std::vector<const embplan::shard*> pieces;
  for (const auto& s : p.shards)
    if (s.replica || s.row_begin != 0 || s.row_end != t.tables[s.table].rows) pieces.push_back(&s);
  if (pieces.empty()) return;
  os << "row-wise shards (rows [begin, end) of a table split by rows; replica = hot-row copy):\n";
  text_table table({"table", "device", "rows", "row count", "columns", "GiB", "kind"});
  for (const auto* s : pieces) {
    const auto& spec = t.tables[s->table];
    const auto& dev = t.cluster.devices[s->device];
    table.add(
        {spec.name.empty() ? "t" + std::to_string(s->table) : spec.name,
         dev.name.empty() ? std::to_string(s->device) : dev.name,
         "[" + std::to_string(s->row_begin) + ", " + std::to_string(s->row_end) + ")",
         std::to_string(s->rows()),
         "[" + std::to_string(s->col_begin) + ", " + std::to_string(s->col_end) + ")",
         fixed(static_cast<double>(embplan::shard_bytes(t, *s)) / static_cast<double>(embplan::gib),
               3),
         s->replica ? "replica" : "rows"});
  }
  table.print(os);
}

}  // namespace embplan_cli
