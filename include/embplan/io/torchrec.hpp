#pragma once
// A plan as TorchRec would describe it: per table, a ParameterSharding with
// its sharding_type, compute_kernel, ranks, and an EnumerableShardingSpec
// whose shards are ShardMetadata (shard_offsets / shard_sizes in [row, col]
// order, placement "rank:r/cuda:l"). The names follow torchrec.distributed
// types, so a Python script can rebuild the plan with one dict comprehension:
//   {"t3": {"sharding_type": "column_wise", "compute_kernel": "fused",
//           "ranks": [0, 2],
//           "sharding_spec": {"shards": [
//             {"shard_offsets": [0, 0], "shard_sizes": [1000, 8], "placement": "rank:0/cuda:0"},
//             {"shard_offsets": [0, 8], "shard_sizes": [1000, 8], "placement": "rank:2/cuda:2"}]}}}
// Declared replicas are listed apart under "replicas" with the same shard fields.
// A table off hbm gets compute_kernel "fused_uvm_caching" (uvm_caching, with
// its ParameterSharding's cache_params {"load_factor": x}, TorchRec's
// CacheParams) or "fused_uvm" (host). A data-parallel table is
//   {"sharding_type": "data_parallel", "compute_kernel": "dense",
//    "ranks": [0, 1, ...], "sharding_spec": null}
// as TorchRec's ParameterSharding of a DATA_PARALLEL table (no sharding spec:
// every rank holds the whole table).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io {

namespace detail {

// TorchRec's EmbeddingComputeKernel for a table's tier (FBGEMM's
// EmbeddingLocation DEVICE, MANAGED_CACHING, MANAGED).
constexpr std::string_view torchrec_compute_kernel(memory_tier t) noexcept {
  switch (t) {
    case memory_tier::hbm:
      return "fused";
    case memory_tier::uvm_caching:
      return "fused_uvm_caching";
    case memory_tier::host:
      return "fused_uvm";
  }
  return "fused";
}

// rank r -> "rank:r/cuda:(r mod devices_per_host)": the CUDA index is local to
// the host, as in torch.distributed's remote-device strings.
inline std::string torchrec_placement(const topology& topo, std::size_t rank) {
  const auto per_host =
      static_cast<std::size_t>(topo.devices_per_host > 0 ? topo.devices_per_host : 1);
  return "rank:" + std::to_string(rank) + "/cuda:" + std::to_string(rank % per_host);
}

inline nlohmann::json torchrec_shard(const topology& topo, const shard& s) {
  nlohmann::json j = nlohmann::json::object();
  j["shard_offsets"] = {s.row_begin, static_cast<std::int64_t>(s.col_begin)};
  j["shard_sizes"] = {s.rows(), static_cast<std::int64_t>(s.cols())};
  j["placement"] = torchrec_placement(topo, s.device);
  return j;
}

}  // namespace detail

// Validates `p` against `t` (coverage, not memory), then describes each table.
// Tables are keyed by name ("t<i>" for an unnamed table i); two tables with the
// same key are an error, since the description could not tell them apart.
inline nlohmann::json torchrec_sharding(const task& t, const plan& p) {
  validate(t, p, plan_check{.memory = false});
  const std::size_t tables = t.tables.size();
  std::vector<std::vector<const shard*>> pieces(tables);
  std::vector<std::vector<const shard*>> replicas(tables);
  for (const auto& s : p.shards)
    (s.replica ? replicas : pieces)[s.table].push_back(&s);

  nlohmann::json out = nlohmann::json::object();
  for (std::size_t ti = 0; ti < tables; ++ti) {
    const auto& spec = t.tables[ti];
    const std::string key = spec.name.empty() ? "t" + std::to_string(ti) : spec.name;
    if (out.contains(key)) {
      embplan::detail::fail(embplan::detail::path(embplan::detail::path("tables", ti), "name"), key,
                            "a name no other table has (TorchRec keys tables by name)");
    }
    nlohmann::json ranks = nlohmann::json::array();
    nlohmann::json shards = nlohmann::json::array();
    for (const shard* s : pieces[ti]) {
      ranks.push_back(s->device);
      shards.push_back(detail::torchrec_shard(t.cluster, *s));
    }
    nlohmann::json entry = nlohmann::json::object();
    entry["sharding_type"] = std::string(sharding_type_of(t.cluster, spec, pieces[ti]));
    if (!pieces[ti].empty() && pieces[ti].front()->data_parallel) {
      entry["compute_kernel"] = "dense";
      entry["ranks"] = std::move(ranks);
      entry["sharding_spec"] = nullptr;
      out[key] = std::move(entry);
      continue;
    }
    entry["compute_kernel"] = std::string(detail::torchrec_compute_kernel(spec.placement.tier));
    if (spec.placement.tier == memory_tier::uvm_caching) {
      entry["cache_params"] = {{"load_factor", spec.placement.load_factor}};
    }
    entry["ranks"] = std::move(ranks);
    entry["sharding_spec"] = nlohmann::json::object();
    entry["sharding_spec"]["shards"] = std::move(shards);
    if (!replicas[ti].empty()) {
      nlohmann::json extra = nlohmann::json::array();
      for (const shard* s : replicas[ti])
        extra.push_back(detail::torchrec_shard(t.cluster, *s));
      entry["replicas"] = std::move(extra);
    }
    out[key] = std::move(entry);
  }
  return out;
}

}  // namespace embplan::inline EMBPLAN_ABI::io
