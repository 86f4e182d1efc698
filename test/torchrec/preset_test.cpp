// The port inside embplan: the `torchrec` preset returns torchrec::plan's
// plan as embplan shards, torchrec_cost prices it at TorchRec's own rating,
// and a kernel that would move a table to another tier is refused.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/torchrec_cost.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/presets.hpp"
#include "embplan/run_preset.hpp"
#include "embplan/search/torchrec.hpp"
#include "embplan/torchrec/planner.hpp"

namespace torchrec_preset_test {

using namespace embplan;
namespace tr = embplan::torchrec;

// NeuroShard-protocol tasks drawn for `memory_gib` per device, planned on
// devices of `scale` x that (TorchRec counts the batch's buffers and reserves
// 15 % and 20 x the input: in HBM alone, most tasks drawn for 4 GiB fit only
// devices of about twice that).
std::vector<task> protocol_tasks(std::size_t devices, double memory_gib, std::uint64_t seed,
                                 std::uint64_t scale = 1) {
  data::task_options o;
  o.devices = devices;
  o.count = 6;
  o.seed = seed;
  o.device_memory_bytes = static_cast<std::uint64_t>(memory_gib * static_cast<double>(gib));
  auto tasks = data::generate_tasks(data::synthetic_pool(), o);
  for (auto& t : tasks)
    for (auto& d : t.cluster.devices)
      d.memory_bytes *= scale;
  return tasks;
}

// Whether TorchRec's plan has an empty row block (priced on its rank by
// TorchRec, no shard in embplan's plan).
bool has_empty_block(const tr::planner_result& r) {
  for (const auto& t : r.tables)
    for (const auto& s : t.shards)
      if (s.block.rows == 0) return true;
  return false;
}

TEST_CASE(
    "run_preset(\"torchrec\") returns TorchRec's plan, priced at its rating by torchrec_cost") {
  std::size_t compared = 0;
  std::size_t failed = 0;
  for (const std::size_t devices : {4, 8}) {
    for (const std::uint64_t scale : {1, 4}) {
      for (const auto& t : protocol_tasks(devices, 4.0, 11, scale)) {
        CAPTURE(t.name);
        const auto want = tr::plan(t);
        const auto got = run_preset("torchrec", t);
        REQUIRE(got.ok == want.ok);
        if (!want.ok) {
          CHECK(got.failure.find("TorchRec's planner: no plan") != std::string::npos);
          ++failed;
          continue;
        }
        CHECK(got.placement == to_search_result(t, want).placement);
        CHECK(got.search_model == "torchrec");
        if (!has_empty_block(want)) {
          CHECK(evaluate(t, got.placement, torchrec_cost{}).max_ms() == want.rating);
          CHECK(got.search_cost.max_ms() == want.rating);
          ++compared;
        }
      }
    }
  }
  CHECK(compared > 10);
  CHECK(failed > 0);  // both outcomes met
}

TEST_CASE("torchrec_cost reads a row block as TorchRec's row-wise or table-row-wise layout") {
  task t = protocol_tasks(16, 4.0, 3).front();
  t.cluster = uniform_topology(16, {}, 8);  // two hosts of 8
  tr::planner_options o;
  o.sharding_types = {tr::sharding_type::row_wise, tr::sharding_type::table_row_wise};
  auto in = tr::inputs_of(t, o);
  const auto options = tr::enumerate_options(in, o.sharding_types);
  const torchrec_cost meter;
  // The table of most rows: in a table of fewer rows than devices the two
  // layouts can coincide, and the meter reads them as row-wise.
  std::size_t big = 0;
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    if (t.tables[i].rows > t.tables[big].rows) big = i;
  REQUIRE(t.tables[big].rows > 1000);
  for (const auto& opt : options[big]) {
    for (std::size_t s = 0; s < opt.shards.size(); ++s) {
      const auto& b = opt.shards[s];
      if (b.rows == 0) continue;
      shard piece{
          static_cast<std::uint32_t>(big), 0,    0, static_cast<std::int32_t>(b.cols), b.row_offset,
          b.row_offset + b.rows,           false};
      CAPTURE(to_string(opt.type));
      CAPTURE(b.row_offset);
      CAPTURE(b.rows);
      CAPTURE(t.tables[big].rows);
      CHECK(meter.shard_cost(t, piece) == opt.perf[s]);
    }
  }
}

TEST_CASE("all_kernels: a plan that moves a table to another tier is refused, naming it") {
  // Memory pressure (1 GiB on 4 devices): TorchRec's default sharder moves
  // tables to fused_uvm_caching or fused_uvm (test/torchrec/golden's
  // neuroshard_4.json has such plans for these tasks).
  tr::planner_options o;
  o.all_kernels = true;
  std::size_t refused = 0;
  for (const auto& t : protocol_tasks(4, 1.0, 2)) {
    const auto r = tr::plan(t, o);
    std::string moved;
    for (std::size_t i = 0; i < r.tables.size() && moved.empty(); ++i) {
      if (r.tables[i].kernel == tr::compute_kernel::fused_uvm_caching ||
          r.tables[i].kernel == tr::compute_kernel::fused_uvm) {
        moved = "('" + t.tables[i].name + "') in compute kernel " +
                std::string(to_string(r.tables[i].kernel));
      }
    }
    if (!r.ok || moved.empty()) continue;
    const auto s = to_search_result(t, r);
    CHECK_FALSE(s.ok);
    CHECK(s.failure.find(moved) != std::string::npos);
    CHECK(s.failure.find("but the task keeps it in tier hbm") != std::string::npos);
    ++refused;
  }
  CHECK(refused > 0);
}

}  // namespace torchrec_preset_test

namespace torchrec_preset_test {

// The cut (planner_options::exhaustive off, the default) against TorchRec's
// loop (every distinct proposal partitioned), beyond the golden cases:
// memory from tight to roomy, 4, 8 and 16 devices (two hosts), every kernel.
TEST_CASE("not partitioning proposals that cannot win gives the plan of partitioning them all") {
  std::size_t compared = 0;
  std::size_t with_plan = 0;
  std::uint64_t partitions = 0;
  std::uint64_t partitions_all = 0;
  for (const std::size_t devices : {4, 8, 16}) {
    for (const std::uint64_t scale : {1, 2, 8}) {
      for (const bool all_kernels : {false, true}) {
        for (auto t :
             protocol_tasks(devices, devices == 16 ? 4.0 : 1.0, 40 + devices + scale, scale)) {
          if (devices == 16) t.cluster.devices_per_host = 8;
          tr::planner_options o;
          o.all_kernels = all_kernels;
          o.exhaustive = true;
          const auto all = tr::plan(t, o);
          o.exhaustive = false;
          const auto cut = tr::plan(t, o);
          CAPTURE(devices);
          CAPTURE(scale);
          CAPTURE(all_kernels);
          REQUIRE(cut.ok == all.ok);
          CHECK(cut.proposals == all.proposals);
          CHECK(cut.plans <= all.plans);
          CHECK(cut.failure == all.failure);
          CHECK(cut.message == all.message);
          ++compared;
          partitions += cut.plans;
          partitions_all += all.plans;
          if (!all.ok) continue;
          ++with_plan;
          CHECK(cut.rating == all.rating);
          REQUIRE(cut.tables.size() == all.tables.size());
          for (std::size_t i = 0; i < all.tables.size(); ++i) {
            const auto& a = all.tables[i];
            const auto& c = cut.tables[i];
            CHECK(c.type == a.type);
            CHECK(c.kernel == a.kernel);
            REQUIRE(c.shards.size() == a.shards.size());
            for (std::size_t s = 0; s < a.shards.size(); ++s) {
              CHECK(c.shards[s].rank == a.shards[s].rank);
              CHECK(c.shards[s].block == a.shards[s].block);
              CHECK(c.shards[s].perf == a.shards[s].perf);
              CHECK(c.shards[s].bytes == a.shards[s].bytes);
            }
          }
        }
      }
    }
  }
  MESSAGE(compared << " tasks, " << with_plan << " with a plan; " << partitions << " of "
                   << partitions_all << " partitions made");
  CHECK(with_plan >= compared / 3);
  CHECK(2 * partitions < partitions_all);
}

}  // namespace torchrec_preset_test
