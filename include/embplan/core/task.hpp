#pragma once
// task: the tables to place, the devices to place them on, and the batch.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/table_spec.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct task {
  std::string name{};
  std::vector<table_spec> tables{};
  topology cluster{};
  std::int64_t batch_size = 65536;  // MetaSyn's global batch (fbgemm_t856_bs65536)
  optimizer optimizer_state = optimizer::none;

  friend bool operator==(const task&, const task&) = default;
};

inline void validate(const task& t, std::string_view where = "task") {
  const auto tables = detail::path(where, "tables");
  if (t.tables.empty()) detail::fail(tables, 0, "at least one table");
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    validate(t.tables[i], detail::path(tables, i));
  validate(t.cluster, detail::path(where, "cluster"));
  if (t.batch_size <= 0) {
    detail::fail(detail::path(where, "batch_size"), t.batch_size, "a positive integer");
  }
}

}  // namespace embplan::inline EMBPLAN_ABI
