#include "embplan/constraint/max_device_dim.hpp"

#include <doctest/doctest.h>

namespace {

embplan::task two_device_task(std::int32_t dim) {
  embplan::task t;
  t.cluster = embplan::uniform_topology(2);
  embplan::table_spec s;
  s.name = "t0";
  s.rows = 10;
  s.dim = dim;
  s.pooling_factor = 1.0;
  t.tables.push_back(s);
  return t;
}

}  // namespace

TEST_CASE("max_device_dim bounds a device's sum of columns (NeuroShard Alg. 2)") {
  const embplan::max_device_dim rule{.max_dim = 64};
  embplan::placement_state st(2);
  st.dim_sum[0] = 48;
  const auto t16 = two_device_task(16);
  const auto t20 = two_device_task(20);
  CHECK(rule.admits(t16, st, embplan::whole_table(t16, 0, 0)));  // 48 + 16 = 64
  CHECK_FALSE(rule.admits(t20, st, embplan::whole_table(t20, 0, 0)));
  CHECK(rule.admits(t20, st, embplan::whole_table(t20, 0, 1)));  // device 1 holds nothing
  CHECK(rule.describe() == "device dim at most 64");
}

TEST_CASE("max_device_dim has no bound by default") {
  embplan::placement_state st(2);
  st.dim_sum[1] = std::int64_t{1} << 40;
  const auto t = two_device_task(1 << 20);
  CHECK(embplan::max_device_dim{}.admits(t, st, embplan::whole_table(t, 0, 1)));
  CHECK_FALSE(embplan::max_device_dim{.max_dim = 0}.admits(t, st, embplan::whole_table(t, 0, 0)));
}
