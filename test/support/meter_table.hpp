#pragma once
// A small table for the meters' tests: named by its rows, half its lookups to
// rows used once, half to rows used three times (reuse bin 2).
#include <cstdint>
#include <string>

#include "embplan/core/table_spec.hpp"

namespace embplan::test {

inline table_spec meter_table(std::int64_t rows, std::int32_t dim, double pooling_factor) {
  table_spec t;
  t.name = "t" + std::to_string(rows);
  t.rows = rows;
  t.dim = dim;
  t.pooling_factor = pooling_factor;
  t.reuse_hist[0] = 0.5;
  t.reuse_hist[2] = 0.5;
  return t;
}

}  // namespace embplan::test
