// meter/mpi/plan_meter.hpp under `mpirun -np 2` (test/CMakeLists.txt runs this
// executable through MPIEXEC): a 2-device plan measured with a real
// MPI_Alltoallv. doctest's own main is not used: MPI must be initialised
// around the test run.
#include "embplan/meter/mpi/plan_meter.hpp"  // first: it picks MPI's C API

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace {

namespace eb = embplan::meter;

// Small and quick: four tables, a short protocol, a small batch.
eb::mpi::plan_meter_options quick() {
  eb::mpi::plan_meter_options o;
  o.compute.options.batch_size = 256;
  o.compute.options.protocol = {.warmup = 1, .runs = 3, .drop = 1};
  o.comm_batch_size = 256;
  o.comm_protocol = {.warmup = 1, .runs = 3, .drop = 1, .flush = false};
  return o;
}

embplan::task small_task(std::size_t devices) {
  auto t = embplan_test::random_task(5, {.tables = 4,
                                         .devices = devices,
                                         .min_rows = 1000,
                                         .max_rows = 20'000,
                                         .min_dim = 8,
                                         .dim_doublings = 2,
                                         .max_pooling_factor = 8.0});
  t.batch_size = 1024;  // measured at 256, scaled by 4
  return t;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace

TEST_CASE("measure_plan: a 2-device plan with a real all-to-all, the same on every rank") {
  REQUIRE(world_size() == 2);
  const auto t = small_task(2);
  const std::vector<std::size_t> assignment{0, 0, 1, 1};
  const auto p = embplan::table_wise_plan(t, assignment);
  const auto cost = eb::mpi::measure_plan(MPI_COMM_WORLD, t, p, quick());
  REQUIRE(cost.devices.size() == 2);
  CHECK(cost.dim_sum[0] == t.tables[0].dim + t.tables[1].dim);
  CHECK(cost.dim_sum[1] == t.tables[2].dim + t.tables[3].dim);
  for (const auto& d : cost.devices) {
    CHECK(d.fwd_compute_ms > 0.0);
    CHECK(d.bwd_compute_ms > 0.0);
    CHECK(d.fwd_comm_ms > 0.0);
    CHECK(d.bwd_comm_ms > 0.0);
  }
  // NeuroShard's start skew: the device that is ready first waits in the
  // forward all-to-all for the other, so its forward comm covers the gap
  // (less timer slack).
  std::vector<double> start(2);
  for (std::size_t d = 0; d < 2; ++d) {
    const auto& c = cost.devices[d];
    start[d] = c.fwd_compute_ms + c.bwd_compute_ms + c.bwd_comm_ms;
  }
  const std::size_t early = start[0] <= start[1] ? 0 : 1;
  CHECK(cost.devices[early].fwd_comm_ms >= 0.9 * std::abs(start[1] - start[0]));
  // Every rank holds the same figures (rank 0's, broadcast, compared bit for bit).
  double mine[8];
  for (std::size_t d = 0; d < 2; ++d) {
    const auto& c = cost.devices[d];
    mine[4 * d + 0] = c.fwd_compute_ms;
    mine[4 * d + 1] = c.bwd_compute_ms;
    mine[4 * d + 2] = c.fwd_comm_ms;
    mine[4 * d + 3] = c.bwd_comm_ms;
  }
  double root[8];
  std::copy(std::begin(mine), std::end(mine), std::begin(root));
  MPI_Bcast(root, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  for (int i = 0; i < 8; ++i)
    CHECK(root[i] == mine[i]);
}

TEST_CASE("measure_plan: bad input names the field and the value") {
  REQUIRE(world_size() == 2);
  // Three devices, two ranks: refused on every rank before any collective.
  const auto t = small_task(3);
  const std::vector<std::size_t> assignment{0, 1, 2, 0};
  const auto p = embplan::table_wise_plan(t, assignment);
  const std::string m = embplan::test::message_of(
      [&] { (void)eb::mpi::measure_plan(MPI_COMM_WORLD, t, p, quick()); });
  CHECK(m.find("measure_plan.ranks") != std::string::npos);
  CHECK(m.find("2") != std::string::npos);
  CHECK(m.find("3") != std::string::npos);
  auto o = quick();
  o.comm_batch_size = 0;
  const std::string m2 = embplan::test::message_of(
      [&] { (void)eb::mpi::measure_plan(MPI_COMM_WORLD, small_task(2), p, o); });
  CHECK(m2.find("plan_meter.comm_batch_size") != std::string::npos);
  CHECK(m2.find("0") != std::string::npos);
}

#include "support/mpi_doctest_main.hpp"
