// The public aggregates built with partial designated initializers, as users
// write them: every member left out has a default member initializer, so
// -Wextra (-Wmissing-field-initializers) stays quiet. test/CMakeLists.txt
// compiles this file with -Werror=missing-field-initializers. GCC 12 checks
// designated initializers; Clang 14 only positional ones (the second case).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/data/features.hpp"
#include "embplan/io/safetensors.hpp"

TEST_CASE("public aggregates: partial designated initializers leave the rest at defaults") {
  const embplan::table_spec spec{.rows = 1000, .dim = 64};
  CHECK(spec.name.empty());
  CHECK(spec.pooling_factor == 0.0);
  CHECK(spec.weight_dtype == embplan::dtype::fp32);

  const embplan::device_spec device{.memory_bytes = embplan::gib};
  CHECK(device.name.empty());
  CHECK(device.memory_bandwidth_gbps == 616.0);

  const embplan::topology cluster{.devices_per_host = 4};
  CHECK(cluster.devices.empty());
  CHECK(cluster.inter_host_bandwidth_gbps == 12.5);

  const embplan::task t{.batch_size = 1024};
  CHECK(t.name.empty());
  CHECK(t.tables.empty());
  CHECK(t.cluster.devices.empty());
  CHECK(t.optimizer_state == embplan::optimizer::none);

  const embplan::task named{.name = "t", .tables = {spec}};
  CHECK(named.cluster.devices_per_host == 8);

  const embplan::shard s{.table = 1, .col_end = 64, .row_end = 1000};
  CHECK(s.device == 0);
  CHECK_FALSE(s.replica);
  const embplan::plan p{};
  CHECK(p.shards.empty());
  const embplan::plan_check check{.dim_multiple = 4};
  CHECK(check.memory);

  const embplan::device_cost dc{.fwd_compute_ms = 1.0};
  CHECK(dc.total_ms() == 1.0);
  const embplan::plan_cost pc{.memory_bytes = {1, 2}};
  CHECK(pc.devices.empty());
  CHECK(pc.dim_sum.empty());
  const embplan::compute_cost cc{.fwd_ms = 2.0};
  CHECK(cc.total_ms() == 2.0);
  const embplan::comm_cost comm{.bwd_ms = 3.0};
  CHECK(comm.fwd_ms == 0.0);

  const embplan::data::feature_options opts{.dim = 16};
  CHECK(opts.name.empty());
  CHECK(opts.min_rows == 1);

  const embplan::io::tensor tensor{.values = {1.0f}};
  CHECK(tensor.dtype == "F32");
  CHECK(tensor.shape.empty());
  const embplan::io::safetensors_file file{.source = "memory"};
  CHECK(file.tensors.empty());
  CHECK(file.metadata.empty());
}

TEST_CASE("public aggregates: leading members given positionally") {
  const embplan::task t{"t"};
  CHECK(t.tables.empty());
  const embplan::topology cluster{{embplan::device_spec{"gpu0"}}};
  CHECK(cluster.size() == 1);
  CHECK(cluster.devices.front().memory_bytes == 4 * embplan::gib);
  const embplan::io::tensor tensor{"F16"};
  CHECK(tensor.values.empty());
  const embplan::io::safetensors_file file{{}};
  CHECK(file.source.empty());
}
