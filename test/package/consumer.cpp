// A downstream trainer: plans four tables on two devices with a preset.
#include <embplan/embplan.hpp>

#include <cstdio>

int main() {
  embplan::task t;
  t.cluster = embplan::uniform_topology(2);
  for (int i = 0; i < 4; ++i) {
    embplan::table_spec spec;
    spec.name = "t" + std::to_string(i);
    spec.rows = 1000 * (i + 1);
    spec.dim = 16;
    spec.pooling_factor = 2.0 + i;
    t.tables.push_back(spec);
  }
  const auto result = embplan::lookup_greedy_planner{}(t, 0);
  if (!result.ok) return 1;
  embplan::validate(t, result.placement);
  std::printf("planned %zu shards, cost %.3f ms\n", result.placement.shards.size(),
              result.cost_ms.max_ms());
  return 0;
}
