#pragma once
// Small random tasks for tests: uniform draws in the given ranges (not the
// MetaSyn statistics; tests want control over sizes to make memory bind).

#include <cstddef>
#include <cstdint>
#include <string>

#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"

namespace embplan_test {

struct random_task_options {
  std::size_t tables = 40;
  std::size_t devices = 4;
  std::uint64_t device_memory_bytes = 4 * embplan::gib;
  std::int64_t min_rows = 1000;
  std::int64_t max_rows = 100'000;
  std::int32_t min_dim = 4;        // dims are min_dim x 2^k ...
  std::int32_t dim_doublings = 5;  // ... for k in [0, dim_doublings]
  double min_pooling_factor = 1.0;
  double max_pooling_factor = 30.0;
  embplan::reuse_histogram reuse_hist{1.0};
};

inline embplan::task random_task(std::uint64_t seed, const random_task_options& o = {}) {
  embplan::rng gen(seed);
  embplan::task t;
  t.name = "random-" + std::to_string(seed);
  embplan::device_spec dev;
  dev.memory_bytes = o.device_memory_bytes;
  t.cluster = embplan::uniform_topology(o.devices, dev);
  for (std::size_t i = 0; i < o.tables; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = gen.between(o.min_rows, o.max_rows);
    s.dim = static_cast<std::int32_t>(o.min_dim << gen.between(0, o.dim_doublings));
    s.pooling_factor = gen.uniform(o.min_pooling_factor, o.max_pooling_factor);
    s.reuse_hist = o.reuse_hist;
    t.tables.push_back(s);
  }
  return t;
}

// The searchers' tests' task: 200k rows at most, half the lookups on rows
// used once (search/ tests share it so their figures stay comparable).
inline embplan::task search_task(std::uint64_t seed, std::size_t tables, std::size_t devices = 4,
                                 std::uint64_t memory = 512u << 20) {
  return random_task(seed, {.tables = tables,
                            .devices = devices,
                            .device_memory_bytes = memory,
                            .max_rows = 200'000,
                            .reuse_hist = {0.5, 0.3, 0.0, 0.0, 0.2}});
}

// A search_task whose memory binds: `fill` of the cluster's memory is used
// (devices of equal capacity).
inline embplan::task tight_task(std::uint64_t seed, std::size_t tables, std::size_t devices,
                                double fill) {
  auto t = search_task(seed, tables, devices);
  std::uint64_t total = 0;
  for (const auto& s : t.tables)
    total += embplan::table_bytes(s);
  for (auto& d : t.cluster.devices)
    d.memory_bytes = static_cast<std::uint64_t>(static_cast<double>(total) / fill /
                                                static_cast<double>(devices));
  return t;
}

}  // namespace embplan_test
