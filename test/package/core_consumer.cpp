// A downstream trainer that plans with the analytic and heuristic costs only:
// embplan::core, <embplan/core.hpp>, no Eigen, nlohmann/json or xtensor.
#include <embplan/core.hpp>

#include <cstdio>
#include <string>

static_assert(EMBPLAN_VERSION ==
              EMBPLAN_VERSION_MAJOR * 10000 + EMBPLAN_VERSION_MINOR * 100 + EMBPLAN_VERSION_PATCH);

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
  const auto greedy = embplan::lookup_greedy_planner{}(t, 0);
  const auto searched = embplan::neuroshard_planner{}(t, 0);
  if (!greedy.ok || !searched.ok) return 1;
  embplan::validate(t, greedy.placement);
  embplan::validate(t, searched.placement);
  std::printf("embplan %d.%d.%d: planned %zu and %zu shards\n", EMBPLAN_VERSION_MAJOR,
              EMBPLAN_VERSION_MINOR, EMBPLAN_VERSION_PATCH, greedy.placement.shards.size(),
              searched.placement.shards.size());
  return 0;
}
