// Plan-for-plan parity with TorchRec v0.3.2's own EmbeddingShardingPlanner:
// every case of test/torchrec/golden/*.json (made by
// tools/torchrec/make_golden.py, which runs TorchRec itself; README.md there
// says how each file was made) is planned by torchrec::plan and must give
// TorchRec's plan exactly: each table's sharding type and compute kernel, each
// shard's rank, size and offsets, its perf and storage to the last bit, the
// plan's rating, the reserved capacity, the number of proposals and of plans,
// and, where TorchRec found none, the same kind of failure; and the same plan
// again with the default cut (proposals that cannot beat the best plan are
// not partitioned).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/task.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/io/json_file.hpp"
#include "embplan/torchrec/planner.hpp"

namespace torchrec_golden_test {

using namespace embplan;
namespace tr = embplan::torchrec;
using json = nlohmann::json;

struct golden_case {
  std::string file;
  json data;
};

std::vector<golden_case> golden_cases() {
  const std::filesystem::path dir =
      std::filesystem::path(EMBPLAN_SOURCE_DIR) / "test" / "torchrec" / "golden";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<golden_case> out;
  for (const auto& f : files) {
    const json doc = io::read_json_file(f.string());
    for (const auto& c : doc.at("cases"))
      out.push_back({f.filename().string(), c});
  }
  return out;
}

// The golden case's task and options, as make_golden.py gave them to TorchRec.
std::pair<task, tr::planner_options> inputs_of(const json& c) {
  task t;
  const auto world = c.at("world_size").get<std::size_t>();
  device_spec d;
  d.memory_bytes = c.at("hbm_cap").get<std::uint64_t>();
  t.cluster = uniform_topology(world, d, c.at("local_world_size").get<std::int32_t>());
  for (const auto& row : c.at("tables")) {
    table_spec s;
    s.name = row.at(0).get<std::string>();
    s.rows = row.at(1).get<std::int64_t>();
    s.dim = row.at(2).get<std::int32_t>();
    s.pooling_factor = row.at(3).get<double>();
    s.weight_dtype = parse_dtype(row.at(4).get<std::string>(), "dtype");
    s.reuse_hist[0] = 1.0;
    t.tables.push_back(s);
  }
  const auto batch = c.at("batch_size").get<std::int64_t>();
  t.batch_size = batch * static_cast<std::int64_t>(world);
  t.optimizer_state = parse_optimizer(c.at("optimizer").get<std::string>(), "optimizer");
  tr::planner_options o;
  o.batch_size = batch;
  o.ddr_cap = c.at("ddr_cap").get<std::int64_t>();
  const auto& opts = c.at("options");
  if (!opts.at("min_partition").is_null())
    o.min_partition = opts.at("min_partition").get<std::int32_t>();
  if (!opts.at("sharding_types").is_null()) {
    for (const auto& s : opts.at("sharding_types"))
      o.sharding_types.push_back(tr::parse_sharding_type(s.get<std::string>(), "sharding_types"));
  }
  if (opts.at("kernels").is_null()) {
    o.all_kernels = true;  // TorchRec's default sharder
  } else {
    for (const auto& k : opts.at("kernels"))
      o.kernels.push_back(tr::parse_compute_kernel(k.get<std::string>(), "kernels"));
  }
  return {t, o};
}

// The first difference between the port's result and TorchRec's, or "".
// `exhaustive`: the port partitioned every distinct proposal, as TorchRec
// does, so its plan count is TorchRec's too.
std::string difference(const task& t, const tr::planner_result& got, const json& want,
                       bool exhaustive) {
  std::ostringstream out;
  out.precision(17);
  if (want.at("num_proposals").get<std::uint64_t>() != got.proposals) {
    out << "proposals " << got.proposals << " vs TorchRec's " << want.at("num_proposals");
    return out.str();
  }
  if (want.contains("error")) {
    if (got.ok)
      return "a plan where TorchRec found none (" + want.at("error").get<std::string>() + ")";
    if (want.at("error").get<std::string>() != to_string(got.failure)) {
      return "failure " + std::string(to_string(got.failure)) + " vs TorchRec's " +
             want.at("error").get<std::string>();
    }
    return "";
  }
  if (!got.ok) return "no plan (" + got.message + ") where TorchRec found one";
  if (exhaustive && want.at("num_plans").get<std::uint64_t>() != got.plans) {
    out << "plans " << got.plans << " vs TorchRec's " << want.at("num_plans");
    return out.str();
  }
  const auto& reserved = want.at("reserved");
  if (got.reserved[0].hbm != reserved.at("hbm").get<std::int64_t>() ||
      got.reserved[0].ddr != reserved.at("ddr").get<std::int64_t>()) {
    out << "reserved " << got.reserved[0].hbm << " vs TorchRec's " << reserved;
    return out.str();
  }
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    index[t.tables[i].name] = i;
  const auto& plan = want.at("plan");
  if (plan.size() != t.tables.size()) return "TorchRec's plan has another number of tables";
  for (const auto& entry : plan) {
    const auto name = entry.at(0).get<std::string>();
    const auto& table = got.tables.at(index.at(name));
    if (to_string(table.type) != entry.at(1).get<std::string>() ||
        to_string(table.kernel) != entry.at(2).get<std::string>()) {
      return "table " + name + ": " + std::string(to_string(table.type)) + "/" +
             std::string(to_string(table.kernel)) + " vs TorchRec's " + entry.at(1).dump() + "/" +
             entry.at(2).dump();
    }
    const auto& shards = entry.at(3);
    if (shards.size() != table.shards.size()) return "table " + name + ": shard count";
    for (std::size_t k = 0; k < shards.size(); ++k) {
      const auto& w = shards[k];
      const auto& s = table.shards[k];
      const bool same =
          s.rank == w.at(0).get<std::int64_t>() && s.block.rows == w.at(1).get<std::int64_t>() &&
          s.block.cols == w.at(2).get<std::int64_t>() &&
          s.block.row_offset == w.at(3).get<std::int64_t>() &&
          s.block.col_offset == w.at(4).get<std::int64_t>() && s.perf == w.at(5).get<double>() &&
          s.bytes.hbm == w.at(6).get<std::int64_t>() && s.bytes.ddr == w.at(7).get<std::int64_t>();
      if (!same) {
        out << "table " << name << " shard " << k << ": rank " << s.rank << ", " << s.block.rows
            << "x" << s.block.cols << " at " << s.block.row_offset << "," << s.block.col_offset
            << ", perf " << s.perf << ", hbm " << s.bytes.hbm << ", ddr " << s.bytes.ddr
            << " vs TorchRec's " << w.dump();
        return out.str();
      }
    }
  }
  if (got.rating != want.at("rating").get<double>()) {
    out << "rating " << got.rating << " vs TorchRec's " << want.at("rating");
    return out.str();
  }
  return "";
}

TEST_CASE("the torchrec port returns TorchRec v0.3.2's own plan on every golden case") {
  const auto cases = golden_cases();
  REQUIRE(cases.size() >= 40);
  std::size_t matched = 0;
  std::size_t plans = 0;
  std::uint64_t partitions = 0;
  std::uint64_t partitions_exhaustive = 0;
  for (const auto& c : cases) {
    const auto name = c.file + ": " + c.data.at("name").get<std::string>();
    CAPTURE(name);
    auto [t, o] = inputs_of(c.data);
    // As TorchRec runs: every distinct proposal partitioned.
    o.exhaustive = true;
    const auto all = tr::plan(t, o);
    const auto diff = difference(t, all, c.data.at("result"), true);
    CHECK_MESSAGE(diff.empty(), diff);
    // The default: proposals that cannot beat the best plan are not
    // partitioned; the same plan.
    o.exhaustive = false;
    const auto cut = tr::plan(t, o);
    const auto diff_cut = difference(t, cut, c.data.at("result"), false);
    CHECK_MESSAGE(diff_cut.empty(), "without partitioning every proposal: " << diff_cut);
    CHECK(cut.proposals == all.proposals);
    CHECK(cut.plans <= all.plans);
    if (diff.empty() && diff_cut.empty()) ++matched;
    if (all.ok) ++plans;
    partitions += cut.plans;
    partitions_exhaustive += all.plans;
  }
  MESSAGE("TorchRec parity: " << matched << " of " << cases.size() << " golden cases match ("
                              << plans << " plans, the rest no plan in both); " << partitions
                              << " proposals partitioned of the " << partitions_exhaustive
                              << " that partition");
  CHECK(matched == cases.size());
  // The cut does cut: fewer than half the partitions TorchRec makes.
  CHECK(2 * partitions < partitions_exhaustive);
}

}  // namespace torchrec_golden_test
